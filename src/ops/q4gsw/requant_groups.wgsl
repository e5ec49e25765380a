// q4gsw re-quantisation in one pass over the latent: each group of a row (group_size / 8 code words) is taken by
// TPG = group_size / 8 neighbouring threads of one workgroup (GPW groups a workgroup, consecutive along the rows, so
// that a warp's loads are contiguous), each thread one code word (8 weights). With RECOMPUTE the group's scale,
// max |x| / 7, is found first (each thread's max over its 8, then over the group's TPG through workgroup memory),
// written, and used: the latent is read once, where requant.wgsl after scales.wgsl read it twice (scales.wgsl with
// one thread reading a whole group: 32 threads' loads 4 KiB apart). Without it the scale is read.
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K, loaded as zeros);
// the rounding as requant.wgsl decides it (the shared q4gsw/quantize), so both give the same codes bit for bit.
//
// @variant RECOMPUTE {true|false} the scales computed from the latent (and written) rather than read
// @variant VEC4 {true|false} the latent read as vec4s: K and its offset multiples of 4

const WG: u32 = 256u;

struct Params {
  rows: u32,        // N
  k: u32,           // K
  words: u32,       // words per row
  group_size: u32,
  latent_off: u32,  // in floats
  groups: u32,      // groups per row
  tpg: u32,         // threads (words) a group: group_size / 8
  gpw: u32,         // groups a workgroup: WG / tpg
}

@group(0) @binding(0) var<uniform> p: Params;
{{#VEC4}}
@group(0) @binding(1) var<storage, read> latent: array<vec4<f32>>;
// latent[n, k0 .. k0 + 3]; K % 4 == 0, so a vec4 is all inside the row or all past it.
fn load4(n: u32, k0: u32) -> vec4<f32> {
  if (k0 >= p.k) {
    return vec4<f32>(0.0);
  }
  return latent[(p.latent_off + n * p.k + k0) / 4u];
}
{{/VEC4}}
{{^VEC4}}
@group(0) @binding(1) var<storage, read> latent: array<f32>;
fn load4(n: u32, k0: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j = j + 1u) {
    if (k0 + j < p.k) {
      v[j] = latent[p.latent_off + n * p.k + k0 + j];
    }
  }
  return v;
}
{{/VEC4}}
{{#RECOMPUTE}}
@group(0) @binding(2) var<storage, read_write> scales: array<f32>;
{{/RECOMPUTE}}
{{^RECOMPUTE}}
@group(0) @binding(2) var<storage, read> scales: array<f32>;
{{/RECOMPUTE}}
@group(0) @binding(3) var<storage, read_write> codes: array<u32>;

var<workgroup> group_max: array<f32, WG>;

{{>q4gsw/quantize}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let t = lid.x;
  let lg = t / p.tpg;    // the group within the workgroup
  let lane = t % p.tpg;  // the word within the group
  let gi = (wid.x + wid.y * nwg.x) * p.gpw + lg;
  let n = gi / p.groups;
  let g = gi % p.groups;
  let w = g * p.tpg + lane;
  let live = lg < p.gpw && n < p.rows && w < p.words;
  var lo = vec4<f32>(0.0);
  var hi = vec4<f32>(0.0);
  if (live) {
    lo = load4(n, w * 8u);
    hi = load4(n, w * 8u + 4u);
  }
{{#RECOMPUTE}}
  let a = max(abs(lo), abs(hi));
  group_max[t] = max(max(a.x, a.y), max(a.z, a.w));
  workgroupBarrier();
  var m = 0.0;
  if (lg < p.gpw) {
    for (var l = 0u; l < p.tpg; l = l + 1u) {
      m = max(m, group_max[lg * p.tpg + l]);
    }
  }
  let s = m / 7.0;
  if (live && lane == 0u) {
    scales[g * p.rows + n] = s;
  }
{{/RECOMPUTE}}
  if (!live) {
    return;
  }
{{^RECOMPUTE}}
  let s = scales[g * p.rows + n];
{{/RECOMPUTE}}
  codes[n * p.words + w] = quantize4(lo, s) | (quantize4(hi, s) << 16u);  // lanes past K: zeros, code 8
}
