// q4gsw re-quantisation (the GLSL twin of requant.wgsl: the same parameters, bindings and grid, a 1-D index split
// over x and y): one thread per code word (8 weights of a row).
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K). The quotient is
// only a guess; the rounding is decided exactly by the sign of x - (q +- 1/2) s, computed with one fused fma.
#version 450

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

uint quantize(float x_in, float s_in) {
  if (s_in == 0.0) return 8u;
  float x = x_in, s = s_in;
  if (s < 0.0) {
    x = -x;
    s = -s;
  }
  float q = clamp(round(x / s), -9.0, 8.0);
  const float above = fma(-(q + 0.5), s, x);
  if (above > 0.0 || (above == 0.0 && (int(q) & 1) != 0)) {
    q += 1.0;
  } else {
    const float below = fma(-(q - 0.5), s, x);
    if (below < 0.0 || (below == 0.0 && (int(q) & 1) != 0)) q -= 1.0;
  }
  return uint(int(clamp(q, -8.0, 7.0)) + 8);
}

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
