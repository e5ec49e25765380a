// transpose.wgsl's copy (dst[view] = src[view], 32-bit words, dst's rows strided in src) in 16-byte words where
// everything is aligned to 4 words: a_len, b_len, src_a, dst_b, both offsets and every batch stride (copy.cpp
// checks). A workgroup moves a 64 x 64-word tile: each invocation loads four vec4s along b (src order), all four
// issued before any is stored, and stores four along a (dst order). transpose.wgsl moves 4-byte words and reached
// 67% (H100) and 54% (H200) of the copy rate at 1024 x 65536, and less with twice as many of them in flight (its 64
// x 32 tile); this kernel, the same bytes in a quarter of the memory instructions, reached 93% on the H100 (run
// z5).
//
// The tile sits in workgroup memory as 64 rows of 65 words (a row per a, b along it): a warp's vec4s of one row go
// to words 4 c + i, its column reads at the store to (4 c + i) 65 + b; both 2-way bank conflicts at worst.

const TILE: u32 = 64u;
const ROW: u32 = 65u;  // TILE + 1 words a tile row

{{>shape/transpose_tile}}

@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

var<workgroup> tile: array<u32, 4160u>;  // TILE x ROW

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let tl = tile_of(wid.x + wid.y * nwg.x);  // shape/transpose_tile
  let a0 = tl.ta * TILE;
  let b0 = tl.tb * TILE;
  let so = tl.src;
  let d_o = tl.dst;
  let live = tl.live;

  // Load: 16 invocations a row of the tile (a vec4 each along b), 16 rows a round, 4 rounds.
  let q = li % 16u;
  let r0 = li / 16u;
  let b = b0 + 4u * q;
  var v: array<vec4<u32>, 4>;
  for (var j = 0u; j < 4u; j = j + 1u) {
    let a = a0 + r0 + 16u * j;
    // An element outside reads vec4 0 and is never stored: the loads stay unconditional, all four in flight.
    let inside = live && a < p.a_len && b < p.b_len;
    v[j] = src[select(0u, (so + a * p.src_a + b) / 4u, inside)];
  }
  for (var j = 0u; j < 4u; j = j + 1u) {
    let base = (r0 + 16u * j) * ROW + 4u * q;
    tile[base] = v[j].x;
    tile[base + 1u] = v[j].y;
    tile[base + 2u] = v[j].z;
    tile[base + 3u] = v[j].w;
  }
  workgroupBarrier();
  // Store: 16 invocations a row of dst (a vec4 each along a), 16 rows (b) a round, 4 rounds.
  let a = a0 + 4u * q;
  for (var j = 0u; j < 4u; j = j + 1u) {
    let c = r0 + 16u * j;
    let bb = b0 + c;
    if (live && a < p.a_len && bb < p.b_len) {
      let col = 4u * q * ROW + c;
      dst[(d_o + bb * p.dst_b + a) / 4u] =
          vec4<u32>(tile[col], tile[col + ROW], tile[col + 2u * ROW], tile[col + 3u * ROW]);
    }
  }
}
