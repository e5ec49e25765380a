// fused_ce, step 3: loss = sum of the row losses / n_valid, 0 when n_valid is 0 (PyTorch's NaN would end a run whose
// batch happens to have no target, e.g. all prompt under prompt masking).
// One workgroup, a fixed summation order: the same inputs always give the same loss.

const WG: u32 = 256u;
const SEG: u32 = WG;  // one workgroup-wide sum

struct Params {
  rows: u32,
  loss_off: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> row_loss: array<f32>;
@group(0) @binding(2) var<storage, read> stats: array<f32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;

{{>common/wgsum}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var acc = 0.0;
  for (var r = lid.x; r < p.rows; r = r + WG) {
    acc = acc + row_loss[r];
  }
  let total = workgroup_sum(lid.x, acc);
  if (lid.x == 0u) {
    loss[p.loss_off] = select(0.0, total / stats[0], stats[0] > 0.0);
  }
}
