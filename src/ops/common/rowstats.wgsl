// Running softmax statistics (kernels include it by name: common/rowstats): each thread keeps (max, sum of
// exp(x - max)) over its part of a row, and row_stats merges them within segments of SEG threads (the includer
// defines WG and SEG, a power of two dividing WG: a workgroup holds WG / SEG rows).
// The running max starts at the lowest finite f32 rather than -inf, so that merging two empty sides never
// computes -inf - (-inf); an input of -inf adds exp(-inf - max) = 0, and a row of nothing but -inf ends with sum 0.

const LOWEST: f32 = -0x1.fffffep+127f;

var<workgroup> rowstats_m: array<f32, WG>;
var<workgroup> rowstats_s: array<f32, WG>;

// Merges two (max, sum of exp(x - max)) pairs.
fn merge_stats(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2f {
  let m = max(m1, m2);
  return vec2f(m, s1 * exp(m1 - m) + s2 * exp(m2 - m));
}

// The row's (max, sum) from every thread's of its segment; call from uniform control flow. Leaves a barrier
// behind it, so the caller may overwrite what it read before.
fn row_stats(t: u32, m: f32, s: f32) -> vec2f {
  rowstats_m[t] = m;
  rowstats_s[t] = s;
  workgroupBarrier();
  let lane = t % SEG;
  for (var stride = SEG / 2u; stride > 0u; stride = stride / 2u) {
    if (lane < stride) {
      let r = merge_stats(rowstats_m[t], rowstats_s[t], rowstats_m[t + stride], rowstats_s[t + stride]);
      rowstats_m[t] = r.x;
      rowstats_s[t] = r.y;
    }
    workgroupBarrier();
  }
  let r = vec2f(rowstats_m[t - lane], rowstats_s[t - lane]);
  workgroupBarrier();
  return r;
}
