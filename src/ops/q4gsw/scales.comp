// q4gsw scales from the latent weights (the GLSL twin of scales.wgsl: the same parameters, bindings and grid, a
// 1-D index split over x and y): scales[g][n] = max |latent[n][k]| / 7 over k in group g; one thread per
// (group, row), consecutive threads on consecutive rows of one group.
#version 450

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows;        // N
  uint k;           // K
  uint groups;
  uint group_size;
  uint latent_off;
  uint _pad0, _pad1, _pad2;
} p;  // 32 bytes: ScalesParams in q4gsw.cpp

layout(std430, binding = 0) readonly buffer Latent { float latent[]; };
layout(std430, binding = 1) buffer Scales { float scales[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
  if (i >= p.rows * p.groups) return;
  const uint g = i / p.rows, n = i % p.rows;
  const uint begin = g * p.group_size, end = min(p.k, begin + p.group_size);
  float m = 0.0;
  for (uint k = begin; k < end; ++k) m = max(m, abs(latent[p.latent_off + n * p.k + k]));
  scales[i] = m / 7.0;
}
