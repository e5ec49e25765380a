// The end of a mixed-precision GEMM that went through a padded buffer (gemm_sm.wgsl: accumulation, edges that are
// not multiples of 16, split-K): c[b][i][j] (+)= sum over the chunks s of buf[b + s][i][j], buf's blocks being
// [rows_p][cols_p] (the grid's size in whole 128 x 128 blocks), in chunk order (the same result every run).
// Either the batch or the chunk count is 1.
//
// @variant ACCUMULATE {true|false} add the sum to what c holds

const WG: u32 = 256u;
const ACCUMULATE: bool = {{ACCUMULATE}};

struct Params {
  total: u32,   // elements of c: batch * m * n
  m: u32,
  n: u32,
  splits: u32,
  cols_p: u32,  // buf's row stride
  block: u32,   // buf's stride between blocks (rows_p * cols_p)
  c_off: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> buf: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let o = gid.x + gid.y * nwg.x * WG;
  if (o >= p.total) {
    return;
  }
  let mn = p.m * p.n;
  let b = o / mn;
  let i = (o % mn) / p.n;
  let j = o % p.n;
  var acc = 0.0;
  for (var s = 0u; s < p.splits; s = s + 1u) {
    acc = acc + buf[(b + s) * p.block + i * p.cols_p + j];
  }
  if (ACCUMULATE) {
    acc = acc + c[p.c_off + o];
  }
  c[p.c_off + o] = acc;
}
