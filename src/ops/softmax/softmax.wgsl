// Softmax / log-softmax along one dim of a contiguous f32 tensor, seen as [outer, len, inner].
// Each row (one (outer, inner) pair) is taken by a segment of SEG threads, so a workgroup holds WG / SEG rows: long
// rows get the whole workgroup, short ones (attention scores) share it. A single pass keeps a running
// (max, sum of exp(x - max)) per thread, the pairs are merged within the segment, then the row is written. Stable
// for any magnitude: every exponent is <= 0. Variants: LOG (true: log_softmax), SEG, CAUSAL: rows of square
// [.., T, T] matrices (the last dim, inner = 1) where element l of query row r % T is masked (-inf, probability 0)
// past the diagonal, as attention scores are: no mask tensor and no masking pass.
//
// @variant LOG {true|false} log_softmax
// @variant CAUSAL {true|false} rows of square matrices masked past the diagonal
// @variant SEG {1|2|4|8|16|32|64|128|256} threads a row (ops/common.cpp: row_segment)

const LOG: bool = {{LOG}};
const CAUSAL: bool = {{CAUSAL}};
const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

struct Params {
  rows: u32,
  len: u32,
  inner: u32,
  x_off: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

{{>common/rowstats}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let row = segment_index(wid, nwg, lid);
  // Threads past the last row still take part in the barriers, with nothing to add.
  let valid = row < p.rows;
  let base = (row / p.inner) * p.len * p.inner + (row % p.inner);
  let t = lid.x % SEG;
  let len = select(0u, p.len, valid);
  // Elements that take part: all, or in a causal row those up to the diagonal.
  var live = len;
  if (CAUSAL) {
    live = min(len, row % p.len + 1u);
  }

  var m = LOWEST;
  var s = 0.0;
  for (var l = t; l < live; l = l + SEG) {
    let v = x[p.x_off + base + l * p.inner];
    let r = merge_stats(m, s, v, 1.0);
    m = r.x;
    s = r.y;
  }
  let stats = row_stats(lid.x, m, s);
  let row_max = stats.x;
  let row_sum = stats.y;
  let log_sum = log(row_sum);
  let inv_sum = 1.0 / row_sum;
  for (var l = t; l < len; l = l + SEG) {
    if (l >= live) {
      y[base + l * p.inner] = 0.0;  // probability 0 (CAUSAL is for softmax only, not log_softmax)
      continue;
    }
    let v = x[p.x_off + base + l * p.inner];
    if (LOG) {
      y[base + l * p.inner] = v - row_max - log_sum;
    } else {
      y[base + l * p.inner] = exp(v - row_max) * inv_sum;
    }
  }
}
