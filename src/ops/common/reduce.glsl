// Workgroup reductions for the GLSL kernels (the native Vulkan backend; the WGSL twins are common/wgsum.wgsl and
// common/rowstats.wgsl). The includer defines WG, the threads of its one-dimensional workgroup. Call from uniform
// control flow; every thread gets the result. The order of additions is fixed, so results repeat exactly.

shared float reduce_a[WG];
shared float reduce_b[WG];

float workgroup_sum(uint t, float v) {
  reduce_a[t] = v;
  barrier();
  for (uint stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) reduce_a[t] += reduce_a[t + stride];
    barrier();
  }
  const float total = reduce_a[0];
  barrier();
  return total;
}

// The running softmax statistics (max, sum of exp(x - max)): merged pairs, and the workgroup's merge.
const float LOWEST = -3.4028234663852886e38;

vec2 merge_stats(float m1, float s1, float m2, float s2) {
  const float m = max(m1, m2);
  return vec2(m, s1 * exp(m1 - m) + s2 * exp(m2 - m));
}

vec2 row_stats(uint t, float m, float s) {
  reduce_a[t] = m;
  reduce_b[t] = s;
  barrier();
  for (uint stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (t < stride) {
      const vec2 r = merge_stats(reduce_a[t], reduce_b[t], reduce_a[t + stride], reduce_b[t + stride]);
      reduce_a[t] = r.x;
      reduce_b[t] = r.y;
    }
    barrier();
  }
  const vec2 r = vec2(reduce_a[0], reduce_b[0]);
  barrier();
  return r;
}
