// Fused causal attention, backward, step 2: dK or dV (DK), after backward_dq.wgsl has written D. For one (batch,
// KV head) and a block of WG keys, one key per invocation: the queries that see the block (those of every query
// head the KV head serves, H / KV of them with GQA) stream through workgroup memory in tiles of BQ rows, with their
// dO rows, lse and D, and each invocation recomputes its column of probabilities:
//   p = exp(scale q.k - lse), dv += p dO                        (DK false)
//   dp = dO . v, ds = p (dp - D), dk += ds scale q              (DK true)
// into registers, then writes its row of dk or dv (dense [B, L, KV, hd]). dK and dV are separate dispatches so
// that one invocation holds two head rows (k and dv) or three (k, v, dk) rather than four, which would not stay in
// registers at head_dim 64; the scores are recomputed for each. Each key's sum runs over the queries in one order
// in one invocation: no atomics, the same result on every run.
//
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 64
// @variant BQ {4|8|16|32} queries per workgroup-memory tile (attention.cpp: the most that fit the device's limit)
// @variant VEC4 {true|false} q, k, v, dO and the result as vec4 arrays (head_dim and every row start multiples of 4)
// @variant DK {true|false} computes dk (true) or dv (false)

const WG: u32 = 64u;
const HD4: u32 = {{HD4}}u;
const BQ: u32 = {{BQ}}u;
const DK: bool = {{DK}};

{{>attention/params}}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read> gbuf: array<E>;    // dO
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> result: array<E>;

{{#VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> { return gbuf[e / 4u + c]; }
fn store_result(e: u32, c: u32, x: vec4<f32>) { result[e / 4u + c] = x; }
{{/VEC4}}
{{^VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = gbuf[e + 4u * c + i]; }
  }
  return r;
}
fn store_result(e: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { result[e + 4u * c + i] = x[i]; }
  }
}
{{/VEC4}}

var<workgroup> qs: array<vec4<f32>, BQ * HD4>;   // scale * q
var<workgroup> gs: array<vec4<f32>, BQ * HD4>;   // dO
var<workgroup> lse_s: array<f32, BQ>;
var<workgroup> d_s: array<f32, BQ>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bg = wg / p.blocks;
  if (bg >= p.batch * p.kv_heads) {
    return;
  }
  // The earliest keys are seen by the most queries: they go first.
  let block = wg % p.blocks;
  let b = bg / p.kv_heads;
  let g = bg % p.kv_heads;
  let rep = p.heads / p.kv_heads;
  let j0 = block * WG;
  let j = j0 + lid.x;
  let jk = min(j, p.keys - 1u);

  var kr: array<vec4<f32>, HD4>;
  var vr: array<vec4<f32>, select(1u, HD4, DK)>;
  var acc: array<vec4<f32>, HD4>;
  let ke = p.k_off + b * p.k_sb + jk * p.k_st + g * p.k_sh;
  let ve = p.v_off + b * p.v_sb + jk * p.v_st + g * p.v_sh;
  for (var c = 0u; c < HD4; c = c + 1u) {
    kr[c] = load_k(ke, c);
    if (DK) {
      vr[c] = load_v(ve, c);
    }
    acc[c] = vec4<f32>(0.0);
  }
  // Query t sees key j when offset + t >= j: the block's first keys set where its queries start.
  let first = select(0u, j0 - p.offset, j0 > p.offset);
  for (var hh = 0u; hh < rep; hh = hh + 1u) {
    let h = g * rep + hh;
    let qb = p.q_off + b * p.q_sb + h * p.q_sh;
    let gb = p.g_off + b * p.g_sb + h * p.g_sh;
    let rows = (b * p.heads + h) * p.time;
    for (var t0 = first; t0 < p.time; t0 = t0 + BQ) {
      workgroupBarrier();
      for (var i = lid.x; i < BQ * HD4; i = i + WG) {
        let t = t0 + i / HD4;
        var qx = vec4<f32>(0.0);
        var gx = vec4<f32>(0.0);
        if (t < p.time) {
          qx = load_q(qb + t * p.q_st, i % HD4) * p.scale;
          gx = load_g(gb + t * p.g_st, i % HD4);
        }
        qs[i] = qx;
        gs[i] = gx;
      }
      for (var i = lid.x; i < BQ; i = i + WG) {
        let t = min(t0 + i, p.time - 1u);
        lse_s[i] = lse[rows + t];
        d_s[i] = delta[rows + t];
      }
      workgroupBarrier();
      for (var i = 0u; i < BQ; i = i + 1u) {
        var sv = vec4<f32>(0.0);
        var dpv = vec4<f32>(0.0);
        for (var c = 0u; c < HD4; c = c + 1u) {
          sv = fma(kr[c], qs[i * HD4 + c], sv);
          if (DK) {
            dpv = fma(vr[c], gs[i * HD4 + c], dpv);
          }
        }
        let t = t0 + i;
        let pi = select(0.0, exp(hsum(sv) - lse_s[i]), t < p.time && p.offset + t >= j);
        if (DK) {
          let ds = pi * (hsum(dpv) - d_s[i]);
          for (var c = 0u; c < HD4; c = c + 1u) {
            acc[c] = fma(vec4<f32>(ds), qs[i * HD4 + c], acc[c]);
          }
        } else {
          for (var c = 0u; c < HD4; c = c + 1u) {
            acc[c] = fma(vec4<f32>(pi), gs[i * HD4 + c], acc[c]);
          }
        }
      }
    }
  }
  if (j < p.keys) {
    let re = ((b * p.keys + j) * p.kv_heads + g) * p.head_dim;
    for (var c = 0u; c < HD4; c = c + 1u) {
      store_result(re, c, acc[c]);
    }
  }
}
