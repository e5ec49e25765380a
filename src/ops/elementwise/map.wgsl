// One elementwise kernel for every map over up to three broadcast, strided operands into a contiguous output:
// arithmetic, unary math, comparisons, where, logical_not, and the word copy behind contiguous().
// Variant: the operand and output element types and the expression ({{EXPR}}, over x0, x1, x2 and the scalars
// p.fscalar / p.iscalar), which handlers take from typed tables in elementwise.cpp and select.cpp. Operands a map
// does not use are still bound (to operand 0's buffer) and loaded only when p.flags says they exist.
// Bool tensors are u32 words holding 0 or 1.
//
// (Element types: bool is u32; the vec4 forms where every operand is dense and 16-byte aligned.)
// @variant T0 {f32|i32|u32|vec4<f32>|vec4<i32>|vec4<u32>} operand 0's element type
// @variant T1 {f32|i32|u32|vec4<f32>|vec4<i32>|vec4<u32>} operand 1's (operand 0's where there is none)
// @variant T2 {f32|i32|u32|vec4<f32>|vec4<i32>|vec4<u32>} operand 2's (operand 0's where there is none)
// @variant TOUT {f32|i32|u32|vec4<f32>|vec4<i32>|vec4<u32>} the output's
// @variant EXPR {*} one output element: a WGSL expression over x0, x1, x2, p.fscalar and p.iscalar

{{>common/strided}}
{{>common/math}}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Strided;
@group(0) @binding(1) var<storage, read> in0: array<{{T0}}>;
@group(0) @binding(2) var<storage, read> in1: array<{{T1}}>;
@group(0) @binding(3) var<storage, read> in2: array<{{T2}}>;
@group(0) @binding(4) var<storage, read_write> out: array<{{TOUT}}>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear_index(gid, nwg, WG);
  if (i >= p.n) {
    return;
  }
  let o = operand_offsets(p, i);
  let x0 = in0[o.x];
  var x1: {{T1}};
  var x2: {{T2}};
  if ((p.flags & 1u) != 0u) {
    x1 = in1[o.y];
  }
  if ((p.flags & 2u) != 0u) {
    x2 = in2[o.z];
  }
  out[i] = {{EXPR}};
}
