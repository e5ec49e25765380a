// q4gsw re-quantisation in one pass over the latent: each group of a row (group_size / 8 code words) is taken by
// TPG = group_size / 8 neighbouring threads of one workgroup (GPW groups a workgroup, consecutive along the rows, so
// that a warp's loads are contiguous), each thread one code word (8 weights). With RECOMPUTE the group's scale,
// max |x| / 7, is found first (each thread's max over its 8, then over the group's TPG through workgroup memory),
// written, and used: the latent is read once, where requant.wgsl after scales.wgsl read it twice (scales.wgsl with
// one thread reading a whole group: 32 threads' loads 4 KiB apart). Without it the scale is read.
// code = clamp(round_half_even(x / s), -8, 7) + 8; code 8 where s == 0 and for padding (k >= K, loaded as zeros);
// the rounding as requant.wgsl decides it (the shared q4gsw/quantize), so both give the same codes bit for bit.
//
// With WPT 2 a workgroup takes the groups of two (2 gpw, the second gpw after the first), each thread one word of
// each, its four loads issued before any is used: twice the bytes in flight a thread.
//
// @variant RECOMPUTE {true|false} the scales computed from the latent (and written) rather than read
// @variant VEC4 {true|false} the latent read as vec4s: K and its offset multiples of 4
// @variant WPT {1|2} code words a thread

const WG: u32 = 256u;
const WPT: u32 = {{WPT}}u;

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

var<workgroup> group_max: array<f32, WG * WPT>;  // max |x| of each thread's word in run r at r * WG + thread

{{>q4gsw/quantize}}

// The code word a thread takes in the r-th run of gpw groups of workgroup wgi: its row n, group g, word w.
struct Word {
  n: u32,
  g: u32,
  w: u32,
  live: bool,
}
fn word_at(wgi: u32, r: u32, lg: u32, lane: u32) -> Word {
  let gi = (wgi * WPT + r) * p.gpw + lg;
  let n = gi / p.groups;
  let g = gi % p.groups;
  let w = g * p.tpg + lane;
  return Word(n, g, w, lg < p.gpw && n < p.rows && w < p.words);
}

fn abs_max(lo: vec4<f32>, hi: vec4<f32>) -> f32 {
  let a = max(abs(lo), abs(hi));
  return max(max(a.x, a.y), max(a.z, a.w));
}

// The scale of the group of the r-th run: max |x| / 7 over its TPG threads' entries of group_max (after a
// barrier), written by its first thread; or read.
fn group_scale(x: Word, r: u32, lg: u32, lane: u32) -> f32 {
{{#RECOMPUTE}}
  var m = 0.0;
  if (lg < p.gpw) {
    for (var l = 0u; l < p.tpg; l = l + 1u) {
      m = max(m, group_max[r * WG + lg * p.tpg + l]);
    }
  }
  let s = m / 7.0;
  if (x.live && lane == 0u) {
    scales[x.g * p.rows + x.n] = s;
  }
  return s;
{{/RECOMPUTE}}
{{^RECOMPUTE}}
  var s = 0.0;
  if (x.live) {
    s = scales[x.g * p.rows + x.n];
  }
  return s;
{{/RECOMPUTE}}
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let t = lid.x;
  let lg = t / p.tpg;    // the group within the run
  let lane = t % p.tpg;  // the word within the group
  let wgi = wid.x + wid.y * nwg.x;
  let x0 = word_at(wgi, 0u, lg, lane);
  let x1 = word_at(wgi, 1u, lg, lane);  // WPT 2 only
  var lo0 = vec4<f32>(0.0);
  var hi0 = vec4<f32>(0.0);
  var lo1 = vec4<f32>(0.0);
  var hi1 = vec4<f32>(0.0);
  if (x0.live) {
    lo0 = load4(x0.n, x0.w * 8u);
    hi0 = load4(x0.n, x0.w * 8u + 4u);
  }
  if (WPT == 2u && x1.live) {
    lo1 = load4(x1.n, x1.w * 8u);
    hi1 = load4(x1.n, x1.w * 8u + 4u);
  }
{{#RECOMPUTE}}
  group_max[t] = abs_max(lo0, hi0);
  if (WPT == 2u) {
    group_max[WG + t] = abs_max(lo1, hi1);
  }
  workgroupBarrier();
{{/RECOMPUTE}}
  let s0 = group_scale(x0, 0u, lg, lane);
  if (x0.live) {
    codes[x0.n * p.words + x0.w] = quantize8(lo0, hi0, s0);  // past K: zeros, code 8
  }
  if (WPT == 2u) {
    let s1 = group_scale(x1, 1u, lg, lane);
    if (x1.live) {
      codes[x1.n * p.words + x1.w] = quantize8(lo1, hi1, s1);
    }
  }
}
