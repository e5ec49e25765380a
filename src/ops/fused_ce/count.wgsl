// fused_ce, step 1: the number of rows whose label is not ignored (label >= 0), as f32 in stats[0].
// One workgroup; R is at most a few times 64k, so a strided loop per thread is enough.

const WG: u32 = 256u;

struct Params {
  rows: u32,
  labels_off: u32,
  host_count: u32,   // 1: use host_n_valid instead of counting
  host_n_valid: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> labels: array<i32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;

var<workgroup> partial: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var n = 0u;
  for (var r = lid.x; r < p.rows; r = r + WG) {
    n = n + select(0u, 1u, labels[p.labels_off + r] >= 0);
  }
  partial[lid.x] = n;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid.x < s) {
      partial[lid.x] = partial[lid.x] + partial[lid.x + s];
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    stats[0] = select(f32(partial[0]), p.host_n_valid, p.host_count != 0u);
  }
}
