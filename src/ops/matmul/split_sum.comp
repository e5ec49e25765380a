// The end of a split-K GEMM (gemm.comp): c[i] (+)= sum over the layers s of part[s][i], in layer order (the same
// result every run). The GLSL twin of split_sum.wgsl: the same parameters, bindings and grid (a 1-D index split
// over x and y, x * 256 threads a grid row). Variant: ACCUMULATE (add to what c holds; split_sum.variants).
#version 450

#ifndef ACCUMULATE
#define ACCUMULATE 0
#endif
#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint n;       // elements of c (M * N)
  uint splits;
  uint c_off;
  uint _pad;
} p;  // 16 bytes: SplitParams in matmul.cpp

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) buffer C { float c[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
  if (i >= p.n) return;
  float acc = 0.0;
  for (uint s = 0; s < p.splits; ++s) acc += part[s * p.n + i];
#if ACCUMULATE
  acc += c[p.c_off + i];
#endif
  c[p.c_off + i] = acc;
}
