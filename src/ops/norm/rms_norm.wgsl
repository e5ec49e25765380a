// RMSNorm over the last dim: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), for rows of `elems` elements
// (x contiguous). Each row is taken by a segment of SEG threads (WG / SEG rows to a workgroup); rstd is kept per
// row for the backward pass. With V4 the rows are read and written as vec4s, and SEG is sized for the vec4 count:
// a row of 640 is 160 vec4s on 64 threads, where 640 floats on 256 threads (one row a workgroup, eight barrier
// rounds) ran at a third of the copy rate (run (v), H100).
//
// @variant SEG {1|2|4|8|16|32|64|128|256} threads a row (ops/common.cpp: row_segment)
// @variant V4 {true|false} elems and both offsets multiples of 4: x, weight and y bound as vec4s
// @variant T {vec4<f32>|f32} the element type x, weight and y are bound as: vec4<f32> exactly when V4

const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

struct Params {
  rows: u32,
  dim: u32,    // a row's length in elements of T
  x_off: u32,  // in elements of T
  w_off: u32,  // in elements of T
  eps: f32,
  elems: u32,  // a row's length in floats
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> weight: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;

{{>common/wgsum}}

fn square_sum(v: {{T}}) -> f32 {
{{#V4}}
  return dot(v, v);
{{/V4}}
{{^V4}}
  return v * v;
{{/V4}}
}

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
    ss = ss + square_sum(x[p.x_off + base + j]);
  }
  let r = inverseSqrt(workgroup_sum(lid.x, ss) / f32(p.elems) + p.eps);
  for (var j = t; j < len; j = j + SEG) {
    y[base + j] = x[p.x_off + base + j] * r * weight[p.w_off + j];
  }
  if (valid && t == 0u) {
    rstd[row] = r;
  }
}
