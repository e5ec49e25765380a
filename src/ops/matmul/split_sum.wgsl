// The end of a split-K GEMM (gemm.wgsl): c[i] (+)= sum over the chunks s of part[s][i], in chunk order (the same
// result every run). Variant: ACCUMULATE (add to what c holds).
//
// @variant ACCUMULATE {true|false} add the sum to what c holds

const WG: u32 = 256u;
const ACCUMULATE: bool = {{ACCUMULATE}};

struct Params {
  n: u32,       // elements of c (M * N)
  splits: u32,
  c_off: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) {
    return;
  }
  var acc = 0.0;
  for (var s = 0u; s < p.splits; s = s + 1u) {
    acc = acc + part[s * p.n + i];
  }
  if (ACCUMULATE) {
    acc = acc + c[p.c_off + i];
  }
  c[p.c_off + i] = acc;
}
