// The largest magnitudes of a strided matrix x[batch][R][C], for gemm_sm.wgsl's power-of-two scaling: of each row
// (over C; flags bit 1, into maxima[out_r + b * R + r]) and of each column (over R; bit 2, into maxima[out_c + b * C
// + c]), as f32 bit patterns combined with atomicMax: magnitudes are non-negative, so their bit patterns order as the
// numbers do, and the workgroups that share a row or a column combine without a second pass. `maxima` must hold
// zeros first. One read serves both: a GEMM operand's rows (its own scaling) and its columns (the scaling of the
// weight gradient, which reads it transposed); sm_row_absmax.wgsl is the form for whole rows alone.
// A workgroup covers a tile of 64 rows x 128 columns (matmul/tile_maxima): thread t takes 4 neighbouring columns
// (t % 32: a subgroup of 32 reads 512 contiguous bytes of a row where C's stride is 1) in 8 rows (t / 32 + 8 k), 8
// loads that do not wait on each other.
//
// @variant V4 {true|false} C's stride 1, C, offset, the row stride (and batch stride where batch > 1) multiples of
//   4: x bound and read as vec4s along C
// @variant X_TYPE {vec4<f32>|f32} the element type x is bound as: vec4<f32> exactly when V4

const V4: bool = {{V4}};

struct Params {
  rows: u32,   // R
  cols: u32,   // C
  off: u32,
  sb: u32,
  sr: u32,
  sc: u32,
  out_r: u32,  // where row maxima go (flags 1)
  out_c: u32,  // where column maxima go (flags 2)
  flags: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{X_TYPE}}>;
@group(0) @binding(2) var<storage, read_write> maxima: array<atomic<u32>>;

// |x| of the 4 columns c .. c + 3 of row r (zeros past C).
{{#V4}}
fn load4(base: u32, r: u32, c: u32) -> vec4<f32> {
  if (c >= p.cols) { return vec4<f32>(); }
  return abs(x[(base + r * p.sr + c) / 4u]);
}
{{/V4}}
{{^V4}}
fn load4(base: u32, r: u32, c: u32) -> vec4<f32> {
  var v = vec4<f32>();
  for (var e = 0u; e < 4u; e = e + 1u) {
    if (c + e < p.cols) { v[e] = abs(x[base + r * p.sr + (c + e) * p.sc]); }
  }
  return v;
}
{{/V4}}

{{>matmul/tile_maxima}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = li % 32u;  // the thread's 4 columns within the tile
  let g = li / 32u;  // its rows: g + 8 k
  let r0 = wid.y * TM_ROWS;
  let c = wid.x * TM_COLS + 4u * j;
  let base = p.off + wid.z * p.sb;
  var cm = vec4<f32>();
  var rm: array<f32, 8>;
  for (var k = 0u; k < 8u; k = k + 1u) {
    let r = r0 + g + 8u * k;
    var v = vec4<f32>();
    if (r < p.rows) { v = load4(base, r, c); }
    cm = max(cm, v);
    rm[k] = max(max(v.x, v.y), max(v.z, v.w));
  }
  tile_maxima(li, rm, cm, r0, c, p.rows, p.cols, p.out_r + wid.z * p.rows, p.out_c + wid.z * p.cols, p.flags);
}
