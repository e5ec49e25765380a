// Fused causal attention, backward, step 3 where the dK/dV kernel wrote dS (attention.cpp's `s` entries):
// dq = scale * dS k, a product over the keys each query sees, without recomputing the scores and dp as
// backward_dq_tiled.wgsl does (two products of its three). dS is [B, H, L, T] (a key's queries contiguous, as the
// dK/dV kernel writes them); only entries with key <= offset + query are read (the others were never written).
// A workgroup takes BM queries of one (batch, head); key tiles of BN rows (k, and dS transposed into [query][key])
// stream through workgroup memory; invocation (ty, tx) owns queries 4 ty .. 4 ty + 3 and the dq vec4 columns
// tx + TX i. Writes dq (dense [B, T, H, hd]); each row summed in one invocation in a fixed order.
//
// @variant WG {128} invocations per workgroup
// @variant BM {32} queries per workgroup (4 per invocation)
// @variant BN {32} keys per workgroup-memory tile
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 32
// @variant VEC4 {true|false} k and dq as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = {{WG}}u;
const BM: u32 = {{BM}}u;
const BN: u32 = {{BN}}u;
const HD4: u32 = {{HD4}}u;
const TY: u32 = BM / 4u;
const TX: u32 = WG / TY;
const OC: u32 = (HD4 + TX - 1u) / TX;
const KS: u32 = HD4 + 1u;   // padded rows: the TX invocations reading different rows spread over the banks
const DSS: u32 = BN + 1u;   // padded: the transposing writes (one key, consecutive queries) spread over the banks

{{>attention/params}}

// Declared for params.wgsl's q and v loads, which this kernel never calls.
var<private> qbuf: array<E, 1>;
var<private> vbuf: array<E, 1>;

// An invocation's output column c, clamped into the row where TX does not divide HD4: columns past the row read
// its last vec4 and are never stored.
fn col(c: u32) -> u32 {
  return select(c, min(c, HD4 - 1u), HD4 % TX != 0u);
}

@group(0) @binding(1) var<storage, read> kbuf: array<E>;
@group(0) @binding(2) var<storage, read> dsbuf: array<f32>;
@group(0) @binding(3) var<storage, read_write> dq: array<E>;

{{#VEC4}}
fn store_dq(e: u32, c: u32, x: vec4<f32>) { dq[e / 4u + c] = x; }
{{/VEC4}}
{{^VEC4}}
fn store_dq(e: u32, c: u32, x: vec4<f32>) {
  for (var i = 0u; i < 4u; i = i + 1u) {
    if (4u * c + i < p.head_dim) { dq[e + 4u * c + i] = x[i]; }
  }
}
{{/VEC4}}

var<workgroup> ks: array<vec4<f32>, BN * KS>;
var<workgroup> dss: array<f32, BM * DSS>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bh = wg / p.blocks;
  if (bh >= p.batch * p.heads) {
    return;
  }
  let block = p.blocks - 1u - wg % p.blocks;  // the latest queries see the most keys: they go first
  let b = bh / p.heads;
  let h = bh % p.heads;
  let g = h / (p.heads / p.kv_heads);
  let t0 = block * BM;
  let tid = lid.x;
  let ty = tid / TX;
  let tx = tid % TX;

  var acc_q: array<vec4<f32>, 4 * OC>;
  for (var x = 0u; x < 4u * OC; x = x + 1u) {
    acc_q[x] = vec4<f32>(0.0);
  }
  let seen = p.offset + min(t0 + BM, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let dsb = bh * p.keys;
  for (var k0 = 0u; k0 < seen; k0 = k0 + BN) {
    workgroupBarrier();  // the previous tile is no longer read
    for (var i = tid; i < BN * HD4; i = i + WG) {
      let row = i / HD4;
      let c = i % HD4;
      let key = k0 + row;
      var kx = vec4<f32>(0.0);
      if (key < p.keys) {
        kx = load_k(kb + key * p.k_st, c);
      }
      ks[row * KS + c] = kx;
    }
    for (var i = tid; i < BN * BM; i = i + WG) {
      let jj = i / BM;
      let q = i % BM;  // consecutive queries: consecutive addresses of dS
      let t = t0 + q;
      let j = k0 + jj;
      var x = 0.0;
      if (t < p.time && j <= p.offset + t) {
        x = dsbuf[(dsb + j) * p.time + t];
      }
      dss[q * DSS + jj] = x;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BN; kk = kk + 1u) {
      for (var i = 0u; i < OC; i = i + 1u) {
        let kv = ks[kk * KS + col(tx + TX * i)];
        for (var r = 0u; r < 4u; r = r + 1u) {
          acc_q[r * OC + i] = fma(vec4<f32>(dss[(4u * ty + r) * DSS + kk]), kv, acc_q[r * OC + i]);
        }
      }
    }
  }
  for (var r = 0u; r < 4u; r = r + 1u) {
    let t = t0 + 4u * ty + r;
    if (t < p.time) {
      let de = ((b * p.time + t) * p.heads + h) * p.head_dim;
      for (var i = 0u; i < OC; i = i + 1u) {
        let c = tx + TX * i;
        if (c < HD4) {
          store_dq(de, c, acc_q[r * OC + i] * p.scale);
        }
      }
    }
  }
}
