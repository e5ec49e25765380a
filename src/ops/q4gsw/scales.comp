// q4gsw scales from the latent weights (the GLSL twin of scales.wgsl): scales[g][n] = max |latent[n][k]| / 7 over
// k in group g; one thread per (group, row).
#version 450

layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows, k, groups, group_size, latent_off, row;
} p;

layout(std430, binding = 0) readonly buffer Latent { float latent[]; };
layout(std430, binding = 1) writeonly buffer Scales { float scales[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * p.row;
  if (i >= p.rows * p.groups) return;
  const uint g = i / p.rows, n = i % p.rows;
  const uint begin = g * p.group_size, end = min(p.k, begin + p.group_size);
  float m = 0.0;
  for (uint k = begin; k < end; ++k) m = max(m, abs(latent[p.latent_off + n * p.k + k]));
  scales[i] = m / 7.0;
}
