// Fused causal attention, forward, on subgroup matrices (mixed precision: f16 products, f32 accumulation and
// softmax): the contract of forward_tiled.wgsl. A workgroup takes BM = 64 queries of one (batch, head), 4 subgroups
// of 32 lanes, each owning 16 of the queries. q (scaled), k and v are converted to f16 while staged; a subgroup
// keeps its queries as HF left fragments through the whole loop. Per tile of BN keys:
//   1. S = Q K^T: each subgroup's 16 x BN scores as BN / 16 result fragments, stored to its f32 scratch rows;
//   2. lane (row, half) = (lane / 2, lane % 2) takes half a row: the row's max (the two halves meet through
//      workgroup memory), p = exp(s - m) into the subgroup's f16 rows of P, its running sum and output rescaled
//      (online softmax: a result fragment cannot be scaled per row, so the output lives in the lanes' registers);
//   3. P V in column chunks of OC through the same scratch, added into the lanes' output registers.
// Writes out [B, T, H, hd] and lse [B, H, T] = m + log(l) as forward_tiled.wgsl does. Key tiles past the block's
// last query are never loaded; keys past L are staged as zeros and masked. Rows past T repeat the last query and
// write nothing.
// Needs: subgroups of 32 (the subgroup of a lane is local_invocation_index / 32, as gemm_sm.wgsl), head_dim a
// multiple of 16 up to 128, q, k, v rows as vec4s. Where a device lacks any of these, attention.cpp runs the f32
// tiled kernels. f16's range is no concern here: the rope's q (times 1 / sqrt(hd)), k and v are activations of
// moderate size, and the scores, their maxima, exponentials and sums stay in f32.
// Workgroup memory at hd 64, BN 64: 45.5 KiB; at hd 128, BN 32: 40 KiB.
//
// @variant HD {16|32|48|64|80|96|112|128} head_dim
// @variant BN {64|32} keys a tile: 64 up to hd 64, 32 past it (the staged rows would not fit 48 KiB)
// @variant VEC4 {true} q, k, v and out as vec4 arrays (attention/params's loads)

enable f16;
enable chromium_experimental_subgroup_matrix;
enable chromium_disable_uniformity_analysis;

const HD: u32 = {{HD}}u;
const BN: u32 = {{BN}}u;

{{>attention/sm_tiles}}
{{>attention/params}}

@group(0) @binding(1) var<storage, read> qbuf: array<E>;
@group(0) @binding(2) var<storage, read> kbuf: array<E>;
@group(0) @binding(3) var<storage, read> vbuf: array<E>;
@group(0) @binding(4) var<storage, read_write> out: array<E>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;

var<workgroup> xs: array<f16, BN * KS>;   // the key tile [key][d]; first the queries, BN rows at a time
var<workgroup> ys: array<f16, BN * KS>;   // the value tile [key][d]
var<workgroup> ps: array<f16, BM * PS>;   // P, each subgroup's 16 rows
var<workgroup> ss: array<f32, BM * SS>;   // each subgroup's 16 rows of scores, then of a P V chunk
var<workgroup> red: array<f32, BM * 2u>;  // the two halves' row maxima (and at the end their sums)

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
  let last = p.offset + min(t0 + r, p.time - 1u);  // the last key the row sees

  // The queries, scaled, as left fragments: staged BN rows at a time through xs.
  var qf: array<subgroup_matrix_left<f16, 16, 16>, HF>;
  let qb = p.q_off + b * p.q_sb + h * p.q_sh;
  for (var c0 = 0u; c0 < BM; c0 = c0 + BN) {
    for (var i = li; i < BN * HD4; i = i + 128u) {
      let t = min(t0 + c0 + i / HD4, p.time - 1u);
      stage_x((i / HD4) * KS + 4u * (i % HD4), load_q(qb + t * p.q_st, i % HD4) * p.scale);
    }
    workgroupBarrier();
    if (16u * sg >= c0 && 16u * sg < c0 + BN) {
      for (var j = 0u; j < HF; j = j + 1u) {
        qf[j] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&xs, (16u * sg - c0) * KS + 16u * j, false, KS);
      }
    }
    workgroupBarrier();
  }

  var m = LOWEST;
  var l = 0.0;  // the lane's half of the row sum
  var o: array<f32, HD / 2u>;  // the lane's half of the output row: chunk c's columns c OC + half HO + i at c HO + i
  for (var i = 0u; i < HD / 2u; i = i + 1u) {
    o[i] = 0.0;
  }
  let seen = p.offset + min(t0 + BM, p.time);
  let kb = p.k_off + b * p.k_sb + g * p.k_sh;
  let vb = p.v_off + b * p.v_sb + g * p.v_sh;
  let srow = r * SS;
  let fs = 16u * sg * SS;  // the subgroup's first scratch row
  // The key and value tile in registers one tile ahead (sm_tiles's prefetch).
  var kn: array<vec4<f16>, NL>;
  var vn: array<vec4<f16>, NL>;
  fetch_kv(li, 0u, kb, vb, &kn, &vn);
  for (var k0 = 0u; k0 < seen; k0 = k0 + BN) {
    workgroupBarrier();  // the previous tile's K, V and P are no longer read
    stage_regs(li, &kn, &vn);
    workgroupBarrier();
    if (k0 + BN < seen) {  // the next tile's loads in flight during this one's products
      fetch_kv(li, k0 + BN, kb, vb, &kn, &vn);
    }
    // 1. S = Q K^T. K^T's fragment (d, key) is ks[key KS + d]: column-major from the [key][d] tile.
    for (var n = 0u; n < KF; n = n + 1u) {
      var acc = subgroup_matrix_result<f32, 16, 16>();
      for (var j = 0u; j < HF; j = j + 1u) {
        let kt = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&xs, 16u * n * KS + 16u * j, true, KS);
        acc = subgroupMatrixMultiplyAccumulate(qf[j], kt, acc);
      }
      subgroupMatrixStore(&ss, fs + 16u * n, acc, false, SS);
    }
    workgroupBarrier();
    // 2. Online softmax over the lane's half row.
    var mx = LOWEST;
    for (var i = 0u; i < HB; i = i + 1u) {
      mx = max(mx, select(LOWEST, ss[srow + half * HB + i], k0 + half * HB + i <= last));
    }
    red[2u * r + half] = mx;
    workgroupBarrier();
    let mn = max(m, max(red[2u * r], red[2u * r + 1u]));
    let alpha = exp(m - mn);  // key 0 is in the first tile and every row sees it: mn is finite from there on
    m = mn;
    var sum = 0.0;
    for (var i = 0u; i < HB; i = i + 1u) {
      let e = select(0.0, exp(ss[srow + half * HB + i] - mn), k0 + half * HB + i <= last);
      sum = sum + e;
      ps[r * PS + half * HB + i] = f16(e);
    }
    l = l * alpha + sum;
    for (var i = 0u; i < HD / 2u; i = i + 1u) {
      o[i] = o[i] * alpha;
    }
    workgroupBarrier();  // P is written; the scores are read (the scratch takes P V next)
    // 3. O += P V, OC columns at a time through the scratch.
    var pf: array<subgroup_matrix_left<f16, 16, 16>, KF>;
    for (var kk = 0u; kk < KF; kk = kk + 1u) {
      pf[kk] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&ps, 16u * sg * PS + 16u * kk, false, PS);
    }
    for (var c0 = 0u; c0 < HD; c0 = c0 + OC) {
      for (var j = 0u; j < OC / 16u; j = j + 1u) {
        var acc = subgroup_matrix_result<f32, 16, 16>();
        for (var kk = 0u; kk < KF; kk = kk + 1u) {
          let vf = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&ys, 16u * kk * KS + c0 + 16u * j, false, KS);
          acc = subgroupMatrixMultiplyAccumulate(pf[kk], vf, acc);
        }
        subgroupMatrixStore(&ss, fs + 16u * j, acc, false, SS);
      }
      workgroupBarrier();
      for (var i = 0u; i < HO; i = i + 1u) {
        o[c0 / 2u + i] = o[c0 / 2u + i] + ss[srow + half * HO + i];
      }
      if (c0 + OC < HD) {
        workgroupBarrier();  // the chunk is read before the next one is stored
      }
    }
  }
  red[2u * r + half] = l;
  workgroupBarrier();
  let total = red[2u * r] + red[2u * r + 1u];
  let t = t0 + r;
  if (t < p.time) {
    let inv = 1.0 / total;
    let oe = (((b * p.time + t) * p.heads + h) * p.head_dim) / 4u;
    for (var c0 = 0u; c0 < HD; c0 = c0 + OC) {
      for (var i = 0u; i < HO; i = i + 4u) {
        let x = vec4<f32>(o[c0 / 2u + i], o[c0 / 2u + i + 1u], o[c0 / 2u + i + 2u], o[c0 / 2u + i + 3u]);
        out[oe + (c0 + half * HO + i) / 4u] = x * inv;
      }
    }
    if (half == 0u) {
      lse[(b * p.heads + h) * p.time + t] = m + log(total);
    }
  }
}
