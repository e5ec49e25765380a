// The gradient of softmax: dx = y * (dy - sum(dy * y)) along one dim, with y the softmax's output; both
// contiguous, seen as [outer, len, inner]. Rows are taken by segments of SEG threads, as in softmax.wgsl.
//
// @variant SEG {1|2|4|8|16|32|64|128|256} threads a row (ops/common.cpp: row_segment)

const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

struct Params {
  rows: u32,
  len: u32,
  inner: u32,
  dy_off: u32,
  y_off: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

{{>common/wgsum}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let row = segment_index(wid, nwg, lid);
  let valid = row < p.rows;
  let base = (row / p.inner) * p.len * p.inner + (row % p.inner);
  let t = lid.x % SEG;
  let len = select(0u, p.len, valid);
  var acc = 0.0;
  for (var l = t; l < len; l = l + SEG) {
    let i = base + l * p.inner;
    acc = acc + dy[p.dy_off + i] * y[p.y_off + i];
  }
  let dot = workgroup_sum(lid.x, acc);
  for (var l = t; l < len; l = l + SEG) {
    let i = base + l * p.inner;
    let yi = y[p.y_off + i];
    dx[i] = yi * (dy[p.dy_off + i] - dot);
  }
}
