// q4gsw scales from the latent weights: scales[g][n] = max |latent[n][k]| / 7 over k in group g.
// One thread per (group, row).

const WG: u32 = 256u;

struct Params {
  rows: u32,        // N
  k: u32,           // K
  groups: u32,
  group_size: u32,
  latent_off: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> latent: array<f32>;
@group(0) @binding(2) var<storage, read_write> scales: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.rows * p.groups) {
    return;
  }
  // Consecutive threads take consecutive rows of one group: their writes are contiguous in scales[g][n].
  let g = i / p.rows;
  let n = i % p.rows;
  let begin = g * p.group_size;
  let end = min(p.k, begin + p.group_size);
  var m = 0.0;
  for (var k = begin; k < end; k = k + 1u) {
    m = max(m, abs(latent[p.latent_off + n * p.k + k]));
  }
  scales[i] = m / 7.0;
}
