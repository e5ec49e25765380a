// q4gsw re-quantisation in one pass over the latent (the GLSL twin of requant_groups.wgsl, which says how): TPG =
// group_size / 8 neighbouring threads a group, one code word each; with RECOMPUTE the group's scale max |x| / 7 is
// found through workgroup memory, written and used, else read. The parameters, bindings and grid are the WGSL
// kernel's, so that q4gsw.cpp drives both. Variants (requant_groups.variants): RECOMPUTE 0/1, VEC 1/4 (the latent
// read as vec4s: K and its offset multiples of 4), WPT 1/2 (code words a thread: with 2 a workgroup takes two runs
// of gpw groups, each thread a word of each, its four loads issued first).
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef RECOMPUTE
#define RECOMPUTE 0
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef WPT
#define WPT 1
#endif
#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint rows;        // N
  uint k;           // K
  uint words;       // words per row
  uint group_size;
  uint latent_off;  // in floats
  uint groups;      // groups per row
  uint tpg;         // threads (words) a group
  uint gpw;         // groups a workgroup
} p;  // 32 bytes: GroupsParams in q4gsw.cpp

#if VEC == 4
layout(std430, binding = 0) readonly buffer Latent { vec4 latent[]; };
vec4 load4(uint n, uint k0) { return k0 >= p.k ? vec4(0.0) : latent[(p.latent_off + n * p.k + k0) / 4u]; }
#else
layout(std430, binding = 0) readonly buffer Latent { float latent[]; };
vec4 load4(uint n, uint k0) {
  vec4 v = vec4(0.0);
  for (uint j = 0u; j < 4u; ++j)
    if (k0 + j < p.k) v[j] = latent[p.latent_off + n * p.k + k0 + j];
  return v;
}
#endif
#if RECOMPUTE
layout(std430, binding = 1) buffer Scales { float scales[]; };
#else
layout(std430, binding = 1) readonly buffer Scales { float scales[]; };
#endif
layout(std430, binding = 2) buffer Codes { uint codes[]; };

shared float group_max[WG * uint(WPT)];  // max |x| of each thread's word in run r at r * WG + thread

#include "q4gsw/quantize.glsl"

// The code word a thread takes in the r-th run of gpw groups of workgroup wgi.
struct Word {
  uint n, g, w;
  bool live;
};
Word word_at(uint wgi, uint r, uint lg, uint lane) {
  const uint gi = (wgi * uint(WPT) + r) * p.gpw + lg;
  Word x;
  x.n = gi / p.groups;
  x.g = gi % p.groups;
  x.w = x.g * p.tpg + lane;
  x.live = lg < p.gpw && x.n < p.rows && x.w < p.words;
  return x;
}

float abs_max(vec4 lo, vec4 hi) {
  const vec4 a = max(abs(lo), abs(hi));
  return max(max(a.x, a.y), max(a.z, a.w));
}

// The scale of the group of the r-th run: max |x| / 7 over its threads' group_max entries, written; or read.
float group_scale(Word x, uint r, uint lg, uint lane) {
#if RECOMPUTE
  float m = 0.0;
  if (lg < p.gpw)
    for (uint l = 0u; l < p.tpg; ++l) m = max(m, group_max[r * WG + lg * p.tpg + l]);
  const float s = m / 7.0;
  if (x.live && lane == 0u) scales[x.g * p.rows + x.n] = s;
  return s;
#else
  return x.live ? scales[x.g * p.rows + x.n] : 0.0;
#endif
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint lg = t / p.tpg, lane = t % p.tpg;
  const uint wgi = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const Word x0 = word_at(wgi, 0u, lg, lane), x1 = word_at(wgi, 1u, lg, lane);
  vec4 lo0 = vec4(0.0), hi0 = vec4(0.0), lo1 = vec4(0.0), hi1 = vec4(0.0);
  if (x0.live) {
    lo0 = load4(x0.n, x0.w * 8u);
    hi0 = load4(x0.n, x0.w * 8u + 4u);
  }
  if (WPT == 2 && x1.live) {
    lo1 = load4(x1.n, x1.w * 8u);
    hi1 = load4(x1.n, x1.w * 8u + 4u);
  }
#if RECOMPUTE
  group_max[t] = abs_max(lo0, hi0);
  if (WPT == 2) group_max[WG + t] = abs_max(lo1, hi1);
  barrier();
#endif
  const float s0 = group_scale(x0, 0u, lg, lane);
  if (x0.live) codes[x0.n * p.words + x0.w] = quantize8(lo0, hi0, s0);  // past K: zeros, code 8
  if (WPT == 2) {
    const float s1 = group_scale(x1, 1u, lg, lane);
    if (x1.live) codes[x1.n * p.words + x1.w] = quantize8(lo1, hi1, s1);
  }
}
