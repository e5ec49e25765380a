// A workgroup-wide sum (kernels include it by name: common/wgsum), for one workgroup of WG threads. Call from
// uniform control flow; every thread gets the total. The order of additions is fixed, so results repeat exactly.

var<workgroup> wgsum_partial: array<f32, WG>;

fn workgroup_sum(t: u32, v: f32) -> f32 {
  wgsum_partial[t] = v;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (t < stride) {
      wgsum_partial[t] = wgsum_partial[t] + wgsum_partial[t + stride];
    }
    workgroupBarrier();
  }
  let total = wgsum_partial[0];
  workgroupBarrier();
  return total;
}
