// Fused causal attention, backward, step 1 where dK/dV writes dS (attention.cpp's `s` entries): D = rowsum(dO * O)
// for each query row, which the dK/dV kernel reads. One invocation a row of [B, T, H]; the rows are short (hd), so
// this is a small pass over dO and O. Writes D ([B, H, T]). With AMAX (before the subgroup-matrix kernels, which
// scale dO into f16's range by a power of two) it also takes the largest |dO| of the tensor: the f32 bits of each
// workgroup's largest are maxed atomically (the bits of non-negative floats order as the floats) into
// delta[B H T], which the caller zeroes first.
//
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 64
// @variant VEC4 {true|false} dO and O as vec4 arrays (head_dim and every row start multiples of 4)
// @variant AMAX {true|false} also max |dO| into delta[B H T]

const HD4: u32 = {{HD4}}u;

{{>attention/params}}

// Declared for params.wgsl's q, k and v loads, which this kernel never calls.
var<private> qbuf: array<E, 1>;
var<private> kbuf: array<E, 1>;
var<private> vbuf: array<E, 1>;

@group(0) @binding(1) var<storage, read> gbuf: array<E>;    // dO
@group(0) @binding(2) var<storage, read> obuf: array<E>;    // the forward's out, dense
{{#AMAX}}
@group(0) @binding(3) var<storage, read_write> delta: array<atomic<u32>>;
var<workgroup> wmax: atomic<u32>;  // zero at the start, as all workgroup memory
{{/AMAX}}
{{^AMAX}}
@group(0) @binding(3) var<storage, read_write> delta: array<f32>;
{{/AMAX}}

{{#VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> { return gbuf[e / 4u + c]; }
fn load_o(e: u32, c: u32) -> vec4<f32> { return obuf[e / 4u + c]; }
{{/VEC4}}
{{^VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = gbuf[e + 4u * c + i]; }
  }
  return r;
}
fn load_o(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = obuf[e + 4u * c + i]; }
  }
  return r;
}
{{/VEC4}}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) li: u32) {
  let row = gid.x + gid.y * nwg.x * 64u;  // (b, t, h), h fastest: neighbours read neighbouring rows of O
  let total = p.batch * p.time * p.heads;
  var mx = 0.0;
  if (row < total) {  // no early return: AMAX's barrier below needs every invocation
    let h = row % p.heads;
    let t = (row / p.heads) % p.time;
    let b = row / (p.heads * p.time);
    let ge = p.g_off + b * p.g_sb + t * p.g_st + h * p.g_sh;
    let oe = row * p.head_dim;
    var part = vec4<f32>(0.0);
    for (var c = 0u; c < HD4; c = c + 1u) {
      let gv = load_g(ge, c);
      part = fma(gv, load_o(oe, c), part);
      let a = abs(gv);
      mx = max(mx, max(max(a.x, a.y), max(a.z, a.w)));
    }
{{#AMAX}}
    atomicStore(&delta[(b * p.heads + h) * p.time + t], bitcast<u32>(hsum(part)));
{{/AMAX}}
{{^AMAX}}
    delta[(b * p.heads + h) * p.time + t] = hsum(part);
{{/AMAX}}
  }
{{#AMAX}}
  atomicMax(&wmax, bitcast<u32>(mx));
  workgroupBarrier();
  if (li == 0u) {
    atomicMax(&delta[total], atomicLoad(&wmax));
  }
{{/AMAX}}
{{^AMAX}}
  _ = mx;
{{/AMAX}}
}
