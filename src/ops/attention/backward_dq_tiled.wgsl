// Fused causal attention, backward, step 1, tiled: dQ, and D = rowsum(dO * O) for step 2. Laid out as
// forward_tiled.wgsl: BM queries of one (batch, head) a workgroup, their scaled q and dO rows in workgroup memory,
// key and value tiles of BN rows streaming through it; invocation (ty, tx) owns queries R ty .. R ty + R - 1, the tile's
// keys tx + TX j, and the dq vec4 columns tx + TX i. Per tile, from the forward's lse:
//   p = exp(s - lse), dp = dO . v, ds = p (dp - D)       (registers, then ds into workgroup memory)
//   dq += ds k                                            (each invocation its rows' columns, over the whole tile)
// D is summed once at the start (partial sums over the columns through workgroup memory) and written for step 2.
// Writes dq * scale (dense [B, T, H, hd]) and D ([B, H, T]); nothing is accumulated across workgroups. attention.cpp's
// kDqTiles lists the (WG, BM, BN) it tries, in order.
//
// @variant WG {256|128|64|32} invocations per workgroup
// @variant BM {64|32|16} queries per workgroup (R per invocation)
// @variant BN {64|32|16|8} keys per workgroup-memory tile (a multiple of TX = WG / (BM / R))
// @variant R {4|8} queries per invocation: 8 halves the tile loads per FMA, with twice the accumulators
// @variant DOT {true|false} scores summed as scalars, not as vec4s summed at the end: a quarter of their registers
// @variant HD4 {*} vec4s per head row: ceil(head_dim / 4), 1 to 32
// @variant VEC4 {true|false} q, k, v, dO, O and dq as vec4 arrays (head_dim and every row start multiples of 4)

const WG: u32 = {{WG}}u;
const BM: u32 = {{BM}}u;
const BN: u32 = {{BN}}u;
const HD4: u32 = {{HD4}}u;
const R: u32 = {{R}}u;
const TY: u32 = BM / R;
const TX: u32 = WG / TY;
const SN: u32 = BN / TX;
const OC: u32 = (HD4 + TX - 1u) / TX;
const KS: u32 = HD4 + 1u;

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

var<workgroup> qs: array<vec4<f32>, BM * HD4>;   // scale * q
var<workgroup> gs: array<vec4<f32>, BM * HD4>;   // dO
var<workgroup> ks: array<vec4<f32>, BN * KS>;
var<workgroup> vs: array<vec4<f32>, BN * KS>;
var<workgroup> dss: array<vec4<f32>, BM * BN / 4u>;  // read as vec4s: a quarter of the loads
var<workgroup> red: array<f32, BM * TX>;

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
  let t0 = block * BM;
  let tid = lid.x;
  let ty = tid / TX;
  let tx = tid % TX;

  let qb = p.q_off + b * p.q_sb + h * p.q_sh;
  let gb = p.g_off + b * p.g_sb + h * p.g_sh;
  for (var i = tid; i < BM * HD4; i = i + WG) {
    let t = min(t0 + i / HD4, p.time - 1u);
    qs[i] = load_q(qb + t * p.q_st, i % HD4) * p.scale;
    gs[i] = load_g(gb + t * p.g_st, i % HD4);
  }
  workgroupBarrier();
  // D: each invocation its rows' columns, then the TX partial sums.
  var last: array<u32, R>;
  var lse_r: array<f32, R>;
  var d: array<f32, R>;
  var acc_q: array<vec4<f32>, R * OC>;
  for (var r = 0u; r < R; r = r + 1u) {
    let row = R * ty + r;
    let tq = min(t0 + row, p.time - 1u);
    last[r] = p.offset + tq;
    lse_r[r] = lse[(b * p.heads + h) * p.time + tq];
    let oe = ((b * p.time + tq) * p.heads + h) * p.head_dim;
    var part = vec4<f32>(0.0);
    for (var i = 0u; i < OC; i = i + 1u) {
      let c = tx + TX * i;
      if (c < HD4) {
        part = fma(gs[row * HD4 + c], load_o(oe, c), part);
      }
      acc_q[r * OC + i] = vec4<f32>(0.0);
    }
    red[row * TX + tx] = hsum(part);
  }
  workgroupBarrier();
  for (var r = 0u; r < R; r = r + 1u) {
    var sum = 0.0;
    for (var x = 0u; x < TX; x = x + 1u) {
      sum = sum + red[(R * ty + r) * TX + x];
    }
    d[r] = sum;
  }

  let seen = p.offset + min(t0 + BM, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var k0 = 0u; k0 < seen; k0 = k0 + BN) {
    workgroupBarrier();
    for (var i = tid; i < BN * HD4; i = i + WG) {
      let row = i / HD4;
      let c = i % HD4;
      let key = k0 + row;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (key < p.keys) {
        kx = load_k(kb + key * p.k_st, c);
        vx = load_v(vb + key * p.v_st, c);
      }
      ks[row * KS + c] = kx;
      vs[row * KS + c] = vx;
    }
    workgroupBarrier();
    var acc_s: array<SA, R * SN>;
    var acc_p: array<SA, R * SN>;
    for (var x = 0u; x < R * SN; x = x + 1u) {
      acc_s[x] = SA(0.0);
      acc_p[x] = SA(0.0);
    }
    for (var c = 0u; c < HD4; c = c + 1u) {
      var qv: array<vec4<f32>, R>;
      var gv: array<vec4<f32>, R>;
      for (var r = 0u; r < R; r = r + 1u) {
        qv[r] = qs[(R * ty + r) * HD4 + c];
        gv[r] = gs[(R * ty + r) * HD4 + c];
      }
      for (var j = 0u; j < SN; j = j + 1u) {
        let kv = ks[(tx + TX * j) * KS + c];
        let vv = vs[(tx + TX * j) * KS + c];
        for (var r = 0u; r < R; r = r + 1u) {
          acc_s[r * SN + j] = mac(qv[r], kv, acc_s[r * SN + j]);
          acc_p[r * SN + j] = mac(gv[r], vv, acc_p[r * SN + j]);
        }
      }
    }
    for (var r = 0u; r < R; r = r + 1u) {
      for (var j = 0u; j < SN; j = j + 1u) {
        let pj = select(0.0, exp(total(acc_s[r * SN + j]) - lse_r[r]), k0 + tx + TX * j <= last[r]);
        let key = tx + TX * j;
        dss[(R * ty + r) * (BN / 4u) + key / 4u][key % 4u] = pj * (total(acc_p[r * SN + j]) - d[r]);
      }
    }
    workgroupBarrier();
    for (var k4 = 0u; k4 < BN / 4u; k4 = k4 + 1u) {
      var dk: array<vec4<f32>, R>;
      for (var r = 0u; r < R; r = r + 1u) {
        dk[r] = dss[(R * ty + r) * (BN / 4u) + k4];
      }
      for (var kk = 0u; kk < 4u; kk = kk + 1u) {
        for (var i = 0u; i < OC; i = i + 1u) {
          let kv = ks[(4u * k4 + kk) * KS + col(tx + TX * i)];
          for (var r = 0u; r < R; r = r + 1u) {
            acc_q[r * OC + i] = fma(vec4<f32>(dk[r][kk]), kv, acc_q[r * OC + i]);
          }
        }
      }
    }
  }
  for (var r = 0u; r < R; r = r + 1u) {
    let t = t0 + R * ty + r;
    if (t < p.time) {
      let de = ((b * p.time + t) * p.heads + h) * p.head_dim;
      for (var i = 0u; i < OC; i = i + 1u) {
        let c = tx + TX * i;
        if (c < HD4) {
          store_dq(de, c, acc_q[r * OC + i] * p.scale);
        }
      }
      if (tx == 0u) {
        delta[(b * p.heads + h) * p.time + t] = d[r];
      }
    }
  }
}
