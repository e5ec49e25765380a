// dst[view] = src[view], elementwise over one shape, as 32-bit words (any dtype, bit for bit). Operand 0 is the
// source view, operand 1 the destination view (a slice of a larger tensor, for cat and slice assignment).
// In vec4<u32> words where both views' rows are contiguous and everything is a multiple of 4 words (the host divides
// shapes, strides and offsets by 4); a copy that transposes goes through shape/transpose.wgsl instead.
// @variant T {u32|vec4<u32>} the word moved per element

{{>common/strided}}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Strided;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear_index(gid, nwg, WG);
  if (i >= p.n) {
    return;
  }
  let o = operand_offsets(p, i);
  dst[o.y] = src[o.x];
}
