// Shared by sm_absmax.wgsl and the MAXIMA form of swiglu.wgsl (included as matmul/tile_maxima): the largest
// magnitudes of a tile of 64 rows x 128 columns, of each of its rows and of each of its columns, combined as f32 bit
// patterns with atomicMax into the includer's `maxima` (array<atomic<u32>>, zeros first): magnitudes are
// non-negative, so their bit patterns order as the numbers do, and the workgroups that share a row or a column
// combine without a second pass. Thread t of 256 takes 4 neighbouring columns (t % 32) in the 8 rows t / 32 + 8 k.

const TM_ROWS: u32 = 64u;
const TM_COLS: u32 = 128u;

var<workgroup> tm_row: array<f32, 2048>;       // [64 rows][32 threads], then [64 rows][4]
var<workgroup> tm_col: array<vec4<f32>, 256>;  // [8 row groups][32 threads]

// Bits above infinity's (a NaN, should max have kept one) are taken as infinity: the row or column stays unscaled.
// Whether max keeps a NaN is up to the GPU; the GEMM's products carry the NaN either way.
fn tm_combine(at: u32, m: f32) {
  let bits = min(bitcast<u32>(m), 0x7f800000u);
  if (bits != 0u) { atomicMax(&maxima[at], bits); }
}

// Thread li's part of the tile whose first row is r0, its columns c .. c + 3: rm[k] the largest magnitude of its 4
// in row r0 + li / 32 + 8 k, cm each column's over its 8 rows (zeros past the matrix). Rows (flags 1) combine into
// maxima[out_r + r], columns (flags 2) into maxima[out_c + c]: 32 partials a row and 8 a column reduced through
// workgroup memory, one atomic a row and a column. Every thread of the workgroup calls it (barriers), and may call
// it again: it ends on a barrier.
fn tile_maxima(li: u32, rm: array<f32, 8>, cm: vec4<f32>, r0: u32, c: u32, rows: u32, cols: u32, out_r: u32,
               out_c: u32, flags: u32) {
  let j = li % 32u;
  let g = li / 32u;
  for (var k = 0u; k < 8u; k = k + 1u) { tm_row[(g + 8u * k) * 32u + j] = rm[k]; }
  tm_col[li] = cm;
  workgroupBarrier();
  // Rows: 4 threads a row reduce 8 partials each, then one thread the 4.
  let rr = li / 4u;
  let q = li % 4u;
  var m = 0.0;
  for (var i = 0u; i < 8u; i = i + 1u) { m = max(m, tm_row[rr * 32u + q * 8u + i]); }
  workgroupBarrier();
  tm_row[li] = m;
  workgroupBarrier();
  if ((flags & 1u) != 0u && li < TM_ROWS && r0 + li < rows) {
    let w = max(max(tm_row[4u * li], tm_row[4u * li + 1u]), max(tm_row[4u * li + 2u], tm_row[4u * li + 3u]));
    tm_combine(out_r + r0 + li, w);
  }
  // Columns: the threads of row group 0 combine the 8 groups' partials.
  if ((flags & 2u) != 0u && g == 0u) {
    var w = cm;
    for (var i = 1u; i < 8u; i = i + 1u) { w = max(w, tm_col[i * 32u + j]); }
    for (var e = 0u; e < 4u; e = e + 1u) {
      if (c + e < cols) { tm_combine(out_c + c + e, w[e]); }
    }
  }
  workgroupBarrier();
}
