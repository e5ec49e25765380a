// RMSNorm over the last dim: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), for rows of `dim` elements
// (x contiguous). Each row is taken by a segment of SEG threads (WG / SEG rows to a workgroup); rstd is kept per
// row for the backward pass.
//
// @variant SEG {1|2|4|8|16|32|64|128|256} threads a row (ops/common.cpp: row_segment)

const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

struct Params {
  rows: u32,
  dim: u32,
  x_off: u32,
  w_off: u32,
  eps: f32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;

{{>common/wgsum}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let row = segment_index(wid, nwg, lid);
  let valid = row < p.rows;
  let t = lid.x % SEG;
  let len = select(0u, p.dim, valid);
  let base = row * p.dim;
  var ss = 0.0;
  for (var j = t; j < len; j = j + SEG) {
    let v = x[p.x_off + base + j];
    ss = ss + v * v;
  }
  let r = inverseSqrt(workgroup_sum(lid.x, ss) / f32(p.dim) + p.eps);
  for (var j = t; j < len; j = j + SEG) {
    y[base + j] = x[p.x_off + base + j] * r * weight[p.w_off + j];
  }
  if (valid && t == 0u) {
    rstd[row] = r;
  }
}
