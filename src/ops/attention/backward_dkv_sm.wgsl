// Fused causal attention, backward, dK and dV on subgroup matrices (mixed precision), after backward_delta.wgsl
// (AMAX): a workgroup takes BM = 64 keys of one (batch, KV head), 16 a subgroup, holding its rows of K and V as left
// fragments and dK, dV as result fragments. For each query head the KV head serves, tiles of BN queries from the
// first that sees the block (q scaled, and dO times 2^-e, staged as f16; lse and D times 2^-e beside them):
//   S^T = K Q^T (through the subgroup's scratch rows); per lane p = exp(s - lse) (causal mask) into the subgroup's
//   f16 rows of P^T, kept in registers too; dV += P^T dO; dP^T = V dO^T (through the scratch); ds = p (dp - D)
//   into the same f16 rows; dK += dS^T Q.
// The (head, query tile) pairs run as one sequence, the next pair's tiles loaded into registers during the current
// one's products (sm_tiles's prefetch; H200, the step's shape: 0.58 ms a layer without it).
// dk = 2^e dK, dv = 2^e dV (the scale is already in the staged q), written [B, L, KV, hd] (dense). 2^e as
// backward_dq_sm.wgsl takes it. Needs what forward_sm.wgsl needs.
//
// @variant HD {16|32|48|64|80|96|112|128} head_dim
// @variant BN {64|32} queries a tile: 64 up to hd 64, 32 past it
// @variant VEC4 {true} q, k, v, dO, dk and dv as vec4 arrays

enable f16;
enable chromium_experimental_subgroup_matrix;
enable chromium_disable_uniformity_analysis;

const HD: u32 = {{HD}}u;
const BN: u32 = {{BN}}u;

{{>attention/sm_tiles}}
{{>attention/params}}
{{>matmul/pow2}}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read> gbuf: array<E>;      // dO
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;   // D [B, H, T], then max |dO|'s bits
@group(0) @binding(7) var<storage, read_write> dk: array<E>;
@group(0) @binding(8) var<storage, read_write> dv: array<E>;

var<workgroup> xs: array<f16, BN * KS>;   // the query tile [query][d]; first the keys, BN rows at a time
var<workgroup> ys: array<f16, BN * KS>;   // the dO tile [query][d]; first the values
var<workgroup> ps: array<f16, BM * PS>;   // P^T, then dS^T, each subgroup's 16 rows
var<workgroup> ss: array<f32, BM * SS>;   // each subgroup's 16 rows of S^T, then of dP^T, then of a dk / dv chunk
var<workgroup> ls: array<f32, BN>;        // the tile's lse
var<workgroup> ds: array<f32, BN>;        // the tile's D times 2^-e

// The prefetch of a query tile: the BN queries from t0 of query head h (q scaled, dO times `down`, queries past T as
// zeros) into lane li's registers, and for lanes li < BN query t0 + li's lse and D times `down` (the last query's past
// T: masked anyway).
fn fetch_qg(li: u32, b: u32, h: u32, t0: u32, down: f32, qn: ptr<function, array<vec4<f16>, NL>>,
            gn: ptr<function, array<vec4<f16>, NL>>, ln: ptr<function, f32>, dn: ptr<function, f32>) {
  let qb = p.q_off + b * p.q_sb + h * p.q_sh;
  let gb = p.g_off + b * p.g_sb + h * p.g_sh;
  for (var n = 0u; n < NL; n = n + 1u) {
    let i = li + 128u * n;
    let t = t0 + i / HD4;
    var qx = vec4<f32>(0.0);
    var gx = vec4<f32>(0.0);
    if (t < p.time) {
      qx = load_q(qb + t * p.q_st, i % HD4) * p.scale;
      gx = gbuf[(gb + t * p.g_st) / 4u + i % HD4] * down;
    }
    (*qn)[n] = vec4<f16>(qx);
    (*gn)[n] = vec4<f16>(gx);
  }
  if (li < BN) {
    let rt = (b * p.heads + h) * p.time + min(t0 + li, p.time - 1u);
    *ln = lse[rt];
    *dn = delta[rt] * down;
  }
}

@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bg = wg / p.blocks;
  if (bg >= p.batch * p.kv_heads) {
    return;  // past the grid's last workgroup (uniform: the whole workgroup leaves)
  }
  let block = wg % p.blocks;  // the earliest keys (seen by the most queries) first
  let b = bg / p.kv_heads;
  let g = bg % p.kv_heads;
  let j0 = block * BM;
  let sg = li / 32u;
  let lane = li % 32u;
  let r = 16u * sg + lane / 2u;  // the lane's row (key) of the block
  let half = lane % 2u;
  let key = j0 + r;
  let up = pow2_of(bitcast<u32>(delta[p.batch * p.heads * p.time]));
  let down = 1.0 / up;

  // K and V as left fragments, staged BN rows at a time through xs and ys (keys past L as zeros).
  var kf: array<subgroup_matrix_left<f16, 16, 16>, HF>;
  var vf: array<subgroup_matrix_left<f16, 16, 16>, HF>;
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  for (var c0 = 0u; c0 < BM; c0 = c0 + BN) {
    for (var i = li; i < BN * HD4; i = i + 128u) {
      let kr = j0 + c0 + i / HD4;
      var kx = vec4<f32>(0.0);
      var vx = vec4<f32>(0.0);
      if (kr < p.keys) {
        kx = load_k(kb + kr * p.k_st, i % HD4);
        vx = load_v(vb + kr * p.v_st, i % HD4);
      }
      let s = (i / HD4) * KS + 4u * (i % HD4);
      stage_x(s, kx);
      stage_y(s, vx);
    }
    workgroupBarrier();
    if (16u * sg >= c0 && 16u * sg < c0 + BN) {
      for (var j = 0u; j < HF; j = j + 1u) {
        kf[j] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&xs, (16u * sg - c0) * KS + 16u * j, false, KS);
        vf[j] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ys, (16u * sg - c0) * KS + 16u * j, false, KS);
      }
    }
    workgroupBarrier();
  }

  var dkf: array<subgroup_matrix_result<f32, 16, 16>, HF>;
  var dvf: array<subgroup_matrix_result<f32, 16, 16>, HF>;
  for (var j = 0u; j < HF; j = j + 1u) {
    dkf[j] = subgroup_matrix_result<f32, 16, 16>();
    dvf[j] = subgroup_matrix_result<f32, 16, 16>();
  }
  var pr: array<f32, HB>;  // the lane's probabilities of the tile
  let srow = r * SS + half * HB;
  let fs = 16u * sg * SS;  // the subgroup's first scratch row
  let group = p.heads / p.kv_heads;
  // The first query that sees the block's first key: query t sees keys 0 ..= offset + t.
  let first = select(0u, j0 - p.offset, j0 > p.offset);
  // The tiles, query head by query head (hi) and BN queries at a time (t0), as one sequence so that the next tile's
  // Q and dO (and lse and D, a lane each) are in registers during the current one's products (sm_tiles's prefetch).
  let tiles = select(0u, (p.time - first + BN - 1u) / BN, first < p.time);
  var qn: array<vec4<f16>, NL>;
  var gn: array<vec4<f16>, NL>;
  var ln = 0.0;
  var dn = 0.0;
  fetch_qg(li, b, g * group, first, down, &qn, &gn, &ln, &dn);
  for (var it = 0u; it < group * tiles; it = it + 1u) {
    let t0 = first + (it % tiles) * BN;
    workgroupBarrier();  // the previous tile's Q, dO and dS^T are no longer read
    stage_regs(li, &qn, &gn);
    if (li < BN) {
      ls[li] = ln;
      ds[li] = dn;
    }
    workgroupBarrier();
    if (it + 1u < group * tiles) {
      fetch_qg(li, b, g * group + (it + 1u) / tiles, first + ((it + 1u) % tiles) * BN, down, &qn, &gn, &ln, &dn);
    }
    // S^T = K Q^T (Q^T's fragments column-major from the [query][d] tile).
    for (var n = 0u; n < KF; n = n + 1u) {
      var acc = subgroup_matrix_result<f32, 16, 16>();
      for (var j = 0u; j < HF; j = j + 1u) {
        let qt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&xs, 16u * n * KS + 16u * j, true, KS);
        acc = subgroupMatrixMultiplyAccumulate(kf[j], qt, acc);
      }
      subgroupMatrixStore(&ss, fs + 16u * n, acc, false, SS);
    }
    workgroupBarrier();
    for (var i = 0u; i < HB; i = i + 1u) {
      let t = t0 + half * HB + i;
      let e = select(0.0, exp(ss[srow + i] - ls[half * HB + i]), t < p.time && key <= p.offset + t);
      pr[i] = e;
      ps[r * PS + half * HB + i] = f16(e);
    }
    workgroupBarrier();
    // dV += P^T dO.
    var pf: array<subgroup_matrix_left<f16, 16, 16>, KF>;
    for (var kk = 0u; kk < KF; kk = kk + 1u) {
      pf[kk] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ps, 16u * sg * PS + 16u * kk, false, PS);
    }
    for (var j = 0u; j < HF; j = j + 1u) {
      for (var kk = 0u; kk < KF; kk = kk + 1u) {
        let gt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&ys, 16u * kk * KS + 16u * j, false, KS);
        dvf[j] = subgroupMatrixMultiplyAccumulate(pf[kk], gt, dvf[j]);
      }
    }
    // dP^T = V dO^T.
    for (var n = 0u; n < KF; n = n + 1u) {
      var acc = subgroup_matrix_result<f32, 16, 16>();
      for (var j = 0u; j < HF; j = j + 1u) {
        let gt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&ys, 16u * n * KS + 16u * j, true, KS);
        acc = subgroupMatrixMultiplyAccumulate(vf[j], gt, acc);
      }
      subgroupMatrixStore(&ss, fs + 16u * n, acc, false, SS);
    }
    workgroupBarrier();  // dP^T is stored; P^T is read (its rows take dS^T)
    for (var i = 0u; i < HB; i = i + 1u) {
      ps[r * PS + half * HB + i] = f16(pr[i] * (ss[srow + i] - ds[half * HB + i]));
    }
    workgroupBarrier();
    // dK += dS^T Q.
    for (var kk = 0u; kk < KF; kk = kk + 1u) {
      pf[kk] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ps, 16u * sg * PS + 16u * kk, false, PS);
    }
    for (var j = 0u; j < HF; j = j + 1u) {
      for (var kk = 0u; kk < KF; kk = kk + 1u) {
        let qt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&xs, 16u * kk * KS + 16u * j, false, KS);
        dkf[j] = subgroupMatrixMultiplyAccumulate(pf[kk], qt, dkf[j]);
      }
    }
  }
  // dk = 2^e dK, dv = 2^e dV, OC columns at a time through the scratch.
  let ke = ((b * p.keys + key) * p.kv_heads + g) * p.head_dim / 4u;
  for (var c0 = 0u; c0 < HD; c0 = c0 + OC) {
    workgroupBarrier();  // the scratch's last reads are done
    for (var j = 0u; j < OC / 16u; j = j + 1u) {
      subgroupMatrixStore(&ss, fs + 16u * j, dkf[c0 / 16u + j], false, SS);
    }
    workgroupBarrier();
    if (key < p.keys) {
      for (var i = 0u; i < HO; i = i + 4u) {
        let s = r * SS + half * HO + i;
        dk[ke + (c0 + half * HO + i) / 4u] = vec4<f32>(ss[s], ss[s + 1u], ss[s + 2u], ss[s + 3u]) * up;
      }
    }
    workgroupBarrier();
    for (var j = 0u; j < OC / 16u; j = j + 1u) {
      subgroupMatrixStore(&ss, fs + 16u * j, dvf[c0 / 16u + j], false, SS);
    }
    workgroupBarrier();
    if (key < p.keys) {
      for (var i = 0u; i < HO; i = i + 4u) {
        let s = r * SS + half * HO + i;
        dv[ke + (c0 + half * HO + i) / 4u] = vec4<f32>(ss[s], ss[s + 1u], ss[s + 2u], ss[s + 3u]) * up;
      }
    }
  }
}
