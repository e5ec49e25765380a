// fused_ce's element type (included as fused_ce/elements by rows.wgsl, split.wgsl and split_deferred.wgsl, whose
// VEC4 variant decides it; elements.glsl is its GLSL twin): T is vec4<f32> with VEC4 (V and the offsets multiples
// of 4, counted in vec4s), else f32, with the reductions across its LANES, the one-hot row of a label, and an
// element's dlogit.

{{#VEC4}}
alias T = vec4<f32>;
const LANES: u32 = 4u;
fn hmax(v: T) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }
fn hsum(v: T) -> f32 { return (v.x + v.y) + (v.z + v.w); }
fn lane(v: T, i: u32) -> f32 { return v[i]; }
fn onehot(j: u32, label: u32) -> T {
  return select(vec4<f32>(0.0), vec4<f32>(1.0),
                vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(label));
}
{{/VEC4}}
{{^VEC4}}
alias T = f32;
const LANES: u32 = 1u;
fn hmax(v: T) -> f32 { return v; }
fn hsum(v: T) -> f32 { return v; }
fn lane(v: T, i: u32) -> f32 { return v; }
fn onehot(j: u32, label: u32) -> T { return select(0.0, 1.0, j == label); }
{{/VEC4}}

// The dlogit of the element x at j (of T) of a row: (softmax - onehot) / n_valid, with scale = inv_n / sum.
fn d_of(x: T, j: u32, row_max: f32, scale: f32, label: u32, inv_n: f32) -> T {
  return exp(x - row_max) * scale - onehot(j, label) * inv_n;
}
