// out[i] = input[coords(i) with coords[dim] replaced by index[coords(i)]], over the index's shape.
// Operand 0 is the index view (i32), operand 1 the input view with a stride of 0 along dim (the index supplies that
// coordinate). p.iscalar.x is input.size(dim), p.iscalar.y input's stride along dim. An index outside
// [0, size) never reads: it writes a zero and sets bit p.flags of the device's index-error word, which the host
// checks at the next read-back (for indices whose range the host could not check before the dispatch).
// embedding is this gather with dim 0 and the indices broadcast along the embedding dim.
// Variant: T, the element type of input and output.
//
// @variant T {f32|i32|u32} the element type of input and output (bool: u32)

{{>common/strided}}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Strided;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read> input: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> index_error: array<atomic<u32>>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let i = linear_index(gid, nwg, WG);
  if (i >= p.n) {
    return;
  }
  let o = operand_offsets(p, i);
  let v = index[o.x];
  if (v < 0 || v >= p.iscalar.x) {
    atomicOr(&index_error[0], p.flags);
    out[i] = {{T}}();
    return;
  }
  out[i] = input[o.y + u32(v) * u32(p.iscalar.y)];
}
