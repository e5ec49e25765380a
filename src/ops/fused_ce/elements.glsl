// fused_ce's element type for the GLSL kernels (the twin of elements.wgsl): T is vec4 where the includer defines
// VEC as 4, else float, with the reductions across its lanes, the one-hot row of a label, and an element's dlogit.
#if VEC == 4
#define T vec4
float hmax(vec4 v) { return max(max(v.x, v.y), max(v.z, v.w)); }
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
vec4 onehot(uint j, uint label) { return vec4(equal(uvec4(4u * j) + uvec4(0u, 1u, 2u, 3u), uvec4(label))); }
#else
#define T float
float hmax(float v) { return v; }
float hsum(float v) { return v; }
float onehot(uint j, uint label) { return j == label ? 1.0 : 0.0; }
#endif

// The dlogit of the element x at j (of T) of a row: (softmax - onehot) / n_valid, with scale = inv_n / sum.
T d_of(T x, uint j, float row_max, float scale, uint label, float inv_n) {
  return exp(x - row_max) * scale - onehot(j, label) * inv_n;
}
