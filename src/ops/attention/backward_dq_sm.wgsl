// Fused causal attention, backward, dQ on subgroup matrices (mixed precision), after backward_delta.wgsl (AMAX):
// a workgroup takes BM = 64 queries of one (batch, head), 16 a subgroup, holding its scaled queries and its rows of
// dO, times 2^-e, as left fragments. Per tile of BN keys (K and V staged as f16):
//   S = Q K^T and dP = dO V^T (result fragments through the subgroup's scratch rows), and per lane
//   p = exp(s - lse) (causal mask), ds = p (dp - D 2^-e) into the subgroup's f16 rows of dS; dQ += dS K.
// dq = scale 2^e dQ, written [B, T, H, hd] (dense).
// f16's range: dO (gradients, easily under f16's smallest normal 2^-14) enters f16 divided by 2^e, the power of two
// at or above its largest magnitude over the whole tensor, which backward_delta.wgsl left after D (the bits of
// max |dO| at delta[B H T]); so does D. Every product of dO is then scaled alike and 2^e is undone in f32, exactly.
// This is fp16 training's loss scaling, per tensor and chosen from the values themselves: what is lost is what
// lies more than 2^24 below the largest.
// Needs what forward_sm.wgsl needs.
//
// @variant HD {16|32|48|64|80|96|112|128} head_dim
// @variant BN {64|32} keys a tile: 64 up to hd 64, 32 past it
// @variant VEC4 {true} q, k, v, dO and dq as vec4 arrays

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
@group(0) @binding(7) var<storage, read_write> dq: array<E>;

var<workgroup> xs: array<f16, BN * KS>;   // the key tile [key][d]; first the queries, BN rows at a time
var<workgroup> ys: array<f16, BN * KS>;   // the value tile [key][d]; first dO
var<workgroup> ps: array<f16, BM * PS>;   // dS, each subgroup's 16 rows
var<workgroup> ss: array<f32, BM * SS>;   // each subgroup's 16 rows of scores, then of dP, then of a dq chunk

@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let wg = wid.x + wid.y * nwg.x;
  let bh = wg / p.blocks;
  if (bh >= p.batch * p.heads) {
    return;  // past the grid's last workgroup (uniform: the whole workgroup leaves)
  }
  let block = p.blocks - 1u - wg % p.blocks;  // the latest queries (the most keys) first
  let b = bh / p.heads;
  let h = bh % p.heads;
  let g = h / (p.heads / p.kv_heads);
  let t0 = block * BM;
  let sg = li / 32u;
  let lane = li % 32u;
  let r = 16u * sg + lane / 2u;  // the lane's row of the block
  let half = lane % 2u;
  let tc = min(t0 + r, p.time - 1u);
  let last = p.offset + tc;  // the last key the row sees
  let up = pow2_of(bitcast<u32>(delta[p.batch * p.heads * p.time]));
  let down = 1.0 / up;
  let row_lse = lse[bh * p.time + tc];
  let row_d = delta[bh * p.time + tc] * down;

  // The queries (scaled) and dO (times 2^-e) as left fragments, staged BN rows at a time through xs and ys.
  var qf: array<subgroup_matrix_left<f16, 16, 16>, HF>;
  var gf: array<subgroup_matrix_left<f16, 16, 16>, HF>;
  let qb = p.q_off + b * p.q_sb + h * p.q_sh;
  let gb = p.g_off + b * p.g_sb + h * p.g_sh;
  for (var c0 = 0u; c0 < BM; c0 = c0 + BN) {
    for (var i = li; i < BN * HD4; i = i + 128u) {
      let t = min(t0 + c0 + i / HD4, p.time - 1u);
      let s = (i / HD4) * KS + 4u * (i % HD4);
      stage_x(s, load_q(qb + t * p.q_st, i % HD4) * p.scale);
      stage_y(s, gbuf[(gb + t * p.g_st) / 4u + i % HD4] * down);
    }
    workgroupBarrier();
    if (16u * sg >= c0 && 16u * sg < c0 + BN) {
      for (var j = 0u; j < HF; j = j + 1u) {
        qf[j] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&xs, (16u * sg - c0) * KS + 16u * j, false, KS);
        gf[j] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ys, (16u * sg - c0) * KS + 16u * j, false, KS);
      }
    }
    workgroupBarrier();
  }

  var dqf: array<subgroup_matrix_result<f32, 16, 16>, HF>;
  for (var j = 0u; j < HF; j = j + 1u) {
    dqf[j] = subgroup_matrix_result<f32, 16, 16>();
  }
  var pr: array<f32, HB>;  // the lane's probabilities of the tile
  let seen = p.offset + min(t0 + BM, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  let srow = r * SS + half * HB;
  let fs = 16u * sg * SS;  // the subgroup's first scratch row
  // The key and value tile in registers (f16) one tile ahead: its loads are in flight during the products.
  var kn: array<vec4<f16>, NL>;
  var vn: array<vec4<f16>, NL>;
  fetch_kv(li, 0u, kb, vb, &kn, &vn);
  for (var k0 = 0u; k0 < seen; k0 = k0 + BN) {
    workgroupBarrier();  // the previous tile's K and dS are no longer read
    stage_regs(li, &kn, &vn);
    workgroupBarrier();
    if (k0 + BN < seen) {
      fetch_kv(li, k0 + BN, kb, vb, &kn, &vn);
    }
    // S = Q K^T (K^T's fragments column-major from the [key][d] tile).
    for (var n = 0u; n < KF; n = n + 1u) {
      var acc = subgroup_matrix_result<f32, 16, 16>();
      for (var j = 0u; j < HF; j = j + 1u) {
        let kt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&xs, 16u * n * KS + 16u * j, true, KS);
        acc = subgroupMatrixMultiplyAccumulate(qf[j], kt, acc);
      }
      subgroupMatrixStore(&ss, fs + 16u * n, acc, false, SS);
    }
    workgroupBarrier();
    for (var i = 0u; i < HB; i = i + 1u) {
      pr[i] = select(0.0, exp(ss[srow + i] - row_lse), k0 + half * HB + i <= last);
    }
    workgroupBarrier();  // the scores are read: the scratch takes dP
    // dP = dO V^T.
    for (var n = 0u; n < KF; n = n + 1u) {
      var acc = subgroup_matrix_result<f32, 16, 16>();
      for (var j = 0u; j < HF; j = j + 1u) {
        let vt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&ys, 16u * n * KS + 16u * j, true, KS);
        acc = subgroupMatrixMultiplyAccumulate(gf[j], vt, acc);
      }
      subgroupMatrixStore(&ss, fs + 16u * n, acc, false, SS);
    }
    workgroupBarrier();
    for (var i = 0u; i < HB; i = i + 1u) {
      ps[r * PS + half * HB + i] = f16(pr[i] * (ss[srow + i] - row_d));
    }
    workgroupBarrier();
    // dQ += dS K.
    var df: array<subgroup_matrix_left<f16, 16, 16>, KF>;
    for (var kk = 0u; kk < KF; kk = kk + 1u) {
      df[kk] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ps, 16u * sg * PS + 16u * kk, false, PS);
    }
    for (var j = 0u; j < HF; j = j + 1u) {
      for (var kk = 0u; kk < KF; kk = kk + 1u) {
        let kf = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&xs, 16u * kk * KS + 16u * j, false, KS);
        dqf[j] = subgroupMatrixMultiplyAccumulate(df[kk], kf, dqf[j]);
      }
    }
  }
  // dq = scale 2^e dQ, OC columns at a time through the scratch (free: its last reads were before the last barrier).
  let t = t0 + r;
  let f = p.scale * up;
  let de = ((b * p.time + t) * p.heads + h) * p.head_dim / 4u;
  for (var c0 = 0u; c0 < HD; c0 = c0 + OC) {
    for (var j = 0u; j < OC / 16u; j = j + 1u) {
      subgroupMatrixStore(&ss, fs + 16u * j, dqf[c0 / 16u + j], false, SS);
    }
    workgroupBarrier();
    if (t < p.time) {
      for (var i = 0u; i < HO; i = i + 4u) {
        let s = r * SS + half * HO + i;
        dq[de + (c0 + half * HO + i) / 4u] = vec4<f32>(ss[s], ss[s + 1u], ss[s + 2u], ss[s + 3u]) * f;
      }
    }
    workgroupBarrier();
  }
}
