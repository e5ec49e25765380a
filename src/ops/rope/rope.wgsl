// Rotary position embedding, the half-split form: x [outer, T, H, head_dim] contiguous, each head's element pairs
// (i, i + head_dim / 2) rotated by the angle of their position t and frequency i:
//   (a, b) -> ((a cos - b sin) * scale, (b cos + a sin) * scale),   cos, sin = tables[t][i]
// INVERSE rotates the other way (sin negated): the rotation's transpose, which is its gradient. One thread a pair,
// or with T = vec4<f32> four neighbouring pairs (the same arithmetic per element, so the same bits): a quarter of
// the threads and of their index divisions.
//
// @variant INVERSE {true|false} rotate the other way (the gradient)
// @variant T {vec4<f32>|f32} x, tables, y as vec4s where head_dim / 2, offsets and table stride are multiples of 4

const WG: u32 = 256u;
const INVERSE: bool = {{INVERSE}};

// Counts, offsets and strides in elements of T (floats or vec4s).
struct Params {
  pairs: u32,      // numel / 2
  half: u32,       // head_dim / 2
  heads: u32,      // H
  time: u32,       // T
  x_off: u32,
  cos_off: u32,
  sin_off: u32,
  table_stride: u32,  // between table rows
  scale: f32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> cos_t: array<{{T}}>;
@group(0) @binding(3) var<storage, read> sin_t: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let q = gid.x + gid.y * nwg.x * WG;
  if (q >= p.pairs) {
    return;
  }
  let head_row = q / p.half;  // which (outer, t, h)
  let i = q % p.half;
  let t = (head_row / p.heads) % p.time;
  let c = cos_t[p.cos_off + t * p.table_stride + i];
  var s = sin_t[p.sin_off + t * p.table_stride + i];
  if (INVERSE) {
    s = -s;
  }
  let ia = head_row * 2u * p.half + i;
  let a = x[p.x_off + ia];
  let b = x[p.x_off + ia + p.half];
  y[ia] = (a * c - b * s) * p.scale;
  y[ia + p.half] = (b * c + a * s) * p.scale;
}
