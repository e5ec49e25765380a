// fused_ce, step 2 for long rows, out of place (the GLSL twin of split.wgsl, which says how it works and why no wait
// is unbounded): each row cut into p.parts parts of SPAN = CHUNKS * WG_SIZE elements (of T), one workgroup a part
// holding it in registers, so that every logit is read once; the parts' statistics exchanged through the board
// (word 0: tickets; part i of row r: words 1 + 2 (r * parts + i), max then sum, 0 EMPTY, else bits + 2), a part not
// published within p.spin polls read from memory by the workgroup that needs it.
// Parameters, bindings and grid are split.wgsl's (the board the sixth binding, dlogits the seventh), so that
// fused_ce.cpp drives both. Variants (split.variants): WG_SIZE, VEC (4: vec4 rows), CHUNKS (2, 8).
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef WG_SIZE
#define WG_SIZE 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CHUNKS
#define CHUNKS 8
#endif
#define WG uint(WG_SIZE)
#define SPAN (uint(CHUNKS) * WG)
#define MAX_PARTS 64
#define EMPTY 0u
layout(local_size_x = WG_SIZE) in;

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
  uint rows;
  uint vocab;       // per row, in T units
  uint logits_off;  // in T units
  uint labels_off;
  uint out_off;     // in T units
  uint index_bit;   // bit to set in index_error for a label >= vocab
  uint parts;       // workgroups a row
  uint spin;        // polls of an unpublished part before reading it from memory
} p;  // 32 bytes: SplitParams in fused_ce.cpp

layout(std430, binding = 0) readonly buffer Logits { T logits[]; };
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) buffer IndexError { uint index_error[]; };
layout(std430, binding = 5) coherent buffer Board { uint board[]; };
layout(std430, binding = 6) writeonly buffer DLogits { T dlogits[]; };

#include "common/reduce.glsl"

void store_d(uint i, T v) { dlogits[i] = v; }

shared uint wg_ticket;
shared float part_m[MAX_PARTS];
shared float part_s[MAX_PARTS];
shared uint missing[MAX_PARTS];  // parts not published in time, in no particular order
shared uint n_missing;

uint enc(float v) {  // never EMPTY
  const uint b = floatBitsToUint(v);
  return ((b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : b) + 2u;
}
float dec(uint w) { return uintBitsToFloat(w - 2u); }
uint load_word(uint i) { return atomicOr(board[i], 0u); }

T elem(uint base, uint j) { return j < p.vocab ? logits[base + j] : T(LOWEST); }

// This thread's statistics over its elements of part i, read from memory: the held path's loops, so the same bits.
vec2 thread_stats_read(uint base, uint i, uint t) {
  float m = LOWEST;
  for (uint c = 0u; c < uint(CHUNKS); ++c) m = max(m, hmax(elem(base, i * SPAN + t + c * WG)));
  float s = 0.0;
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = i * SPAN + t + c * WG;
    if (j < p.vocab) s += hsum(exp(logits[base + j] - m));
  }
  return vec2(m, s);
}

void main() {
  if (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x >= p.rows * p.parts) return;  // grid padding
  const uint t = gl_LocalInvocationID.x;
  if (t == 0u) {
    wg_ticket = atomicAdd(board[0], 1u);
    n_missing = 0u;
  }
  barrier();
  const uint ticket = wg_ticket;
  const uint row = ticket / p.parts, part = ticket % p.parts;
  const uint base = p.logits_off + row * p.vocab, out_base = p.out_off + row * p.vocab;
  const uint lo = part * SPAN;
  const int label = labels[p.labels_off + row];
  const bool bad = label >= int(p.vocab * VEC);
  if (label < 0 || bad) {  // ignored or refused row: every part knows from the label, none publishes
    if (part == 0u && t == 0u) {
      if (bad) atomicOr(index_error[0], p.index_bit);
      row_loss[row] = 0.0;
    }
    for (uint j = lo + t; j < min(lo + SPAN, p.vocab); j += WG) store_d(out_base + j, T(0.0));
    return;
  }

  T xs[CHUNKS];
  float m = LOWEST;
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    xs[c] = elem(base, lo + t + c * WG);
    m = max(m, hmax(xs[c]));
  }
  float s = 0.0;
  for (uint c = 0u; c < uint(CHUNKS); ++c)
    if (lo + t + c * WG < p.vocab) s += hsum(exp(xs[c] - m));
  const vec2 own = row_stats(t, m, s);

  // Publish this part and gather the others: thread i looks after part i.
  const uint slot = 1u + 2u * row * p.parts;
  if (t == part) {
    part_m[t] = own.x;
    part_s[t] = own.y;
    atomicExchange(board[slot + 2u * t], enc(own.x));
    atomicExchange(board[slot + 2u * t + 1u], enc(own.y));
  } else if (t < p.parts) {
    uint wm = EMPTY, ws = EMPTY;
    for (uint k = 0u; k <= p.spin; ++k) {
      ws = load_word(slot + 2u * t + 1u);
      if (ws != EMPTY) {
        wm = load_word(slot + 2u * t);
        if (wm != EMPTY) break;
      }
    }
    if (wm == EMPTY || ws == EMPTY) {
      missing[atomicAdd(n_missing, 1u)] = t;
    } else {
      part_m[t] = dec(wm);
      part_s[t] = dec(ws);
    }
  }
  barrier();
  const uint n = n_missing;
  for (uint k = 0u; k < n; ++k) {  // the parts not published in time, read here and published
    const uint i = missing[k];
    const vec2 ts = thread_stats_read(base, i, t);
    const vec2 ps = row_stats(t, ts.x, ts.y);
    if (t == 0u) {
      part_m[i] = ps.x;
      part_s[i] = ps.y;
      atomicExchange(board[slot + 2u * i], enc(ps.x));
      atomicExchange(board[slot + 2u * i + 1u], enc(ps.y));
    }
  }
  barrier();

  float row_max = part_m[0], row_sum = part_s[0];
  for (uint i = 1u; i < p.parts; ++i) {
    const vec2 r = merge_stats(row_max, row_sum, part_m[i], part_s[i]);
    row_max = r.x;
    row_sum = r.y;
  }
  const float inv_n = stats[0] > 0.0 ? 1.0 / stats[0] : 0.0;  // n_valid 0: nothing counts
  const float scale = inv_n / row_sum;
  const uint lab = uint(label);
  const bool has_label = (lab / uint(VEC)) / SPAN == part;
  float x_label = 0.0;
#if VEC == 4
  if (has_label) x_label = logits[base + lab / 4u][lab % 4u];
#else
  if (has_label) x_label = logits[base + lab];
#endif
  for (uint c = 0u; c < uint(CHUNKS); ++c) {
    const uint j = lo + t + c * WG;
    if (j < p.vocab) store_d(out_base + j, exp(xs[c] - row_max) * scale - onehot(j, lab) * inv_n);
  }
  if (has_label && t == 0u) row_loss[row] = log(row_sum) + row_max - x_label;
}
