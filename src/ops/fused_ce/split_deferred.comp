// fused_ce, after split.comp: writes the parts it deferred (the GLSL twin of split_deferred.wgsl, which says how and
// why). One workgroup a part of the grid; a part not marked deferred on the board is left alone.
// Parameters, bindings and grid are split_deferred.wgsl's (the board the fifth binding, dlogits the sixth when not in
// place). Variants (split_deferred.variants): VEC (4: vec4 rows), IN_PLACE.
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef VEC
#define VEC 1
#endif
#ifndef IN_PLACE
#define IN_PLACE 0
#endif
#define WG 256u
layout(local_size_x = 256) in;

#include "fused_ce/elements.glsl"

layout(push_constant) uniform Params {
  uint rows;
  uint vocab;       // per row, in T units
  uint logits_off;  // in T units
  uint labels_off;
  uint out_off;     // in T units
  uint parts;       // split.comp's parts a row
  uint span;        // split.comp's elements (of T) a part
  uint pad0;
} p;  // 32 bytes: DeferredParams in fused_ce.cpp

#if IN_PLACE
layout(std430, binding = 0) buffer Logits { T logits[]; };
#else
layout(std430, binding = 0) readonly buffer Logits { T logits[]; };
layout(std430, binding = 5) writeonly buffer DLogits { T dlogits[]; };
#endif
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) coherent buffer Board { uint board[]; };

#include "common/reduce.glsl"

#if IN_PLACE
void store_d(uint i, T v) { logits[i] = v; }
#else
void store_d(uint i, T v) { dlogits[i] = v; }
#endif

float dec(uint w) { return uintBitsToFloat(w - 2u); }

void main() {
  const uint gi = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;  // row * parts + part
  if (gi >= p.rows * p.parts) return;
  if (board[1u + 4u * gi + 3u] == 0u) return;  // not deferred (uniform: one word for the whole workgroup)
  const uint t = gl_LocalInvocationID.x;
  const uint row = gi / p.parts, part = gi % p.parts;
  const uint slot = 1u + 4u * row * p.parts;
  float row_max = dec(board[slot]), row_sum = dec(board[slot + 1u]);
  for (uint i = 1u; i < p.parts; ++i) {
    const vec2 r = merge_stats(row_max, row_sum, dec(board[slot + 4u * i]), dec(board[slot + 4u * i + 1u]));
    row_max = r.x;
    row_sum = r.y;
  }
  const float inv_n = stats[0] > 0.0 ? 1.0 / stats[0] : 0.0;
  const float scale = inv_n / row_sum;
  const uint lab = uint(labels[p.labels_off + row]);  // >= 0: only counted rows defer
  const uint base = p.logits_off + row * p.vocab, out_base = p.out_off + row * p.vocab;
  const bool has_label = (lab / uint(VEC)) / p.span == part;
  float x_label = 0.0;
#if VEC == 4
  if (has_label) x_label = logits[base + lab / 4u][lab % 4u];
#else
  if (has_label) x_label = logits[base + lab];
#endif
  barrier();  // x_label read everywhere before it is written over
  const uint lo = part * p.span;
  for (uint j = lo + t; j < min(lo + p.span, p.vocab); j += WG)
    store_d(out_base + j, d_of(logits[base + j], j, row_max, scale, lab, inv_n));
  if (has_label && t == 0u) row_loss[row] = log(row_sum) + row_max - x_label;
}
