// fused_ce, step 1 (the GLSL twin of count.wgsl: the same parameters and bindings, one workgroup): the rows whose
// label is not ignored (>= 0), as f32 in stats[0], or host_n_valid where the host gives the count.
#version 450
#extension GL_GOOGLE_include_directive : require

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows;
  uint labels_off;
  uint host_count;  // 1: use host_n_valid instead of counting
  float host_n_valid;
} p;  // 16 bytes: CountParams in fused_ce.cpp

layout(std430, binding = 0) readonly buffer Labels { int labels[]; };
layout(std430, binding = 1) buffer Stats { float stats[]; };

#include "common/reduce.glsl"

void main() {
  const uint t = gl_LocalInvocationID.x;
  float n = 0.0;
  for (uint r = t; r < p.rows; r += WG) n += labels[p.labels_off + r] >= 0 ? 1.0 : 0.0;
  const float total = workgroup_sum(t, n);
  if (t == 0u) stats[0] = p.host_count != 0u ? p.host_n_valid : total;
}
