// Fused causal attention, backward, step 1: dQ, and D = rowsum(dO * O) for step 2. Laid out as forward.wgsl (a
// block of WG queries of one (batch, head), one per invocation, key and value tiles of BK rows in workgroup
// memory), each invocation recomputing its row of probabilities tile by tile from the forward's lse:
//   p = exp(s - lse), dp = dO . v, ds = p (dp - D), dq += ds k
// and writing dq * scale (dense [B, T, H, hd]) and D ([B, H, T]). Nothing is accumulated across workgroups, so
// the result is the same on every run.
//
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 64
// @variant BK {4|8|16|32} keys per workgroup-memory tile (attention.cpp: the most that fit the device's limit)
// @variant VEC4 {true|false} q, k, v, dO, O and dq as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = 64u;
const HD4: u32 = {{HD4}}u;
const BK: u32 = {{BK}}u;

{{>attention/params}}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read> gbuf: array<E>;    // dO
@group(0) @binding(5) var<storage, read> obuf: array<E>;    // the forward's out, dense
@group(0) @binding(6) var<storage, read> lse: array<f32>;
@group(0) @binding(7) var<storage, read_write> dq: array<E>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;

{{#VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> { return gbuf[e / 4u + c]; }
fn load_o(e: u32, c: u32) -> vec4<f32> { return obuf[e / 4u + c]; }
fn store_dq(e: u32, c: u32, x: vec4<f32>) { dq[e / 4u + c] = x; }
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
fn store_dq(e: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { dq[e + 4u * c + i] = x[i]; }
  }
}
{{/VEC4}}

var<workgroup> ks: array<vec4<f32>, BK * HD4>;
var<workgroup> vs: array<vec4<f32>, BK * HD4>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bh = wg / p.blocks;
  if (bh >= p.batch * p.heads) {
    return;
  }
  let block = p.blocks - 1u - wg % p.blocks;
  let b = bh / p.heads;
  let h = bh % p.heads;
  let g = h / (p.heads / p.kv_heads);
  let t0 = block * WG;
  let t = t0 + lid.x;
  let tq = min(t, p.time - 1u);

  var q: array<vec4<f32>, HD4>;
  var go: array<vec4<f32>, HD4>;
  var acc_q: array<vec4<f32>, HD4>;
  let qe = p.q_off + b * p.q_sb + tq * p.q_st + h * p.q_sh;
  let ge = p.g_off + b * p.g_sb + tq * p.g_st + h * p.g_sh;
  let oe = ((b * p.time + tq) * p.heads + h) * p.head_dim;
  var dsum = vec4<f32>(0.0);
  for (var c = 0u; c < HD4; c = c + 1u) {
    q[c] = load_q(qe, c) * p.scale;
    go[c] = load_g(ge, c);
    dsum = fma(go[c], load_o(oe, c), dsum);
    acc_q[c] = vec4<f32>(0.0);
  }
  let d = hsum(dsum);
  let row = (b * p.heads + h) * p.time + tq;
  let lse_t = lse[row];
  let last = p.offset + tq;
  let seen = p.offset + min(t0 + WG, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var k0 = 0u; k0 < seen; k0 = k0 + BK) {
    workgroupBarrier();
    for (var i = lid.x; i < BK * HD4; i = i + WG) {
      let key = k0 + i / HD4;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (key < p.keys) {
        kx = load_k(kb + key * p.k_st, i % HD4);
        vx = load_v(vb + key * p.v_st, i % HD4);
      }
      ks[i] = kx;
      vs[i] = vx;
    }
    workgroupBarrier();
    for (var j = 0u; j < BK; j = j + 1u) {
      var sv = vec4<f32>(0.0);
      var dpv = vec4<f32>(0.0);
      for (var c = 0u; c < HD4; c = c + 1u) {
        sv = fma(q[c], ks[j * HD4 + c], sv);
        dpv = fma(go[c], vs[j * HD4 + c], dpv);
      }
      let pj = select(0.0, exp(hsum(sv) - lse_t), k0 + j <= last);
      let ds = pj * (hsum(dpv) - d);
      for (var c = 0u; c < HD4; c = c + 1u) {
        acc_q[c] = fma(vec4<f32>(ds), ks[j * HD4 + c], acc_q[c]);
      }
    }
  }
  if (t < p.time) {
    let de = ((b * p.time + t) * p.heads + h) * p.head_dim;
    for (var c = 0u; c < HD4; c = c + 1u) {
      store_dq(de, c, acc_q[c] * p.scale);
    }
    delta[row] = d;
  }
}
