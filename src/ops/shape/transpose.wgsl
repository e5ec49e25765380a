// dst[view] = src[view] as 32-bit words, for a copy whose output runs along a dim the source reads with a stride
// (a transpose, in some batch of dims): through workgroup memory in 32 x 32 tiles, so that both the reads and the
// writes of a warp touch consecutive words. The element-at-a-time copy (copy_into.wgsl) reads such a source at one
// word per 32-byte sector.
//
// Dims `a` and `b` and the parameters as shape/transpose_tile.wgsl says. A workgroup moves one tile of a and b in
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

{{>shape/transpose_tile}}

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> tile: array<u32, AH * 1056u>;  // AH TILE x (TILE + 1)

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) lid: vec3u) {
  let tl = tile_of(wid.x + wid.y * nwg.x);
  let a0 = tl.ta * (AH * TILE);
  let b0 = tl.tb * TILE;
  let so = tl.src;
  let d_o = tl.dst;
  let live = tl.live;

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
