// fused_ce, step 2 (the GLSL twin of rows.wgsl, streaming form): one workgroup per row of logits [R, V]. Pass 1
// keeps a running (max, sum of exp(x - max)) per thread and merges them; pass 2 writes
//   dlogits = (exp(x - max) / sum - onehot(label)) / n_valid
// (0 on an ignored row, label < 0) and the row's loss log(sum) + max - x[label]. The probabilities are never
// stored; every exponent is <= 0. IN_PLACE: dlogits over the logits (each element read, then written, by one
// thread). A label >= V is refused: zero gradient, no loss, and bit p.index_bit in the error word.
#version 450
#extension GL_GOOGLE_include_directive : require

#define WG 256u
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool IN_PLACE = false;

layout(push_constant) uniform Params {
  uint rows, vocab, logits_off, labels_off, out_off, index_bit, row_stride;  // row_stride: workgroups per grid row
} p;

layout(std430, binding = 0) buffer Logits { float logits[]; };
layout(std430, binding = 1) readonly buffer Labels { int labels[]; };
layout(std430, binding = 2) readonly buffer Stats { float stats[]; };
layout(std430, binding = 3) writeonly buffer RowLoss { float row_loss[]; };
layout(std430, binding = 4) buffer IndexError { uint index_error[]; };
layout(std430, binding = 5) writeonly buffer DLogits { float dlogits[]; };

#include "common/reduce.glsl"

void store_d(uint i, float v) {
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
  const bool bad = label >= int(p.vocab);
  if (bad && t == 0u) atomicOr(index_error[0], p.index_bit);
  if (label < 0 || bad) {
    for (uint j = t; j < p.vocab; j += WG) store_d(out_base + j, 0.0);
    if (t == 0u) row_loss[row] = 0.0;
    return;
  }
  float m = LOWEST, s = 0.0;
  for (uint j = t; j < p.vocab; j += WG) {
    const vec2 r = merge_stats(m, s, logits[base + j], 1.0);
    m = r.x;
    s = r.y;
  }
  const vec2 st = row_stats(t, m, s);
  const float inv_n = 1.0 / stats[0];
  const float scale = inv_n / st.y;
  const float x_label = logits[base + uint(label)];
  barrier();  // everyone has read x_label before it is overwritten in place
  for (uint j = t; j < p.vocab; j += WG) {
    const float x = logits[base + j];
    store_d(out_base + j, exp(x - st.x) * scale - (j == uint(label) ? inv_n : 0.0));
  }
  if (t == 0u) row_loss[row] = log(st.y) + st.x - x_label;
}
