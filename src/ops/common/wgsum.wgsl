// Sums within segments of a workgroup (kernels include it by name: common/wgsum). The includer defines WG (threads)
// and SEG (threads per segment, a power of two dividing WG): threads t with the same t / SEG sum together, so a
// workgroup can reduce WG / SEG short rows at once, or one long row with SEG = WG. Call from uniform control flow;
// every thread gets its segment's total. The order of additions is fixed, so results repeat exactly.

var<workgroup> wgsum_partial: array<f32, WG>;

fn workgroup_sum(t: u32, v: f32) -> f32 {
  wgsum_partial[t] = v;
  workgroupBarrier();
  let lane = t % SEG;
  for (var stride = SEG / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      wgsum_partial[t] = wgsum_partial[t] + wgsum_partial[t + stride];
    }
    workgroupBarrier();
  }
  let total = wgsum_partial[t - lane];
  workgroupBarrier();
  return total;
}
