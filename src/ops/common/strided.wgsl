// Shared by the elementwise-style kernels (kernels include it by name: common/strided): the uniform block that describes up
// to three operand views of one output shape, and the mapping of an output index to each operand's element.

struct Strided {
  n: u32,               // output elements
  rank: u32,            // dims of `shape` in use (after coalescing)
  dense: u32,           // 1: every operand is dense in the output's order, so operand k's element is off[k] + i
  flags: u32,           // kernel-specific
  off: vec4<u32>,       // element offset of operands 0..2 in their buffers
  fscalar: vec4<f32>,   // scalar operands, as f32
  iscalar: vec4<i32>,   // the same, as i32
  shape: array<vec4<u32>, 2>,
  strides0: array<vec4<u32>, 2>,
  strides1: array<vec4<u32>, 2>,
  strides2: array<vec4<u32>, 2>,
}

// Elements of operands 0, 1, 2 for output index i (row-major over p.shape; a stride of 0 broadcasts).
fn operand_offsets(p: Strided, i: u32) -> vec3<u32> {
  if (p.dense != 0u) {
    return p.off.xyz + vec3<u32>(i);
  }
  var rem = i;
  var o = p.off.xyz;
  for (var d = p.rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let extent = p.shape[k / 4u][k % 4u];
    let c = rem % extent;
    rem = rem / extent;
    o = o + c * vec3<u32>(p.strides0[k / 4u][k % 4u], p.strides1[k / 4u][k % 4u], p.strides2[k / 4u][k % 4u]);
  }
  return o;
}

// The linear output index of this invocation in a 1-D dispatch split over x and y (DeviceImpl::grid).
fn linear_index(gid: vec3<u32>, nwg: vec3<u32>, wg: u32) -> u32 {
  return gid.x + gid.y * nwg.x * wg;
}
