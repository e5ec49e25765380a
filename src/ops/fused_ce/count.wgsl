// fused_ce, step 1: the number of rows whose label is not ignored (label >= 0), as f32 in stats[0].
// One workgroup; R is at most a few times 64k, so a strided loop per thread is enough.

const WG: u32 = 256u;
const SEG: u32 = WG;  // one workgroup-wide sum

struct Params {
  rows: u32,
  labels_off: u32,
  host_count: u32,   // 1: use host_n_valid instead of counting
  host_n_valid: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> labels: array<i32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;

{{>common/wgsum}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var n = 0.0;  // counts stay exact in f32 far past any row count (2^24)
  for (var r = lid.x; r < p.rows; r = r + WG) {
    n = n + select(0.0, 1.0, labels[p.labels_off + r] >= 0);
  }
  let total = workgroup_sum(lid.x, n);
  if (lid.x == 0u) {
    stats[0] = select(total, p.host_n_valid, p.host_count != 0u);
  }
}
