// The end of a mixed-precision GEMM (gemm_sm.wgsl stores its products still scaled): c[b][i][j] = (sum over the
// chunks s of raw[b + s][i][j]) * 2^ea(b, i) * 2^eb(b, j) (+ bias[j]) (+ what c held), the powers of two from the
// absmax bits as gemm_sm.wgsl took them (exact in f32) (+ addend[i][j]: a residual stream joined in this pass, not
// in an add of its own). Either the batch or the chunk count is 1.
// IN_PLACE: raw is c itself, laid out as c ([batch][m][n], one chunk); else a padded buffer of blocks
// [rows_p][cols_p] (the GEMM's grid in whole 128 x 128 blocks), chunks summed in order (the same result every run).
// A thread finishes 4 neighbouring outputs of a row (n and c's offset multiples of 4: V4, as vec4s) or one.
//
// @variant IN_PLACE {true|false} the products are in c itself (else in the padded buffer `raw`)
// @variant V4 {true|false} n and c's offset are multiples of 4: c (and raw) bound as vec4s, 4 outputs a thread
// @variant T {vec4<f32>|f32} the type c and raw are bound as: vec4<f32> exactly when V4

const WG: u32 = 256u;
const IN_PLACE: bool = {{IN_PLACE}};
const V4: bool = {{V4}};
const W: u32 = select(1u, 4u, V4);  // outputs a thread

struct Params {
  total: u32,   // elements of c: batch * m * n
  m: u32,
  n: u32,
  splits: u32,
  cols_p: u32,  // raw's row stride (padded)
  block: u32,   // raw's stride between blocks
  c_off: u32,
  bias_off: u32,
  flags: u32,   // 1: bias; 2: accumulate; 4: addend; 16: A's rows scaled; 32: B's columns scaled
  sa_off: u32,  // absmax bits of A's rows: absmax_a[sa_off + b * m + i]
  sb_off: u32,  // of B's columns: absmax_b[sb_off + b * n + j]
  add_off: u32,  // the addend's offset (its layout is c's)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(2) var<storage, read> absmax_a: array<u32>;
@group(0) @binding(3) var<storage, read> absmax_b: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
{{#IN_PLACE}}
@group(0) @binding(5) var<storage, read> addend: array<{{T}}>;
{{/IN_PLACE}}
{{^IN_PLACE}}
@group(0) @binding(5) var<storage, read> raw: array<{{T}}>;
@group(0) @binding(6) var<storage, read> addend: array<{{T}}>;
{{/IN_PLACE}}

{{>matmul/pow2}}

// Column j's factor (its scale; 1 where B is not scaled) and bias (0 without).
fn col_scale(b: u32, j: u32) -> f32 {
  return select(1.0, pow2_of(absmax_b[p.sb_off + b * p.n + j]), (p.flags & 32u) != 0u);
}
fn col_bias(j: u32) -> f32 {
  return select(0.0, bias[p.bias_off + j], (p.flags & 1u) != 0u);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let o = (gid.x + gid.y * nwg.x * WG) * W;  // the first of the thread's outputs
  if (o >= p.total) {
    return;
  }
  let mn = p.m * p.n;
  let b = o / mn;
  let i = (o % mn) / p.n;
  let j = o % p.n;
  let at = (p.c_off + o) / W;
  var v: {{T}};
{{#IN_PLACE}}
  v = c[at];
{{/IN_PLACE}}
{{^IN_PLACE}}
  for (var s = 0u; s < p.splits; s = s + 1u) {
    v = v + raw[((b + s) * p.block + i * p.cols_p + j) / W];
  }
{{/IN_PLACE}}
  if ((p.flags & 16u) != 0u) {
    v = v * pow2_of(absmax_a[p.sa_off + b * p.m + i]);
  }
{{#V4}}
  v = v * vec4<f32>(col_scale(b, j), col_scale(b, j + 1u), col_scale(b, j + 2u), col_scale(b, j + 3u));
  v = v + vec4<f32>(col_bias(j), col_bias(j + 1u), col_bias(j + 2u), col_bias(j + 3u));
{{/V4}}
{{^V4}}
  v = v * col_scale(b, j) + col_bias(j);
{{/V4}}
  if ((p.flags & 2u) != 0u) {
    v = v + c[at];
  }
  if ((p.flags & 4u) != 0u) {
    v = addend[(p.add_off + o) / W] + v;
  }
  c[at] = v;
}
