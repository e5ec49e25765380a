// Fused causal attention, backward, step 2, tiled: dK and dV together, after backward_dq_tiled.wgsl (or
// backward_dq.wgsl) has written D. A workgroup takes BK keys of one (batch, KV head), their k and v rows in
// workgroup memory, and loops over the query heads the KV head serves (H / KV with GQA) and their queries that see
// the block, in tiles of BQ rows (scaled q, dO, lse, D) staged through workgroup memory. Invocation (ty, tx) owns
// keys R ty .. R ty + R - 1, the tile's queries tx + TX i, and the dk and dv vec4 columns tx + TX c. Per tile:
//   p = exp(scale q.k - lse), dp = dO . v, ds = p (dp - D)       (registers, then p and ds into workgroup memory)
//   dv += p dO, dk += ds scale q                                 (each invocation its keys' columns, whole tile)
// Writes dk and dv (dense [B, L, KV, hd]). Each key's sums run over the queries in one fixed order in one
// invocation: no atomics, the same result on every run. attention.cpp's kDkvTiles lists the (WG, BK, BQ) it tries.
//
// @variant WG {256|128|64|32} invocations per workgroup
// @variant BK {64|32|16} keys per workgroup (R per invocation)
// @variant BQ {64|32|16|8} queries per workgroup-memory tile (a multiple of TX = WG / (BK / R))
// @variant R {4|8} keys per invocation: 8 halves the tile loads per FMA, with twice the accumulators
// @variant DOT {true|false} scores summed as scalars, not as vec4s summed at the end: a quarter of their registers
// @variant DS {true|false} also write dS ([B, H, L, T]) for backward_dq_ds.wgsl, which then needs no scores
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 32
// @variant VEC4 {true|false} q, k, v, dO, dk and dv as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = {{WG}}u;
const BK: u32 = {{BK}}u;
const BQ: u32 = {{BQ}}u;
const HD4: u32 = {{HD4}}u;
const R: u32 = {{R}}u;
const TY: u32 = BK / R;
const TX: u32 = WG / TY;
const SQ: u32 = BQ / TX;                 // queries of a tile per invocation
const OC: u32 = (HD4 + TX - 1u) / TX;    // dk and dv vec4 columns per invocation
const QS: u32 = HD4 + 1u;                // row stride of the query tiles: one vec4 of padding spreads the banks

{{>attention/score_acc}}

{{>attention/params}}

// An invocation's output column c, clamped into the row where TX does not divide HD4: columns past the row read
// its last vec4 and are never stored.
fn col(c: u32) -> u32 {
  return select(c, min(c, HD4 - 1u), HD4 % TX != 0u);
}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read> gbuf: array<E>;    // dO
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> dk: array<E>;
@group(0) @binding(8) var<storage, read_write> dv: array<E>;
{{#DS}}
@group(0) @binding(9) var<storage, read_write> dsbuf: array<f32>;
{{/DS}}

{{#VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> { return gbuf[e / 4u + c]; }
fn store_dk(e: u32, c: u32, x: vec4<f32>) { dk[e / 4u + c] = x; }
fn store_dv(e: u32, c: u32, x: vec4<f32>) { dv[e / 4u + c] = x; }
{{/VEC4}}
{{^VEC4}}
fn load_g(e: u32, c: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { r[i] = gbuf[e + 4u * c + i]; }
  }
  return r;
}
fn store_dk(e: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { dk[e + 4u * c + i] = x[i]; }
  }
}
fn store_dv(e: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { dv[e + 4u * c + i] = x[i]; }
  }
}
{{/VEC4}}

var<workgroup> kts: array<vec4<f32>, BK * HD4>;
var<workgroup> vts: array<vec4<f32>, BK * HD4>;
var<workgroup> qs: array<vec4<f32>, BQ * QS>;   // scale * q
var<workgroup> gs: array<vec4<f32>, BQ * QS>;   // dO
var<workgroup> pss: array<vec4<f32>, BK * BQ / 4u>;  // p and ds, read as vec4s: a quarter of the loads
var<workgroup> dss: array<vec4<f32>, BK * BQ / 4u>;
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
  let block = wg % p.blocks;  // the earliest keys are seen by the most queries: they go first
  let b = bg / p.kv_heads;
  let g = bg % p.kv_heads;
  let rep = p.heads / p.kv_heads;
  let j0 = block * BK;
  let tid = lid.x;
  let ty = tid / TX;
  let tx = tid % TX;

  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var i = tid; i < BK * HD4; i = i + WG) {
    let key = min(j0 + i / HD4, p.keys - 1u);  // rows past L copy the last and write nothing
    kts[i] = load_k(kb + key * p.k_st, i % HD4);
    vts[i] = load_v(vb + key * p.v_st, i % HD4);
  }
  var acc_k: array<vec4<f32>, R * OC>;
  var acc_v: array<vec4<f32>, R * OC>;
  for (var x = 0u; x < R * OC; x = x + 1u) {
    acc_k[x] = vec4<f32>(0.0);
    acc_v[x] = vec4<f32>(0.0);
  }
  // Query t sees key j when offset + t >= j: the block's first key sets where its queries start.
  let first = select(0u, j0 - p.offset, j0 > p.offset);
  for (var hh = 0u; hh < rep; hh = hh + 1u) {
    let h = g * rep + hh;
    let qb = p.q_off + b * p.q_sb + h * p.q_sh;
    let gb = p.g_off + b * p.g_sb + h * p.g_sh;
    let rows = (b * p.heads + h) * p.time;
    for (var t0 = first; t0 < p.time; t0 = t0 + BQ) {
      workgroupBarrier();  // the previous tile and its p, ds are no longer read
      for (var i = tid; i < BQ * HD4; i = i + WG) {
        let r = i / HD4;
        let c = i % HD4;
        let t = t0 + r;
        var qx = vec4<f32>(0.0);
        var gx = vec4<f32>(0.0);
        if (t < p.time) {
          qx = load_q(qb + t * p.q_st, c) * p.scale;
          gx = load_g(gb + t * p.g_st, c);
        }
        qs[r * QS + c] = qx;
        gs[r * QS + c] = gx;
      }
      for (var i = tid; i < BQ; i = i + WG) {
        let t = min(t0 + i, p.time - 1u);
        lse_s[i] = lse[rows + t];
        d_s[i] = delta[rows + t];
      }
      workgroupBarrier();
      var acc_s: array<SA, R * SQ>;
      var acc_p: array<SA, R * SQ>;
      for (var x = 0u; x < R * SQ; x = x + 1u) {
        acc_s[x] = SA(0.0);
        acc_p[x] = SA(0.0);
      }
      for (var c = 0u; c < HD4; c = c + 1u) {
        var kv: array<vec4<f32>, R>;
        var vv: array<vec4<f32>, R>;
        for (var r = 0u; r < R; r = r + 1u) {
          kv[r] = kts[(R * ty + r) * HD4 + c];
          vv[r] = vts[(R * ty + r) * HD4 + c];
        }
        for (var i = 0u; i < SQ; i = i + 1u) {
          let qv = qs[(tx + TX * i) * QS + c];
          let gv = gs[(tx + TX * i) * QS + c];
          for (var r = 0u; r < R; r = r + 1u) {
            acc_s[r * SQ + i] = mac(kv[r], qv, acc_s[r * SQ + i]);
            acc_p[r * SQ + i] = mac(vv[r], gv, acc_p[r * SQ + i]);
          }
        }
      }
      for (var r = 0u; r < R; r = r + 1u) {
        let j = j0 + R * ty + r;
        for (var i = 0u; i < SQ; i = i + 1u) {
          let q = tx + TX * i;
          let t = t0 + q;
          let pv = select(0.0, exp(total(acc_s[r * SQ + i]) - lse_s[q]), t < p.time && p.offset + t >= j);
          pss[(R * ty + r) * (BQ / 4u) + q / 4u][q % 4u] = pv;
          dss[(R * ty + r) * (BQ / 4u) + q / 4u][q % 4u] = pv * (total(acc_p[r * SQ + i]) - d_s[q]);
        }
      }
      workgroupBarrier();
{{#DS}}
      // dS for the dq kernel: consecutive invocations take consecutive queries of a key (consecutive addresses).
      for (var i = tid; i < BK * BQ; i = i + WG) {
        let key = i / BQ;
        let q = i % BQ;
        let t = t0 + q;
        let j = j0 + key;
        if (t < p.time && j < p.keys) {
          dsbuf[((b * p.heads + h) * p.keys + j) * p.time + t] = dss[key * (BQ / 4u) + q / 4u][q % 4u];
        }
      }
{{/DS}}
      for (var q4 = 0u; q4 < BQ / 4u; q4 = q4 + 1u) {
        var pr: array<vec4<f32>, R>;
        var dr: array<vec4<f32>, R>;
        for (var r = 0u; r < R; r = r + 1u) {
          pr[r] = pss[(R * ty + r) * (BQ / 4u) + q4];
          dr[r] = dss[(R * ty + r) * (BQ / 4u) + q4];
        }
        for (var qq = 0u; qq < 4u; qq = qq + 1u) {
          let q = 4u * q4 + qq;
          for (var i = 0u; i < OC; i = i + 1u) {
            let gv = gs[q * QS + col(tx + TX * i)];
            let qv = qs[q * QS + col(tx + TX * i)];
            for (var r = 0u; r < R; r = r + 1u) {
              acc_v[r * OC + i] = fma(vec4<f32>(pr[r][qq]), gv, acc_v[r * OC + i]);
              acc_k[r * OC + i] = fma(vec4<f32>(dr[r][qq]), qv, acc_k[r * OC + i]);
            }
          }
        }
      }
    }
  }
  for (var r = 0u; r < R; r = r + 1u) {
    let j = j0 + R * ty + r;
    if (j < p.keys) {
      let re = ((b * p.keys + j) * p.kv_heads + g) * p.head_dim;
      for (var i = 0u; i < OC; i = i + 1u) {
        let c = tx + TX * i;
        if (c < HD4) {
          store_dk(re, c, acc_k[r * OC + i]);
          store_dv(re, c, acc_v[r * OC + i]);
        }
      }
    }
  }
}
