// Fills a contiguous range with one 32-bit word (the value's bits in its dtype). The GLSL twin of fill.wgsl: the
// same parameters, binding and grid (a 1-D index split over x and y), so that ops::full / fill and the pool's
// buffer poisoning drive both.
#version 450

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint n;
  uint off;
  uint word;
  uint _pad;
} p;  // 16 bytes: FillParams in shape/copy.cpp and gpu/pool.cpp

layout(std430, binding = 0) buffer Dst { uint dst[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
  if (i < p.n) dst[p.off + i] = p.word;
}
