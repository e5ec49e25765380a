// The largest magnitude of each row of a strided view x[batch, rows, len], for gemm_sm.wgsl's power-of-two scaling
// (A's rows over k, B's columns over k), where sm_row_absmax.wgsl's whole rows do not serve (a row strided along
// len: the weight gradient's dy^T and x). Written as the f32 bit pattern into maxima[out_off + batch * rows + row],
// with atomicMax: magnitudes are non-negative, so their bit patterns order as the numbers do, and workgroups that
// cover parts of a row combine without a second pass. `maxima` must hold zeros first.
// A workgroup covers a tile of 64 rows x 256 along len, neighbouring threads on neighbouring rows (the views it
// serves have row stride 1; any strides work), 4 threads a row with 64 elements each, combined through workgroup
// memory: one atomic a row and workgroup.

const TR: u32 = 64u;  // tile rows
const TL: u32 = 256u;  // tile length
const PER: u32 = 256u / TR;  // threads a row
const EACH: u32 = TL / PER;  // elements a thread

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
