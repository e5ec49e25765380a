// embedding_backward: out[v][j] = sum of grad[i][j] over the positions i (in increasing order) whose index is v.
// Deterministic by construction (no float atomics): workgroup (v, column block) walks the indices in tiles of WG,
// compacts the positions in the tile that hold v in order (a prefix sum of match flags), then each thread adds
// those rows of its column in that order. Tiles without a match skip the compaction. An index outside [0, V)
// matches no row; workgroup (0, 0) reports it through bit p.index_bit of the device's index-error word.

const WG: u32 = 256u;

struct Params {
  rows: u32,        // M: positions (indices)
  dim: u32,         // D: columns of grad and out
  num_weights: u32, // V
  index_bit: u32,
  grad_off: u32,
  index_off: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> index_error: array<atomic<u32>>;

var<workgroup> scan: array<u32, WG>;
var<workgroup> hits: array<u32, WG>;
var<workgroup> any_hit: atomic<u32>;
var<workgroup> tile_has_hit: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let v = wid.x + wid.z * nwg.x;  // the row (split over x and z when V exceeds one grid dimension)
  if (v >= p.num_weights) {
    return;  // uniform across the workgroup
  }
  let t = lid.x;
  let col = wid.y * WG + t;
  let reporter = v == 0u && wid.y == 0u;
  var acc = 0.0;
  for (var base = 0u; base < p.rows; base = base + WG) {
    let i = base + t;
    var flag = 0u;
    if (i < p.rows) {
      let x = index[p.index_off + i];
      if (x == i32(v)) {
        flag = 1u;
      }
      if (reporter && (x < 0 || u32(x) >= p.num_weights)) {
        atomicOr(&index_error[0], p.index_bit);
      }
    }
    if (t == 0u) {
      atomicStore(&any_hit, 0u);
    }
    workgroupBarrier();
    if (flag != 0u) {
      atomicOr(&any_hit, 1u);
    }
    workgroupBarrier();
    if (t == 0u) {
      tile_has_hit = atomicLoad(&any_hit);
    }
    if (workgroupUniformLoad(&tile_has_hit) == 0u) {
      continue;
    }
    // Inclusive prefix sum of the flags (Hillis-Steele): position i's slot among the tile's matches.
    scan[t] = flag;
    workgroupBarrier();
    for (var off = 1u; off < WG; off = off * 2u) {
      var add = 0u;
      if (t >= off) {
        add = scan[t - off];
      }
      workgroupBarrier();
      scan[t] = scan[t] + add;
      workgroupBarrier();
    }
    if (flag != 0u) {
      hits[scan[t] - 1u] = i;
    }
    let count = scan[WG - 1u];
    workgroupBarrier();
    if (col < p.dim) {
      for (var h = 0u; h < count; h = h + 1u) {
        acc = acc + grad[p.grad_off + hits[h] * p.dim + col];
      }
    }
    workgroupBarrier();
  }
  if (col < p.dim) {
    out[v * p.dim + col] = acc;
  }
}
