// The largest magnitudes of a strided matrix x[batch][R][C], for gemm_sm.wgsl's power-of-two scaling: of each row
// (over C; flags bit 1, into maxima[out_r + b * R + r]) and of each column (over R; bit 2, into maxima[out_c + b * C
// + c]), as f32 bit patterns combined with atomicMax: magnitudes are non-negative, so their bit patterns order as the
// numbers do, and the workgroups that share a row or a column combine without a second pass. `maxima` must hold
// zeros first. One read serves both: a GEMM operand's rows (its own scaling) and its columns (the scaling of the
// weight gradient, which reads it transposed); sm_row_absmax.wgsl is the form for whole rows alone.
// A workgroup covers a tile of 64 rows x 128 columns: thread t takes 4 neighbouring columns (t % 32: a subgroup of
// 32 reads 512 contiguous bytes of a row where C's stride is 1) in 8 rows (t / 32 + 8 k), 8 loads that do not wait on
// each other. Rows combine their 32 partial maxima and columns their 8 through workgroup memory; one atomic a row
// and a column a workgroup.
//
// @variant V4 {true|false} C's stride 1, C, offset, the row stride (and batch stride where batch > 1) multiples of
//   4: x bound and read as vec4s along C
// @variant X_TYPE {vec4<f32>|f32} the element type x is bound as: vec4<f32> exactly when V4

const TR: u32 = 64u;   // tile rows
const TC: u32 = 128u;  // tile columns: 32 threads x 4
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

var<workgroup> row_part: array<f32, 2048>;       // [64 rows][32 threads], then [64 rows][4]
var<workgroup> col_part: array<vec4<f32>, 256>;  // [8 row groups][32 threads]

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

// Bits above infinity's (a NaN, should max have kept one) are taken as infinity: the row or column stays unscaled.
// Whether max keeps a NaN is up to the GPU; the GEMM's products carry the NaN either way.
fn combine(at: u32, m: f32) {
  let bits = min(bitcast<u32>(m), 0x7f800000u);
  if (bits != 0u) { atomicMax(&maxima[at], bits); }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let j = li % 32u;  // the thread's 4 columns within the tile
  let g = li / 32u;  // its rows: g + 8 k
  let r0 = wid.y * TR;
  let c = wid.x * TC + 4u * j;
  let base = p.off + wid.z * p.sb;
  var cm = vec4<f32>();
  for (var k = 0u; k < 8u; k = k + 1u) {
    let r = r0 + g + 8u * k;
    var v = vec4<f32>();
    if (r < p.rows) { v = load4(base, r, c); }
    cm = max(cm, v);
    row_part[(g + 8u * k) * 32u + j] = max(max(v.x, v.y), max(v.z, v.w));
  }
  col_part[li] = cm;
  workgroupBarrier();
  // Rows: 4 threads a row reduce 8 partials each, then one thread the 4.
  let rr = li / 4u;
  let q = li % 4u;
  var m = 0.0;
  for (var i = 0u; i < 8u; i = i + 1u) { m = max(m, row_part[rr * 32u + q * 8u + i]); }
  workgroupBarrier();
  row_part[li] = m;
  workgroupBarrier();
  if ((p.flags & 1u) != 0u && li < TR && r0 + li < p.rows) {
    let w = max(max(row_part[4u * li], row_part[4u * li + 1u]), max(row_part[4u * li + 2u], row_part[4u * li + 3u]));
    combine(p.out_r + wid.z * p.rows + r0 + li, w);
  }
  // Columns: the threads of row group 0 combine the 8 groups' partials.
  if ((p.flags & 2u) != 0u && g == 0u) {
    var w = cm;
    for (var i = 1u; i < 8u; i = i + 1u) { w = max(w, col_part[i * 32u + j]); }
    for (var e = 0u; e < 4u; e = e + 1u) {
      if (c + e < p.cols) { combine(p.out_c + wid.z * p.cols + c + e, w[e]); }
    }
  }
}
