// embedding_backward: out[v][j] = sum of grad[i][j] over the positions i (in increasing order) whose index is v.
// Deterministic by construction (no float atomics): workgroup (v, column block) walks the indices in tiles of WG,
// compacts the positions in the tile that hold v in order (a prefix sum of match flags), then each thread adds
// those rows of its columns (COLS of them, WG apart) in that order. Tiles without a match skip the compaction. Rows
// that no position names (present[v] == 0: embedding_present.wgsl, which also reports indices outside [0, V)) are
// written as zeros without a walk: in a batch of 8192 tokens over a vocabulary of 8192 most rows are absent, and
// every walk reads all the indices. A workgroup covers COLS * WG columns, so a row of up to 1024 floats is one walk
// (run (v), H100: 0.47 ms a step with a walk per row and 256-column block).

const WG: u32 = 256u;
const COLS: u32 = 4u;

struct Params {
  rows: u32,        // M: positions (indices)
  dim: u32,         // D: columns of grad and out
  num_weights: u32, // V
  _pad2: u32,
  grad_off: u32,
  index_off: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> present: array<u32>;

var<workgroup> scan: array<u32, WG>;
var<workgroup> hits: array<u32, WG>;
var<workgroup> any_hit: atomic<u32>;
var<workgroup> tile_has_hit: u32;
var<workgroup> row_present: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let v = wid.x + wid.z * nwg.x;  // the row (split over x and z when V exceeds one grid dimension)
  if (v >= p.num_weights) {
    return;  // uniform across the workgroup
  }
  let t = lid.x;
  let col0 = wid.y * (WG * COLS) + t;  // the thread's columns: col0 + WG c, c < COLS
  if (t == 0u) {
    row_present = present[v];
  }
  if (workgroupUniformLoad(&row_present) == 0u) {
    for (var c = 0u; c < COLS; c = c + 1u) {
      if (col0 + WG * c < p.dim) {
        out[v * p.dim + col0 + WG * c] = 0.0;
      }
    }
    return;  // uniform across the workgroup
  }
  var acc: array<f32, COLS>;
  for (var base = 0u; base < p.rows; base = base + WG) {
    let i = base + t;
    var flag = 0u;
    if (i < p.rows && index[p.index_off + i] == i32(v)) {
      flag = 1u;
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
    for (var h = 0u; h < count; h = h + 1u) {
      let row = p.grad_off + hits[h] * p.dim;
      for (var c = 0u; c < COLS; c = c + 1u) {
        if (col0 + WG * c < p.dim) {
          acc[c] = acc[c] + grad[row + col0 + WG * c];
        }
      }
    }
    workgroupBarrier();
  }
  for (var c = 0u; c < COLS; c = c + 1u) {
    if (col0 + WG * c < p.dim) {
      out[v * p.dim + col0 + WG * c] = acc[c];
    }
  }
}
