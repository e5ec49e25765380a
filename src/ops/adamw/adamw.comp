// AdamW in place (the GLSL twin of adamw.wgsl), as torch.optim.AdamW, over the segments of a table: each segment
// a parameter's length and the offsets of its param, grad, m and v in four shared buffers. step_scalars: -lr / bc1,
// sqrt(bc2), -, -, then each segment's 1 - lr * weight_decay (rewritten by the host each step). VEC (1 or 4, see
// adamw.variants): elements per thread; with 4, every length and offset is a multiple of 4 and counted in vec4s.
// Parameters, bindings and grid (a 1-D index split over x and y) are adamw.wgsl's, so that adamw.cpp drives both.
#version 450

#ifndef VEC
#define VEC 1
#endif
#if VEC == 4
#define T vec4
#else
#define T float
#endif

#define WG 256u
layout(local_size_x = 256) in;

layout(push_constant) uniform Params {
  uint total;     // elements (in VEC units) over all segments
  uint segments;
  uint _pad0, _pad1;
  float one_minus_beta1, beta2, one_minus_beta2, eps;
} p;  // 32 bytes: AdamWParams in adamw.cpp

struct Segment {
  uint start, len, p_off, g_off, m_off, v_off, pad0, pad1;
};

layout(std430, binding = 0) readonly buffer Table { Segment segments[]; };
layout(std430, binding = 1) readonly buffer Grad { T grad[]; };
layout(std430, binding = 2) buffer Param { T param[]; };
layout(std430, binding = 3) buffer M1 { T m1[]; };
layout(std430, binding = 4) buffer M2 { T m2[]; };
layout(std430, binding = 5) readonly buffer StepScalars { float step_scalars[]; };

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
  if (i >= p.total) return;
  uint lo = 0u, hi = p.segments;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (segments[mid].start <= i) lo = mid; else hi = mid;
  }
  const Segment s = segments[lo];
  const uint e = i - s.start;
  const T g = grad[s.g_off + e];
  const T w = param[s.p_off + e] * step_scalars[4u + lo];
  const T m0 = m1[s.m_off + e];
  const float wt = p.one_minus_beta1;
  const T m = wt < 0.5 ? m0 + wt * (g - m0) : g - (g - m0) * (1.0 - wt);
  const T v = m2[s.v_off + e] * p.beta2 + p.one_minus_beta2 * g * g;
  m1[s.m_off + e] = m;
  m2[s.v_off + e] = v;
  param[s.p_off + e] = w + step_scalars[0] * (m / (sqrt(v) / step_scalars[1] + p.eps));
}
