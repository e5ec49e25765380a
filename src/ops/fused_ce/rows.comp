// fused_ce, step 2 (the GLSL twin of rows.wgsl): one workgroup per row of logits [R, V]. Pass 1 keeps a running
// (max, sum of exp(x - max)) per thread and merges them; pass 2 writes
//   dlogits = (exp(x - max) / sum - onehot(label)) / n_valid
// (0 on an ignored row, label < 0, and everywhere when n_valid is 0) and the row's loss log(sum) + max - x[label].
// The probabilities are never stored; every exponent is <= 0. A label >= V is refused: zero gradient, no loss, and
// bit p.index_bit in the error word. The parameters, bindings and grid are rows.wgsl's (row = workgroup x + y *
// workgroups in x), so that fused_ce.cpp drives both; so is the split of a row (rows.wgsl says why): the first
// CHUNKS * WG elements held in registers between the passes (read once), the rest streamed twice, UNROLL loads a
// thread at once, pass 2 over the blocks backwards when p.reverse is set.
// Variants (rows.variants): WG_SIZE threads a row (1024 where the device allows); VEC = 4 where V and the offsets
// are multiples of 4 (then vocab and offsets count vec4s); IN_PLACE: dlogits over the logits (each element read,
// then written, by one thread), the logits binding then read-write and no dlogits binding (5 bindings), else the
// logits read-only and dlogits the sixth binding; CHUNKS (0, 1, 2, 4, 8) and UNROLL (1, 4; 2 with CHUNKS 8).
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef IN_PLACE
#define IN_PLACE 0
#endif
#ifndef CHUNKS
#define CHUNKS 0
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#define WG uint(WG_SIZE)
layout(local_size_x = WG_SIZE) in;

#include "fused_ce/elements.glsl"

layout(push_constant) uniform Params {
  uint rows;
  uint vocab;       // per row, in T units
  uint logits_off;  // in T units
  uint labels_off;
  uint out_off;     // in T units
  uint index_bit;   // bit to set in index_error for a label >= vocab
  uint reverse;     // 1: pass 2 walks the streamed blocks backwards
  uint _pad1;
} p;  // 32 bytes: RowParams in fused_ce.cpp

#if IN_PLACE
layout(std430, binding = 0) buffer Logits { T logits[]; };
#else
layout(std430, binding = 0) readonly buffer Logits { T logits[]; };
#endif
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) buffer IndexError { uint index_error[]; };  // the device's index-error word
#if !IN_PLACE
layout(std430, binding = 5) buffer DLogits { T dlogits[]; };
#endif

#include "common/reduce.glsl"

void store_d(uint i, T v) {
#if IN_PLACE
  logits[i] = v;
#else
  dlogits[i] = v;
#endif
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;  // uniform: one row per workgroup
  const uint t = gl_LocalInvocationID.x;
  const uint base = p.logits_off + row * p.vocab, out_base = p.out_off + row * p.vocab;
  const int label = labels[p.labels_off + row];
  const bool bad = label >= int(p.vocab * VEC);
  if (bad && t == 0u) atomicOr(index_error[0], p.index_bit);
  if (label < 0 || bad) {
    for (uint j = t; j < p.vocab; j += WG) store_d(out_base + j, T(0.0));
    if (t == 0u) row_loss[row] = 0.0;
    return;
  }
  float m = LOWEST, s = 0.0;
#if CHUNKS > 0
  T xs[CHUNKS];  // the held elements
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = t + c * WG;
    xs[c] = T(LOWEST);
    if (j < p.vocab) xs[c] = logits[base + j];
    m = max(m, hmax(xs[c]));
  }
  for (uint c = 0u; c < uint(CHUNKS); ++c)
    if (t + c * WG < p.vocab) s += hsum(exp(xs[c] - m));
#endif
  // The streamed part: [s0, s0 + blocks * UNROLL * WG) in whole blocks, then the tail up to V.
  const uint s0 = uint(CHUNKS) * WG;
  const uint span = p.vocab > s0 ? p.vocab - s0 : 0u;
  const uint blocks = span / (uint(UNROLL) * WG);
  const uint tail0 = s0 + blocks * uint(UNROLL) * WG;
  for (uint b = 0u; b < blocks; ++b) {
    const uint j0 = base + s0 + b * (uint(UNROLL) * WG) + t;
    T xb[UNROLL];
    float bm = m;
    for (uint u = 0u; u < uint(UNROLL); ++u) {
      xb[u] = logits[j0 + u * WG];
      bm = max(bm, hmax(xb[u]));
    }
    float bs = 0.0;
    for (uint u = 0u; u < uint(UNROLL); ++u) bs += hsum(exp(xb[u] - bm));
    s = s * exp(m - bm) + bs;
    m = bm;
  }
  for (uint j = tail0 + t; j < p.vocab; j += WG) {
    const T x = logits[base + j];
    const float mx = max(m, hmax(x));
    s = s * exp(m - mx) + hsum(exp(x - mx));
    m = mx;
  }
  const vec2 st = row_stats(t, m, s);
  const float inv_n = stats[0] > 0.0 ? 1.0 / stats[0] : 0.0;  // n_valid 0: nothing counts
  const float scale = inv_n / st.y;
#if VEC == 4
  const float x_label = logits[base + uint(label) / 4u][uint(label) % 4u];
#else
  const float x_label = logits[base + uint(label)];
#endif
  barrier();  // everyone has read x_label before it is overwritten in place
  // Pass 2: the held part from registers, the streamed part read again (tail first).
#if CHUNKS > 0
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = t + c * WG;
    if (j < p.vocab) store_d(out_base + j, d_of(xs[c], j, st.x, scale, uint(label), inv_n));
  }
#endif
  for (uint j = tail0 + t; j < p.vocab; j += WG) {
    const T x = logits[base + j];
    store_d(out_base + j, d_of(x, j, st.x, scale, uint(label), inv_n));
  }
  for (uint i = 0u; i < blocks; ++i) {
    const uint b = p.reverse != 0u ? blocks - 1u - i : i;
    const uint j0 = s0 + b * (uint(UNROLL) * WG) + t;
    T xb[UNROLL];
    for (uint u = 0u; u < uint(UNROLL); ++u) xb[u] = logits[base + j0 + u * WG];
    for (uint u = 0u; u < uint(UNROLL); ++u) {
      const uint j = j0 + u * WG;
      store_d(out_base + j, d_of(xb[u], j, st.x, scale, uint(label), inv_n));
    }
  }
  if (t == 0u) row_loss[row] = log(st.y) + st.x - x_label;
}
