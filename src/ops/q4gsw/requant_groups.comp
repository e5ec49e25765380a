// q4gsw re-quantisation in one pass over the latent (the GLSL twin of requant_groups.wgsl, which says how): TPG =
// group_size / 8 neighbouring threads a group, one code word each; with RECOMPUTE the group's scale max |x| / 7 is
// found through workgroup memory, written and used, else read. The parameters, bindings and grid are the WGSL
// kernel's, so that q4gsw.cpp drives both. Variants (requant_groups.variants): RECOMPUTE 0/1, VEC 1/4 (the latent
// read as vec4s: K and its offset multiples of 4).
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef RECOMPUTE
#define RECOMPUTE 0
#endif
#ifndef VEC
#define VEC 1
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

shared float group_max[WG];

#include "q4gsw/quantize.glsl"

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint lg = t / p.tpg, lane = t % p.tpg;
  const uint gi = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * p.gpw + lg;
  const uint n = gi / p.groups, g = gi % p.groups;
  const uint w = g * p.tpg + lane;
  const bool live = lg < p.gpw && n < p.rows && w < p.words;
  vec4 lo = vec4(0.0), hi = vec4(0.0);
  if (live) {
    lo = load4(n, w * 8u);
    hi = load4(n, w * 8u + 4u);
  }
#if RECOMPUTE
  const vec4 a = max(abs(lo), abs(hi));
  group_max[t] = max(max(a.x, a.y), max(a.z, a.w));
  barrier();
  float m = 0.0;
  if (lg < p.gpw)
    for (uint l = 0u; l < p.tpg; ++l) m = max(m, group_max[lg * p.tpg + l]);
  const float s = m / 7.0;
  if (live && lane == 0u) scales[g * p.rows + n] = s;
#endif
  if (!live) return;
#if !RECOMPUTE
  const float s = scales[g * p.rows + n];
#endif
  codes[n * p.words + w] = quantize4(lo, s) | (quantize4(hi, s) << 16u);  // lanes past K: zeros, code 8
}
