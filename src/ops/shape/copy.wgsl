// Strided (dim-order) copy to a contiguous output, as 32-bit words: it moves f32, i32 and bool alike, bit for bit.

const WG: u32 = 256u;

struct Params {
  n: u32,
  rank: u32,
  src_off: u32,
  _pad: u32,
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n) {
    return;
  }
  var rem = i;
  var si = p.src_off;
  for (var d = p.rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let extent = p.shape[k / 4u][k % 4u];
    si = si + (rem % extent) * p.strides[k / 4u][k % 4u];
    rem = rem / extent;
  }
  dst[i] = src[si];
}
