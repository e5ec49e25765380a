// Elementwise binary ops over broadcast, strided f32 inputs, written contiguously.
// Variant: OP (0 add, 1 sub, 2 mul, 3 div). Runtime: a dense fast path, b as a scalar.

const OP: u32 = {{OP}}u;
const WG: u32 = 256u;

struct Params {
  n: u32,
  rank: u32,
  a_off: u32,
  b_off: u32,
  contiguous: u32,   // 1: a and b are dense with the output's shape; index i maps to a_off + i, b_off + i
  b_is_scalar: u32,  // 1: b is p.scalar, the b binding is unused
  alpha: f32,        // add/sub: a + alpha * b, a - alpha * b
  scalar: f32,
  shape: array<vec4<u32>, 2>,
  a_strides: array<vec4<u32>, 2>,
  b_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) {
    return;
  }
  var ai = p.a_off + i;
  var bi = p.b_off + i;
  if (p.contiguous == 0u) {
    // Row-major decomposition of i over the output shape; a stride of 0 broadcasts.
    var rem = i;
    ai = p.a_off;
    bi = p.b_off;
    for (var d = p.rank; d > 0u; d = d - 1u) {
      let k = d - 1u;
      let extent = p.shape[k / 4u][k % 4u];
      let c = rem % extent;
      rem = rem / extent;
      ai = ai + c * p.a_strides[k / 4u][k % 4u];
      bi = bi + c * p.b_strides[k / 4u][k % 4u];
    }
  }
  let x = a[ai];
  var y = p.scalar;
  if (p.b_is_scalar == 0u) {
    y = b[bi];
  }
  var r = x;
  switch OP {
    case 0u: { r = x + p.alpha * y; }
    case 1u: { r = x - p.alpha * y; }
    case 2u: { r = x * y; }
    default: { r = x / y; }
  }
  out[i] = r;
}
