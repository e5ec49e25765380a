// The GLSL twin of common/strided.wgsl (kernels include it as "common/strided.glsl"): the parameter block that
// describes up to three operand views of one output shape, as the push-constant block p, and the mapping of an
// output index to each operand's element. The includer defines WG, the threads of its one-dimensional workgroup.
// The block is StridedParams of ops/elementwise/map.h byte for byte: 192 bytes, more than the 128 that every
// Vulkan device must accept for push constants (NVIDIA, AMD and Intel drivers accept 256).

layout(push_constant) uniform Strided {
  uint n;               // output elements
  uint rank;            // dims of `shape` in use (after coalescing)
  uint dense;           // 1: every operand is dense in the output's order, so operand k's element is off[k] + i
  uint flags;           // kernel-specific
  uvec4 off;            // element offset of operands 0..2 in their buffers
  vec4 fscalar;         // scalar operands, as f32
  ivec4 iscalar;        // the same, as i32
  uvec4 shape[2];
  uvec4 strides0[2];
  uvec4 strides1[2];
  uvec4 strides2[2];
} p;

// Elements of operands 0, 1, 2 for output index i (row-major over p.shape; a stride of 0 broadcasts).
uvec3 operand_offsets(uint i) {
  if (p.dense != 0u) return p.off.xyz + uvec3(i);
  uint rem = i;
  uvec3 o = p.off.xyz;
  for (uint d = p.rank; d > 0u; --d) {
    const uint k = d - 1u;
    const uint extent = p.shape[k / 4u][k % 4u];
    const uint c = rem % extent;
    rem /= extent;
    o += c * uvec3(p.strides0[k / 4u][k % 4u], p.strides1[k / 4u][k % 4u], p.strides2[k / 4u][k % 4u]);
  }
  return o;
}

// The linear output index of this invocation in a 1-D dispatch split over x and y (DeviceImpl::grid).
uint linear_index() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG; }
