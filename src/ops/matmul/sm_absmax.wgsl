// The largest magnitude of each row of a strided view x[batch, rows, len], for gemm_sm.wgsl's power-of-two scaling
// (A's rows over k, B's columns over k), where sm_row_absmax.wgsl's whole rows do not serve (a row strided along
// len: the weight gradient's dy^T and x). Written as the f32 bit pattern into maxima[out_off + batch * rows + row],
// with atomicMax: magnitudes are non-negative, so their bit patterns order as the numbers do, and workgroups that
// cover parts of a row combine without a second pass. `maxima` must hold zeros first.
// A workgroup covers a tile of 64 rows x 256 along len, combined through workgroup memory: one atomic a row and
// workgroup. Neighbouring threads take neighbouring rows (the views it serves have row stride 1; any strides work):
// 4 threads a row with 64 elements each, or with V4 a vec4 of 4 rows a thread, 16 threads along len with 16 vec4s
// each (a quarter of the load instructions for the same bytes).
//
// @variant V4 {true|false} row stride 1, rows, offset, len stride (and batch stride where batch > 1) multiples of 4:
//   x bound and read as vec4s of 4 rows
// @variant X_TYPE {vec4<f32>|f32} the element type x is bound as: vec4<f32> exactly when V4

const TR: u32 = 64u;  // tile rows
const TL: u32 = 256u;  // tile length
const PER: u32 = 256u / TR;  // threads a row (scalar form)
const EACH: u32 = TL / PER;  // elements a thread (scalar form)

struct Params {
  rows: u32,
  len: u32,
  off: u32,
  sb: u32,
  sr: u32,
  sl: u32,
  out_off: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{X_TYPE}}>;
@group(0) @binding(2) var<storage, read_write> maxima: array<atomic<u32>>;

{{^V4}}
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  // Row li % 64 of the tile, len positions li / 64 + 4 t.
  let rr = li % 64u;  // the row within the tile
  let j = li / 64u;   // the thread within its row
  let r = wid.y * TR + rr;
  var m = 0.0;
  if (r < p.rows) {
    let l0 = wid.x * TL + j;
    let base = p.off + wid.z * p.sb + r * p.sr;
    for (var t = 0u; t < EACH; t = t + 1u) {
      let l = l0 + t * PER;
      if (l < p.len) { m = max(m, abs(x[base + l * p.sl])); }
    }
  }
  part[li] = m;
  workgroupBarrier();
  if (j == 0u && r < p.rows) {
    for (var i = 1u; i < PER; i = i + 1u) {
      m = max(m, part[rr + i * 64u]);
    }
    // Bits above infinity's (a NaN, should max have kept one) are taken as infinity: the row stays unscaled. Whether
    // max keeps a NaN is up to the GPU; the GEMM's products carry the NaN either way.
    let bits = min(bitcast<u32>(m), 0x7f800000u);
    if (bits != 0u) { atomicMax(&maxima[p.out_off + wid.z * p.rows + r], bits); }
  }
}
{{/V4}}
{{#V4}}
var<workgroup> part: array<vec4<f32>, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  // Rows 4 (li % 16) .. + 3 of the tile, len positions li / 16 + 16 t.
  let c = li % 16u;
  let j = li / 16u;
  let r = wid.y * TR + 4u * c;
  var m = vec4<f32>();
  if (r < p.rows) {
    let base = (p.off + wid.z * p.sb + r) / 4u;
    let sl4 = p.sl / 4u;
    let l0 = wid.x * TL + j;
    for (var t = 0u; t < TL / 16u; t = t + 1u) {
      let l = l0 + t * 16u;
      if (l < p.len) { m = max(m, abs(x[base + l * sl4])); }
    }
  }
  part[li] = m;
  workgroupBarrier();
  if (j == 0u && r < p.rows) {
    for (var i = 1u; i < 16u; i = i + 1u) {
      m = max(m, part[c + i * 16u]);
    }
    // NaNs as in the scalar form.
    for (var e = 0u; e < 4u; e = e + 1u) {
      let bits = min(bitcast<u32>(m[e]), 0x7f800000u);
      if (bits != 0u) { atomicMax(&maxima[p.out_off + wid.z * p.rows + r + e], bits); }
    }
  }
}
{{/V4}}
