// Shared (included as shape/transpose_tile) by the transposing copies, transpose.wgsl and transpose_vec4.wgsl: their
// parameters (TransposeParams in shape/copy.cpp) and where a workgroup's tile lies. Dims after coalescing: `a`,
// contiguous in dst and strided in src; `b`, contiguous in src and strided in dst; up to 6 batch dims with their
// own strides. Counts, strides and offsets in 32-bit words.

struct Params {
  a_len: u32,
  b_len: u32,
  tiles_a: u32,
  tiles_b: u32,
  src_a: u32,      // src stride along a (dst's is 1)
  dst_b: u32,      // dst stride along b (src's is 1)
  src_off: u32,
  dst_off: u32,
  batch_rank: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
  batch_shape: array<vec4<u32>, 2>,
  batch_src: array<vec4<u32>, 2>,
  batch_dst: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;

// Workgroup w's tile: its index along a and b (the grid's order, a fastest) and its batch's offsets into src and
// dst, row-major over the batch dims. Workgroups past the last batch (the grid rounds up) are not live and move
// nothing. Decided by the workgroup's index alone, so every invocation takes the same path to the barrier.
struct Tile {
  ta: u32,
  tb: u32,
  src: u32,
  dst: u32,
  live: bool,
}

fn tile_of(w: u32) -> Tile {
  let per_batch = p.tiles_a * p.tiles_b;
  let t = w % per_batch;
  var so = p.src_off;
  var d_o = p.dst_off;
  var rem = w / per_batch;
  for (var d = p.batch_rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let extent = p.batch_shape[k / 4u][k % 4u];
    let c = rem % extent;
    rem = rem / extent;
    so = so + c * p.batch_src[k / 4u][k % 4u];
    d_o = d_o + c * p.batch_dst[k / 4u][k % 4u];
  }
  return Tile(t % p.tiles_a, t / p.tiles_a, so, d_o, rem == 0u);
}
