// The end of a split-K GEMM (gemm.comp): c[i] (+)= sum over the layers s of part[s][i], in layer order.
// The GLSL twin of split_sum.wgsl.
#version 450

layout(local_size_x = 256) in;
layout(constant_id = 0) const bool ACCUMULATE = false;

layout(push_constant) uniform Params {
  uint n, splits, c_off, row;  // row: elements per grid row (the grid may be split over x and y)
} p;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) buffer C { float c[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * p.row;
  if (i >= p.n) return;
  float acc = 0.0;
  for (uint s = 0; s < p.splits; ++s) acc += part[s * p.n + i];
  if (ACCUMULATE) acc += c[p.c_off + i];
  c[p.c_off + i] = acc;
}
