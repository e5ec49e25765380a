// embedding_backward's first pass: present[v] = 1 for every row v that some position indexes (present zeroed
// first), so that the sum (embedding_backward.wgsl) gives rows no position names their zeros without scanning the
// indices for them. An index outside [0, V) marks nothing and is reported through bit p.index_bit of the device's
// index-error word.

struct Params {
  rows: u32,         // M: positions (indices)
  num_weights: u32,  // V
  index_bit: u32,
  index_off: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read_write> present: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> index_error: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.rows) {
    return;
  }
  let x = index[p.index_off + i];
  if (x < 0 || u32(x) >= p.num_weights) {
    atomicOr(&index_error[0], p.index_bit);
    return;
  }
  atomicStore(&present[u32(x)], 1u);
}
