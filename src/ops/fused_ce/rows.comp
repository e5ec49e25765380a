// fused_ce, step 2 (the GLSL twin of rows.wgsl, streaming form): one workgroup per row of logits [R, V]. Pass 1
// keeps a running (max, sum of exp(x - max)) per thread and merges them; pass 2 writes
//   dlogits = (exp(x - max) / sum - onehot(label)) / n_valid
// (0 on an ignored row, label < 0, and everywhere when n_valid is 0) and the row's loss log(sum) + max - x[label]. The probabilities are never
// stored; every exponent is <= 0. IN_PLACE: dlogits over the logits (each element read, then written, by one
// thread). A label >= V is refused: zero gradient, no loss, and bit p.index_bit in the error word.
// Variants (rows.variants): WG_SIZE threads a row (1024 where the device allows: fewer rows in flight keep each in
// cache for pass 2), and VEC = 4 where V and the offsets are multiples of 4 (then vocab and offsets count vec4s).
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef VEC
#define VEC 1
#endif
#define WG uint(WG_SIZE)
layout(local_size_x = WG_SIZE) in;
layout(constant_id = 0) const bool IN_PLACE = false;

#if VEC == 4
#define T vec4
float hmax(vec4 v) { return max(max(v.x, v.y), max(v.z, v.w)); }
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
vec4 onehot(uint j, uint label) { return vec4(equal(uvec4(4u * j) + uvec4(0u, 1u, 2u, 3u), uvec4(label))); }
#else
#define T float
float hmax(float v) { return v; }
float hsum(float v) { return v; }
float onehot(uint j, uint label) { return j == label ? 1.0 : 0.0; }
#endif

layout(push_constant) uniform Params {
  uint rows, vocab, logits_off, labels_off, out_off, index_bit, row_stride;  // row_stride: workgroups per grid row
} p;

layout(std430, binding = 0) buffer Logits { T logits[]; };
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) writeonly buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) buffer IndexError { uint index_error[]; };
layout(std430, binding = 5) writeonly buffer DLogits { T dlogits[]; };

#include "common/reduce.glsl"

void store_d(uint i, T v) {
  if (IN_PLACE)
    logits[i] = v;
  else
    dlogits[i] = v;
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * p.row_stride;
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
  for (uint j = t; j < p.vocab; j += WG) {
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
  for (uint j = t; j < p.vocab; j += WG) {
    const T x = logits[base + j];
    store_d(out_base + j, exp(x - st.x) * scale - onehot(j, uint(label)) * inv_n);
  }
  if (t == 0u) row_loss[row] = log(st.y) + st.x - x_label;
}
