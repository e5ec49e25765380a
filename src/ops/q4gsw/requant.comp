// q4gsw re-quantisation (the GLSL twin of requant.wgsl: the same parameters, bindings and grid, a 1-D index split
// over x and y): one thread per code word (8 weights of a row).
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K); the rounding as
// q4gsw/quantize.glsl decides it.
#version 450
#extension GL_GOOGLE_include_directive : require

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows;        // N
  uint k;           // K
  uint words;       // words per row
  uint group_size;
  uint latent_off;
  uint _pad0, _pad1, _pad2;
} p;  // 32 bytes: RequantParams in q4gsw.cpp

layout(std430, binding = 0) readonly buffer Latent { float latent[]; };
layout(std430, binding = 1) readonly buffer Scales { float scales[]; };
layout(std430, binding = 2) buffer Codes { uint codes[]; };

#include "q4gsw/quantize.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
  if (i >= p.rows * p.words) return;
  const uint n = i / p.words, w = i % p.words;
  uint word = 0u;
  for (uint j = 0; j < 8u; ++j) {
    const uint k = w * 8u + j;
    const uint code = k < p.k ? quantize(latent[p.latent_off + n * p.k + k], scales[(k / p.group_size) * p.rows + n])
                              : 8u;
    word |= code << (4u * j);
  }
  codes[i] = word;
}
