// Shared by the attention kernels (included as attention/params): the parameter block (attention.cpp's
// AttentionParams) and the loads of q, k and v rows as vec4s. The includer declares HD4, VEC4's element type E
// and the bindings qbuf, kbuf, vbuf.
//
// Views: q is [B, T, H, hd], k and v [B, L, KV, hd], each with its own element offset and strides for batch, time
// and head (the head dim is dense). g is the output gradient dO, read like q. Time t of a query is position
// offset + t, where offset = L - T: query t sees keys 0 ..= offset + t (causal, the cache's keys included).

struct Params {
  batch: u32,
  time: u32,       // T, queries per (batch, head)
  keys: u32,       // L
  heads: u32,      // H
  kv_heads: u32,   // KV; query head h reads KV head h / (H / KV)
  head_dim: u32,
  offset: u32,     // L - T
  blocks: u32,     // workgroups per (batch, head): ceil(T / WG), or ceil(L / WG) for the dK/dV kernel
  q_off: u32, q_sb: u32, q_st: u32, q_sh: u32,
  k_off: u32, k_sb: u32, k_st: u32, k_sh: u32,
  v_off: u32, v_sb: u32, v_st: u32, v_sh: u32,
  g_off: u32, g_sb: u32, g_st: u32, g_sh: u32,
  scale: f32,      // the scores are scale * q.k
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const LOWEST: f32 = -0x1.fffffep+127f;

// Element c (a vec4: dims 4c .. 4c + 3) of the row starting at element e; dims past head_dim read as 0.
{{#VEC4}}
alias E = vec4<f32>;
fn load_q(e: u32, c: u32) -> vec4<f32> { return qbuf[e / 4u + c]; }
fn load_k(e: u32, c: u32) -> vec4<f32> { return kbuf[e / 4u + c]; }
fn load_v(e: u32, c: u32) -> vec4<f32> { return vbuf[e / 4u + c]; }
{{/VEC4}}
{{^VEC4}}
alias E = f32;
fn load_q(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = qbuf[e + 4u * c + i]; }
  }
  return r;
}
fn load_k(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = kbuf[e + 4u * c + i]; }
  }
  return r;
}
fn load_v(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = vbuf[e + 4u * c + i]; }
  }
  return r;
}
{{/VEC4}}

fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }
