// Mixed-precision GEMM on Dawn's subgroup matrices (matrix units, "tensor cores"): the contract of gemm.wgsl
// (C[b] (+)= A[b] B[b] (+ bias), C contiguous [batch, M, N], A and B strided, B in the three forms of B_MODE,
// split-K) with f16 products and f32 accumulation.
// f32 operands are converted to f16 while they are staged into workgroup memory; q4gsw codes are dequantised into
// f16 there. f16's range is the risk (gradients of 1e-6 underflow, sums over long k overflow): where flags bit 16
// (A) or 32 (B) is set, each row of A / column of B is first divided by a power of two, 2^e with its largest
// magnitude in [2^(e-1), 2^e), so that it enters f16 at or below 1; the epilogue multiplies the f32 sum by both
// powers, which is exact. The powers come from sm_absmax.wgsl as the f32 bit patterns of the largest magnitudes.
// Structure as the kernel proven on the H200 (bench/subgroup_matrix/gen.py, 170 TFLOP/s from f32 inputs at
// 4096^3): a 128 x 128 block, 32 deep in k, 8 subgroups of 32 lanes in 2 x 4, each owning a 64 x 32 tile as 4 x 2
// fragments of 16 x 16 x 16; workgroup-memory rows padded by 8 halves against bank conflicts. The subgroup of a
// lane is taken as local_invocation_index / 32 (as there), which needs subgroups of 32 (NVIDIA).
// chromium_disable_uniformity_analysis: Tint otherwise rejects subgroupMatrixLoad/Store offsets that depend on the
// invocation (the subgroup's tile), though they are uniform across each subgroup.
// Edges: loads outside M, N or K take zeros, so the fragments always see whole tiles.
// The results: each subgroup stores its fragments straight to memory as they are, still scaled (no tile of results
// in workgroup memory: on the H200 16 KiB more of it a workgroup cost 40% of the speed, run n; nor a read-back after
// a storage barrier: 30%). sm_finish.wgsl then undoes the scales, adds the bias and what c held: in place where the
// fragments went into c itself (M and N multiples of 16, so none straddles an edge; nothing accumulated), else from
// the padded buffer [z][grid rows * 128][grid columns * 128] they went to (summing split-K's chunks).
//
// @variant B_MODE {0|1|2} the form of B: f32, q4gsw read as W^T, q4gsw read as W (gemm.wgsl's)
// @variant A_VEC {true|false} A row-major with rows and offset multiples of 4 floats and K too: loaded as vec4s, a
//   thread's 4 of a k-tile from one row (one row scale a thread: 4 kept in registers cost 40% on the H200, run n),
//   stored into a [k][m] tile as A_T's
// @variant A_T {true|false} A column-major (m stride 1) with k stride, offset and M multiples of 4 (the weight
//   gradient's dy^T, transposed views): loaded as vec4s along m into a [k][m] tile, read as column-major fragments
// @variant A_V4 {true|false} A_VEC or A_T: A is bound as vec4s
// @variant A_TYPE {vec4<f32>|f32} the element type A is bound as: vec4<f32> exactly when A_V4
// @variant B_VEC {true|false} the same for B along n (B_MODE 0 only)
// @variant B_T {true|false} B column-major (k stride 1: W^T of an f32 weight, the tied head) with n stride, offset
//   and K multiples of 4 (B_MODE 0 only): vec4s along k into an [n][k] tile, read as column-major fragments
// @variant B_V4 {true|false} B_VEC or B_T: B is bound as vec4s
// @variant B_TYPE {vec4<f32>|f32|u32} the element type B is bound as: vec4<f32> when B_V4, u32 in the q4 modes
// @variant BM {128|64} rows of C a workgroup: 64 gives twice the workgroups where a product has few 128 x 128
//   blocks (the step's 8192 x 640 outputs make 320 on 132 SMs); its subgroups own 32 x 32 (2 x 2 fragments)

enable f16;
enable chromium_experimental_subgroup_matrix;
enable chromium_disable_uniformity_analysis;

const B_MODE: u32 = {{B_MODE}}u;
const A_VEC: bool = {{A_VEC}};
const A_T: bool = {{A_T}};
const B_VEC: bool = {{B_VEC}};
const B_T: bool = {{B_T}};
const BM: u32 = {{BM}}u;
const BN: u32 = 128u;
const BK: u32 = 32u;
const SA: u32 = BK + 8u;  // row stride of sa (halves)
const SB: u32 = BN + 8u;  // row stride of sb
const SAT: u32 = BM + 8u;  // row stride of sa as a [k][m] tile (A_T)
const_assert BK * SAT <= BM * SA;
// A_VEC's tile is [k][m] too, read as column-major fragments: on the H200 row-major left fragments from an [m][k]
// tile ran at half the speed (mm 4096^3: 85 against 139 TFLOP/s, run n).
const A_KM: bool = A_T || A_VEC;
const A_STRIDE: u32 = select(SA, SAT, A_KM);
const SBT: u32 = BK + 8u;  // row stride of sb as an [n][k] tile (B_T, and B_MODE 1, whose words run along k)
const B_NK: bool = B_T || B_MODE == 1u;
const SB_SIZE: u32 = max(BK * SB, BN * SBT);
const B_STRIDE: u32 = select(SB, SBT, B_NK);
const WM: u32 = BM / 2u;  // a subgroup's tile (2 x 4 subgroups)
const WN: u32 = 32u;
const FM: bool = BM == 128u;  // 4 fragments down a subgroup's tile, else 2
const LOADS_A: u32 = BM * BK / 256u;  // elements of A each thread stages per k-tile
const LOADS: u32 = BN * BK / 256u;  // elements of an f32 B
const Q_LOADS: u32 = BN * BK / 8u / 256u;  // q4 words each thread stages per k-tile
const_assert LOADS == 16u;
const_assert Q_LOADS == 2u;
const LOADS4_A: u32 = LOADS_A / 4u;  // the same in vec4s (A_VEC, A_T, B_VEC)
const LOADS4: u32 = LOADS / 4u;
const A_TPR: u32 = (BK / 4u) / LOADS4_A;  // A_VEC: threads a row of the k-tile (a thread's vec4s in one row)
// Reciprocal row scales a thread keeps (ainv): A_T's vec4 spans 4 rows; A_VEC's all lie in one row (4 kept all
// the same, as A_T's branch, compiled in every variant, indexes 4).
const NA: u32 = select(LOADS_A, 4u, A_VEC || A_T);
const NB: u32 = select(LOADS, LOADS4, B_VEC || B_T || B_MODE != 0u);  // column scales (binv; unused in the q4 modes)

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch0: u32,
  a_off: u32,
  a_sb: u32,
  a_sm: u32,
  a_sk: u32,
  b_off: u32,
  b_sb: u32,
  b_sk: u32,
  b_sn: u32,
  _unused0: u32,
  flags: u32,       // 4: A's k stride is 1; 8: B's n stride is 1; 16: A rows scaled;
                    // 32: B columns scaled
  q_words: u32,
  q_rows: u32,
  group_size: u32,
  c_off: u32,
  k_chunk: u32,
  sa_off: u32,      // absmax bits of A's rows: absmax_a[sa_off + batch * m + row]
  sb_off: u32,      // of B's columns: absmax_b[sb_off + batch * n + col]
  r_sn: u32,        // where results go: row stride (N in c, grid columns * 128 in a padded buffer)
  r_sb: u32,        // and the stride of wid.z (batch or split-K chunk)
  padded: u32,      // 1: c is the padded buffer (whole blocks), else c itself
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<{{A_TYPE}}>;
@group(0) @binding(2) var<storage, read> b: array<{{B_TYPE}}>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
// Two bindings, often of one buffer: an operand's bits may come from an earlier GEMM's pass (gemm_sm.cpp).
@group(0) @binding(5) var<storage, read> absmax_a: array<u32>;
@group(0) @binding(6) var<storage, read> absmax_b: array<u32>;

var<workgroup> sa: array<f16, BM * SA>;  // BM * SA: A's tile [m][k] ([k][m], BK * SAT, with A_T)
var<workgroup> sb: array<f16, SB_SIZE>;  // B's tile [k][n] (BK * SB), or [n][k] with B_NK (BN * SBT)

// Accessors by f32 index (load_a1, load_b1), vec4 index (load_a4, load_b4) or u32 word (load_bw): every variant
// defines all of them, so that the code below type-checks whatever A and B are bound as.
{{#A_V4}}
fn load_a1(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn load_a4(i: u32) -> vec4<f32> { return a[i]; }
{{/A_V4}}
{{^A_V4}}
fn load_a1(i: u32) -> f32 { return a[i]; }
fn load_a4(i: u32) -> vec4<f32> { return vec4<f32>(a[4u * i], a[4u * i + 1u], a[4u * i + 2u], a[4u * i + 3u]); }
{{/A_V4}}
{{#B_V4}}
fn load_b1(i: u32) -> f32 { return b[i / 4u][i % 4u]; }
fn load_b4(i: u32) -> vec4<f32> { return b[i]; }
fn load_bw(i: u32) -> u32 { return 0u; }
{{/B_V4}}
{{^B_V4}}
fn load_b1(i: u32) -> f32 { return f32(b[i]); }
fn load_b4(i: u32) -> vec4<f32> {
  return vec4<f32>(f32(b[4u * i]), f32(b[4u * i + 1u]), f32(b[4u * i + 2u]), f32(b[4u * i + 3u]));
}
fn load_bw(i: u32) -> u32 { return u32(b[i]); }
{{/B_V4}}

// The offset in sa of the fragment at row r, column k of A's tile.
fn a_frag(r: u32, k: u32) -> u32 {
  return select(r * SA + k, k * SAT + r, A_KM);
}

// The offset in sb of the fragment at row k, column c of B's tile.
fn b_frag(k: u32, c: u32) -> u32 {
  return select(k * SB + c, c * SBT + k, B_NK);
}

fn dequant(word: u32, j: u32, scale: f32) -> f32 {
  return (f32((word >> (4u * j)) & 15u) - 8.0) * scale;
}

{{>matmul/pow2}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  let out_bat = wid.z + p.batch0;
  let bat = select(out_bat, 0u, p.k_chunk != 0u);
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let sg = li / 32u;
  let wr = (sg / 4u) * WM;
  let wc = (sg % 4u) * WN;
  _ = &scales;
  let a_base = p.a_off + bat * p.a_sb;
  let b_base = p.b_off + bat * p.b_sb;
  let a_kfast = (p.flags & 4u) != 0u;
  let b_nfast = (p.flags & 8u) != 0u;
  let a_scaled = (p.flags & 16u) != 0u;
  let b_scaled = (p.flags & 32u) != 0u;

  var k_begin = 0u;
  var k_end = p.k;
  if (p.k_chunk != 0u) {
    k_begin = wid.z * p.k_chunk;
    k_end = min(p.k, k_begin + p.k_chunk);
  }

  // Thread li stages elements li + 256 t of each tile, t < 16, in an order that makes neighbouring threads read
  // neighbouring addresses (along k where A's k stride is 1, else along m; along n where B's n stride is 1); with
  // vec4 loads, vec4s li + 256 t, t < 4, of rows of BK / 4 (A) or BN / 4 (B) vec4s. Those positions are the same in
  // every k-tile, so the reciprocal scales of their rows and columns are read once. (A vec4 of B spans 4 columns,
  // the same 4 for every t: binv[0..3]; so does a vec4 of A with A_T: ainv[0..3]. With A_VEC a thread's 4 vec4s
  // lie in row li / 2, vec4s (li % 2) 4 + t of its k-tile: ainv[0]. A vec4 of B_T lies in one column: binv[t].
  // (B_T taken as A_VEC is, a column a thread, ran 20% slower on the H200: 16-byte pieces 2 threads apart.)
  // Only as many as the variant uses (4 for vec4 loads), since they stay live in registers through the k-loop.
  var ainv: array<f32, NA>;
  var binv: array<f32, NB>;
  for (var t = 0u; t < NA; t = t + 1u) {
    let e = li + t * 256u;
    var gm = m0 + select(e % BM, e / BK, a_kfast);
    if (A_VEC) { gm = m0 + li / A_TPR; }
    if (A_T) { gm = m0 + (li % (BM / 4u)) * 4u + t; }
    ainv[t] = 1.0;
    if (a_scaled && gm < p.m) { ainv[t] = 1.0 / pow2_of(absmax_a[p.sa_off + bat * p.m + gm]); }
  }
  for (var t = 0u; t < NB; t = t + 1u) {
    let e = li + t * 256u;
    var gn = n0 + select(e / BK, e % BN, b_nfast);
    if (B_VEC) { gn = n0 + (li % (BN / 4u)) * 4u + t; }
    if (B_T) { gn = n0 + (li + t * 256u) / (BK / 4u); }
    binv[t] = 1.0;
    if (B_MODE == 0u && b_scaled && gn < p.n) { binv[t] = 1.0 / pow2_of(absmax_b[p.sb_off + bat * p.n + gn]); }
  }

  var c0_0 = subgroup_matrix_result<f32, 16, 16>();
  var c0_1 = subgroup_matrix_result<f32, 16, 16>();
  var c1_0 = subgroup_matrix_result<f32, 16, 16>();
  var c1_1 = subgroup_matrix_result<f32, 16, 16>();
  var c2_0 = subgroup_matrix_result<f32, 16, 16>();
  var c2_1 = subgroup_matrix_result<f32, 16, 16>();
  var c3_0 = subgroup_matrix_result<f32, 16, 16>();
  var c3_1 = subgroup_matrix_result<f32, 16, 16>();

  for (var k0 = k_begin; k0 < k_end; k0 = k0 + BK) {
    // 1. The k-tile's global loads, into registers: all issued before anything waits on them, and before the barrier,
    //    so that they overlap the other subgroups' products on the previous tile. No branches: an element outside M,
    //    N or K loads element 0 instead and takes zero (a branch per load kept each load's latency apart).
    var ra4: array<vec4<f32>, LOADS4_A>;
    var ra1: array<f32, LOADS_A>;
    var rb4: array<vec4<f32>, LOADS4>;
    var rb1: array<f32, LOADS>;
    var rw: array<u32, Q_LOADS>;
    var rq: array<f32, Q_LOADS>;
    // Tiles wholly inside (uniform over the workgroup) skip the bounds selects: the loop is bound by issue slots as
    // much as by the matrix units, and the probe's kernel spends none on them.
    let a_full = m0 + BM <= p.m && k0 + BK <= k_end;
    let b_full = n0 + BN <= p.n && k0 + BK <= k_end;
    if (A_T && a_full) {
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        let e = li + t * 256u;
        ra4[t] = load_a4((a_base + (k0 + e / (BM / 4u)) * p.a_sk + m0 + (e % (BM / 4u)) * 4u) / 4u);
      }
    } else if (A_T) {
      // vec4s along m (coalesced: A's m stride is 1), each a row piece of the [k][m] tile.
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        let e = li + t * 256u;
        let gm = m0 + (e % (BM / 4u)) * 4u;
        let gk = k0 + e / (BM / 4u);
        let ok = gm < p.m && gk < k_end;
        ra4[t] = select(vec4<f32>(), load_a4(select(0u, (a_base + gk * p.a_sk + gm) / 4u, ok)), ok);
      }
    } else if (A_VEC && a_full) {
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        ra4[t] = load_a4((a_base + (m0 + li / A_TPR) * p.a_sm + k0 + ((li % A_TPR) * LOADS4_A + t) * 4u) / 4u);
      }
    } else if (A_VEC) {
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        let gm = m0 + li / A_TPR;
        let gk = k0 + ((li % A_TPR) * LOADS4_A + t) * 4u;
        let ok = gm < p.m && gk < k_end;
        ra4[t] = select(vec4<f32>(), load_a4(select(0u, (a_base + gm * p.a_sm + gk) / 4u, ok)), ok);
      }
    } else {
      for (var t = 0u; t < LOADS_A; t = t + 1u) {
        let e = li + t * 256u;
        let gm = m0 + select(e % BM, e / BK, a_kfast);
        let gk = k0 + select(e / BM, e % BK, a_kfast);
        let ok = gm < p.m && gk < k_end;
        ra1[t] = select(0.0, load_a1(select(0u, a_base + gm * p.a_sm + gk * p.a_sk, ok)), ok);
      }
    }
    if (B_MODE == 0u && B_T && b_full) {
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        rb4[t] = load_b4((b_base + (n0 + e / (BK / 4u)) * p.b_sn + k0 + (e % (BK / 4u)) * 4u) / 4u);
      }
    } else if (B_MODE == 0u && B_T) {
      // vec4s along k (B's k stride is 1), each a row piece of the [n][k] tile.
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        let gn = n0 + e / (BK / 4u);
        let gk = k0 + (e % (BK / 4u)) * 4u;
        let ok = gn < p.n && gk < k_end;
        rb4[t] = select(vec4<f32>(), load_b4(select(0u, (b_base + gn * p.b_sn + gk) / 4u, ok)), ok);
      }
    } else if (B_MODE == 0u && B_VEC && b_full) {
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        rb4[t] = load_b4((b_base + (k0 + e / (BN / 4u)) * p.b_sk + n0 + (e % (BN / 4u)) * 4u) / 4u);
      }
    } else if (B_MODE == 0u && B_VEC) {
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        let gn = n0 + (e % (BN / 4u)) * 4u;
        let gk = k0 + e / (BN / 4u);
        let ok = gn < p.n && gk < k_end;
        rb4[t] = select(vec4<f32>(), load_b4(select(0u, (b_base + gk * p.b_sk + gn) / 4u, ok)), ok);
      }
    } else if (B_MODE == 0u) {
      for (var t = 0u; t < LOADS; t = t + 1u) {
        let e = li + t * 256u;
        let gn = n0 + select(e / BK, e % BN, b_nfast);
        let gk = k0 + select(e % BK, e / BN, b_nfast);
        let ok = gn < p.n && gk < k_end;
        rb1[t] = select(0.0, load_b1(select(0u, b_base + gk * p.b_sk + gn * p.b_sn, ok)), ok);
      }
    } else if (B_MODE == 1u) {
      // B[k][n] = W[n][k]: BN weight rows, BK / 8 words of each.
      for (var t = 0u; t < Q_LOADS; t = t + 1u) {
        let i = li + t * 256u;
        let gn = n0 + i / (BK / 8u);
        let gk = k0 + (i % (BK / 8u)) * 8u;
        let ok = gn < p.n && gk < k_end;
        rw[t] = select(0x88888888u, load_bw(select(0u, gn * p.q_words + gk / 8u, ok)), ok);
        rq[t] = select(0.0, scales[select(0u, (gk / p.group_size) * p.q_rows + gn, ok)], ok);
      }
    } else {
      // B[r][j] = W[r][j]: BK weight rows, BN / 8 words of each.
      for (var t = 0u; t < Q_LOADS; t = t + 1u) {
        let i = li + t * 256u;
        let gr = k0 + i / (BN / 8u);
        let gj = n0 + (i % (BN / 8u)) * 8u;
        let ok = gr < k_end && gj < p.n;
        rw[t] = select(0x88888888u, load_bw(select(0u, gr * p.q_words + gj / 8u, ok)), ok);
        rq[t] = select(0.0, scales[select(0u, (gj / p.group_size) * p.q_rows + gr, ok)], ok);
      }
    }
    workgroupBarrier();
    // 2. Scaled, converted to f16 and stored into the tiles.
    if (A_T) {
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        let e = li + t * 256u;
        let h = vec4<f16>(ra4[t] * vec4<f32>(ainv[0], ainv[1], ainv[2], ainv[3]));
        let s = (e / (BM / 4u)) * SAT + (e % (BM / 4u)) * 4u;
        sa[s] = h.x;
        sa[s + 1u] = h.y;
        sa[s + 2u] = h.z;
        sa[s + 3u] = h.w;
      }
    } else if (A_VEC) {
      for (var t = 0u; t < LOADS4_A; t = t + 1u) {
        // Into the [k][m] tile: the vec4's 4 k a row apart.
        let h = vec4<f16>(ra4[t] * ainv[0]);
        let s = ((li % A_TPR) * LOADS4_A + t) * 4u * SAT + li / A_TPR;
        sa[s] = h.x;
        sa[s + SAT] = h.y;
        sa[s + 2u * SAT] = h.z;
        sa[s + 3u * SAT] = h.w;
      }
    } else {
      for (var t = 0u; t < LOADS_A; t = t + 1u) {
        let e = li + t * 256u;
        let am = select(e % BM, e / BK, a_kfast);
        let ak = select(e / BM, e % BK, a_kfast);
        sa[am * SA + ak] = f16(ra1[t] * ainv[t]);
      }
    }
    if (B_MODE == 0u && B_T) {
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        let h = vec4<f16>(rb4[t] * binv[t]);
        let s = (e / (BK / 4u)) * SBT + (e % (BK / 4u)) * 4u;
        sb[s] = h.x;
        sb[s + 1u] = h.y;
        sb[s + 2u] = h.z;
        sb[s + 3u] = h.w;
      }
    } else if (B_MODE == 0u && B_VEC) {
      for (var t = 0u; t < LOADS4; t = t + 1u) {
        let e = li + t * 256u;
        let h = vec4<f16>(rb4[t] * vec4<f32>(binv[0], binv[1], binv[2], binv[3]));
        let s = (e / (BN / 4u)) * SB + (e % (BN / 4u)) * 4u;
        sb[s] = h.x;
        sb[s + 1u] = h.y;
        sb[s + 2u] = h.z;
        sb[s + 3u] = h.w;
      }
    } else if (B_MODE == 0u) {
      for (var t = 0u; t < LOADS; t = t + 1u) {
        let e = li + t * 256u;
        let bn = select(e / BK, e % BN, b_nfast);
        let bk = select(e % BK, e / BN, b_nfast);
        sb[bk * SB + bn] = f16(rb1[t] * binv[t]);
      }
    } else if (B_MODE == 1u) {
      for (var t = 0u; t < Q_LOADS; t = t + 1u) {
        let i = li + t * 256u;
        let bn = i / (BK / 8u);
        let wq = i % (BK / 8u);
        // A word's 8 codes run along k: 8 neighbouring halves of the [n][k] tile (a column of a [k][n] one took 8
        // stores a row apart, 4-way bank conflicts).
        for (var j = 0u; j < 8u; j = j + 1u) { sb[bn * SBT + wq * 8u + j] = f16(dequant(rw[t], j, rq[t])); }
      }
    } else {
      for (var t = 0u; t < Q_LOADS; t = t + 1u) {
        let i = li + t * 256u;
        let bk = i / (BN / 8u);
        let wq = i % (BN / 8u);
        for (var j = 0u; j < 8u; j = j + 1u) { sb[bk * SB + wq * 8u + j] = f16(dequant(rw[t], j, rq[t])); }
      }
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k = k + 16u) {
      // With A_T (B_NK) the tile is [k][m] ([n][k]): element (row r, column q) of a column-major fragment is at
      // offset + q stride + r.
      let l0 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, a_frag(wr + 0u, k), A_KM, A_STRIDE);
      let l1 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, a_frag(wr + 16u, k), A_KM, A_STRIDE);
      let r0 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, b_frag(k, wc + 0u), B_NK, B_STRIDE);
      let r1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, b_frag(k, wc + 16u), B_NK, B_STRIDE);
      c0_0 = subgroupMatrixMultiplyAccumulate(l0, r0, c0_0);
      c0_1 = subgroupMatrixMultiplyAccumulate(l0, r1, c0_1);
      c1_0 = subgroupMatrixMultiplyAccumulate(l1, r0, c1_0);
      c1_1 = subgroupMatrixMultiplyAccumulate(l1, r1, c1_1);
      if (FM) {
        let l2 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, a_frag(wr + 32u, k), A_KM, A_STRIDE);
        let l3 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, a_frag(wr + 48u, k), A_KM, A_STRIDE);
        c2_0 = subgroupMatrixMultiplyAccumulate(l2, r0, c2_0);
        c2_1 = subgroupMatrixMultiplyAccumulate(l2, r1, c2_1);
        c3_0 = subgroupMatrixMultiplyAccumulate(l3, r0, c3_0);
        c3_1 = subgroupMatrixMultiplyAccumulate(l3, r1, c3_1);
      }
    }
  }

  // Each subgroup stores its 4 x 2 fragments (still scaled) at their places: in c, fragments wholly outside M or N
  // are left out (no fragment straddles an edge there: M and N are multiples of 16); the padded buffer holds whole
  // blocks.
  let rb = p.c_off + out_bat * p.r_sb + m0 * p.r_sn + n0;  // the block's first result
  let pad = p.padded != 0u;
  let fr = rb + wr * p.r_sn + wc;
  let in0 = pad || n0 + wc < p.n;
  let in1 = pad || n0 + wc + 16u < p.n;
  if (pad || m0 + wr < p.m) {
    if (in0) { subgroupMatrixStore(&c, fr, c0_0, false, p.r_sn); }
    if (in1) { subgroupMatrixStore(&c, fr + 16u, c0_1, false, p.r_sn); }
  }
  if (pad || m0 + wr + 16u < p.m) {
    if (in0) { subgroupMatrixStore(&c, fr + 16u * p.r_sn, c1_0, false, p.r_sn); }
    if (in1) { subgroupMatrixStore(&c, fr + 16u * p.r_sn + 16u, c1_1, false, p.r_sn); }
  }
  if (FM && (pad || m0 + wr + 32u < p.m)) {
    if (in0) { subgroupMatrixStore(&c, fr + 32u * p.r_sn, c2_0, false, p.r_sn); }
    if (in1) { subgroupMatrixStore(&c, fr + 32u * p.r_sn + 16u, c2_1, false, p.r_sn); }
  }
  if (FM && (pad || m0 + wr + 48u < p.m)) {
    if (in0) { subgroupMatrixStore(&c, fr + 48u * p.r_sn, c3_0, false, p.r_sn); }
    if (in1) { subgroupMatrixStore(&c, fr + 48u * p.r_sn + 16u, c3_1, false, p.r_sn); }
  }
}
