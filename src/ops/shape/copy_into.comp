// dst[view] = src[view], elementwise over one shape, as 32-bit words (any dtype, bit for bit). Operand 0 is the
// source view, operand 1 the destination view (a slice of a larger tensor, for cat and slice assignment).
// The GLSL twin of copy_into.wgsl: the same parameters (StridedParams, 192 bytes: see common/strided.glsl),
// bindings and grid (a 1-D index split over x and y), so that copy_into in elementwise/map.cpp drives both.
#version 450
#extension GL_GOOGLE_include_directive : require

#define WG 256u
layout(local_size_x = 256) in;

#include "common/strided.glsl"

layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Dst { uint dst[]; };

void main() {
  const uint i = linear_index();
  if (i >= p.n) return;
  const uvec3 o = operand_offsets(i);
  dst[o.y] = src[o.x];
}
