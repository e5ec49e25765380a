// dst[view] = src[view] as 32-bit words, for a copy whose output runs along a dim the source reads with a stride
// (a transpose, in some batch of dims): through workgroup memory in 32 x 32 tiles, so that both the reads and the
// writes of a warp touch consecutive words. The element-at-a-time copy (copy_into.wgsl) reads such a source at one
// word per 32-byte sector.
//
// Dims (after coalescing, host code in shape/copy.cpp): `a`, contiguous in dst and strided in src; `b`, contiguous
// in src and strided in dst; up to 6 batch dims with their own strides. A workgroup moves one tile of a and b in
// one batch index: loads along b (src order), stores along a (dst order). The tile is 33 words a row so that the
// column read at the store hits 32 different banks. A tile is 32 words along b and 32 AH along a: each invocation
// moves 4 AH words each way, its loads issued together. The order of the tiles is the grid's, a fastest. Where
// everything is aligned to 4 words transpose_vec4.wgsl runs instead: this kernel's 4-byte words reached 67% of the
// copy rate (H100), whatever the tile order (in bands along b, run z4; diagonally, run z5) and at odd strides as at
// powers of two (z5); 16-byte words, a quarter of the memory instructions, reached 93% (z5).
//
// @variant AH {1|2|4} the tile's extent along a in units of 32 (its workgroup memory: 32 AH x 33 words)

const TILE: u32 = 32u;
const AH: u32 = {{AH}}u;
const ROWS: u32 = 8u;  // workgroup 32 x 8: each invocation moves AH TILE / ROWS words each way

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
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> tile: array<u32, AH * 1056u>;  // AH TILE x (TILE + 1)

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) lid: vec3u) {
  // Every invocation of a workgroup takes the same path to the barrier: the workgroup's index decides, not lid.
  let w = wid.x + wid.y * nwg.x;
  let per_batch = p.tiles_a * p.tiles_b;
  var bi = w / per_batch;
  let t = w % per_batch;
  let ta = t % p.tiles_a;
  let tb = t / p.tiles_a;
  let a0 = ta * (AH * TILE);
  let b0 = tb * TILE;
  // The batch index's offsets, row-major over the batch dims. Workgroups past the last batch (the grid rounds up)
  // find bi out of range and move nothing.
  var so = p.src_off;
  var d_o = p.dst_off;
  var rem = bi;
  for (var d = p.batch_rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let extent = p.batch_shape[k / 4u][k % 4u];
    let c = rem % extent;
    rem = rem / extent;
    so = so + c * p.batch_src[k / 4u][k % 4u];
    d_o = d_o + c * p.batch_dst[k / 4u][k % 4u];
  }
  let live = rem == 0u;

  // Load: lid.x runs along b (consecutive source words), lid.y + ROWS j along a.
  let b = b0 + lid.x;
  for (var j = 0u; j < AH * TILE; j = j + ROWS) {
    let r = lid.y + j;
    let a = a0 + r;
    if (live && a < p.a_len && b < p.b_len) {
      tile[r * (TILE + 1u) + lid.x] = src[so + a * p.src_a + b];
    }
  }
  workgroupBarrier();
  // Store: lid.x runs along a (consecutive destination words), lid.y + ROWS j along b, for each 32 of a.
  for (var h = 0u; h < AH; h = h + 1u) {
    let a = a0 + h * TILE + lid.x;
    for (var j = 0u; j < TILE; j = j + ROWS) {
      let c = lid.y + j;
      let bb = b0 + c;
      if (live && a < p.a_len && bb < p.b_len) {
        dst[d_o + bb * p.dst_b + a] = tile[(h * TILE + lid.x) * (TILE + 1u) + c];
      }
    }
  }
}
