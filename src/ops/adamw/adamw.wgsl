// AdamW, in place, as torch.optim.AdamW computes it (decoupled weight decay, bias-corrected moments), operation
// for operation:
//   p *= 1 - lr * wd                       (the factor rounded to f32 on the host)
//   m  = lerp(m, g, 1 - beta1)             (torch.lerp's two-sided form)
//   v  = v * beta2 + (1 - beta2) * g * g
//   p += -(lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps)),   bc1 = 1 - beta1^step, bc2 = 1 - beta2^step
// over any number of parameters in one dispatch: segments[] lists each one's length and the offsets of its param,
// grad, m and v (in units of VEC elements) in four shared buffers. A thread finds its segment by binary search
// over the segments' starts. The scalars that change from step to step are not uniforms but `step_scalars`, which
// the host rewrites before each step, so a recorded dispatch replays: -lr / bc1, sqrt(bc2), then each segment's
// decay factor 1 - lr * weight_decay. Variant: VEC (1, or 4 when every length and offset is a multiple of 4).
//
// @variant VEC {1|4} elements a thread takes: 4 where every length and offset is a multiple of 4
// @variant T {f32|vec4<f32>} the element type: vec4<f32> exactly when VEC is 4

const WG: u32 = 256u;
const VEC: u32 = {{VEC}}u;
alias T = {{T}};

struct Params {
  total: u32,       // elements (in VEC units) over all segments
  segments: u32,
  _pad0: u32,
  _pad1: u32,
  one_minus_beta1: f32,
  beta2: f32,
  one_minus_beta2: f32,
  eps: f32,
}

struct Segment {
  start: u32,       // first element of this segment in the virtual concatenation
  len: u32,
  p_off: u32,
  g_off: u32,
  m_off: u32,
  v_off: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> segments: array<Segment>;
@group(0) @binding(2) var<storage, read> grad: array<T>;
@group(0) @binding(3) var<storage, read_write> param: array<T>;
@group(0) @binding(4) var<storage, read_write> m1: array<T>;
@group(0) @binding(5) var<storage, read_write> m2: array<T>;
// [0] -lr / bc1, [1] sqrt(bc2), [2], [3] unused, [4 + s] segment s's 1 - lr * weight_decay
@group(0) @binding(6) var<storage, read> step_scalars: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.total) {
    return;
  }
  // The last segment whose start is <= i.
  var lo = 0u;
  var hi = p.segments;
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (segments[mid].start <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  let s = segments[lo];
  let e = i - s.start;
  let g = grad[s.g_off + e];
  let w = param[s.p_off + e] * step_scalars[4u + lo];
  let m0 = m1[s.m_off + e];
  let wt = p.one_minus_beta1;
  var m: T;
  if (wt < 0.5) {
    m = m0 + wt * (g - m0);
  } else {
    m = g - (g - m0) * (1.0 - wt);
  }
  let v = m2[s.v_off + e] * p.beta2 + p.one_minus_beta2 * g * g;
  m1[s.m_off + e] = m;
  m2[s.v_off + e] = v;
  param[s.p_off + e] = w + step_scalars[0] * (m / (sqrt(v) / step_scalars[1] + p.eps));
}
