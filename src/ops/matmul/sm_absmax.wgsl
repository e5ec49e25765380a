// The largest magnitude of each row of a strided view x[batch, rows, len], for gemm_sm.wgsl's power-of-two scaling
// (A's rows over k, B's columns over k). Written as the f32 bit pattern into maxima[out_off + batch * rows + row],
// with atomicMax: magnitudes are non-negative, so their bit patterns order as the numbers do, and workgroups that
// cover parts of a row combine without a second pass. `maxima` must hold zeros first.
// A workgroup covers a tile of 64 rows x 64 along len (LFAST false: neighbouring threads take neighbouring rows,
// for views whose row stride is 1) or 16 rows x 256 (LFAST true: neighbouring threads along len, stride 1 there);
// each thread keeps one row's maximum over its 16 elements and makes one atomic.
//
// @variant LFAST {true|false} neighbouring threads along len (its stride is 1) rather than along rows

const LFAST: bool = {{LFAST}};
const TR: u32 = select(64u, 16u, LFAST);  // tile rows
const TL: u32 = select(64u, 256u, LFAST);  // tile length

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
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> maxima: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  // LFAST: row li / 16, len positions li % 16 + 16 t; else row li % 64, positions li / 64 + 4 t.
  let r = wid.y * TR + select(li % 64u, li / 16u, LFAST);
  if (r >= p.rows) {
    return;
  }
  let l0 = wid.x * TL + select(li / 64u, li % 16u, LFAST);
  let stride = select(4u, 16u, LFAST);
  let base = p.off + wid.z * p.sb + r * p.sr;
  var m = 0.0;
  for (var t = 0u; t < 16u; t = t + 1u) {
    let l = l0 + t * stride;
    if (l < p.len) { m = max(m, abs(x[base + l * p.sl])); }
  }
  // Bits above infinity's (a NaN, should max have kept one) are taken as infinity: the row stays unscaled. Whether
  // max keeps a NaN is up to the GPU; the GEMM's products carry the NaN either way.
  let bits = min(bitcast<u32>(m), 0x7f800000u);
  if (bits != 0u) { atomicMax(&maxima[p.out_off + wid.z * p.rows + r], bits); }
}
