// fused_ce, step 3 (the GLSL twin of finish.wgsl: the same parameters and bindings, one workgroup): loss = sum of
// the row losses / n_valid (0 when n_valid is 0), in a fixed order.
#version 450
#extension GL_GOOGLE_include_directive : require

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows;
  uint loss_off;
  uint _pad0, _pad1;
} p;  // 16 bytes: FinishParams in fused_ce.cpp

layout(std430, binding = 0) readonly buffer RowLoss { float row_loss[]; };
layout(std430, binding = 1) readonly buffer Stats { float stats[]; };
layout(std430, binding = 2) buffer Loss { float loss[]; };

#include "common/reduce.glsl"

void main() {
  const uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint r = t; r < p.rows; r += WG) acc += row_loss[r];
  const float total = workgroup_sum(t, acc);
  if (t == 0u) loss[p.loss_off] = stats[0] > 0.0 ? total / stats[0] : 0.0;
}
