// gemm.wgsl's contract (see its header: C[b] (+)= A[b] B[b] (+ bias), A and an f32 B strided, B_MODE 1 and 2 the
// q4gsw weight read as W^T or W, split-K into c[z] when k_chunk > 0) with the tiling as variant fields, so that the
// fp32 GEMM's tilings can be timed side by side (matmul.cpp's gemm_tilings: a table entry forced, or the choice).
// Tiling: a workgroup of 16 x 16 threads computes a (16 TM) x (16 TN) tile of C; each thread owns TM x TN outputs
// in blocks of 4 x 4 spaced 64 apart (rows (i / 4) 64 + 4 lid.y + i % 4, columns q 64 + 4 lid.x + 0..3), so that it
// reads its A and B values from workgroup memory as vec4s. A and B tiles are staged in workgroup memory BK deep in
// k; each iteration issues the global loads of the next k-tile into registers before the products of the current
// one. STAGES 2: two workgroup buffers, the next tile stored into the one not being read, one barrier a k-tile;
// STAGES 1: one buffer, two barriers (products, then stores).
// Registers: as in gemm.wgsl, every loop that indexes a private array has a trip count fixed by the variant, and the
// output stores are written out (a rolled 64-store loop sent gemm.wgsl's accumulators to memory on the H200).
//
// @variant TM {4|8|16} output rows per thread: tiles 64, 128 or 256 rows high
// @variant TN {4|8|16} output columns per thread: tiles 64, 128 or 256 columns wide
// @variant BK {8|16|32} the k depth of a staged tile
// @variant STAGES {1|2} workgroup buffers per operand: 2 overlaps storing tile k+1 with reading tile k
// @variant TSTORE {true|false} neighbouring threads load neighbouring m of A and n of B whatever the memory order
// @variant B_MODE {0|1|2} the form of B: f32, q4gsw read as W^T, q4gsw read as W
// @variant A_VEC {true|false} A row-major with rows and offset multiples of 4 floats: bound and loaded as vec4s
// @variant B_VEC {true|false} the same for B (B_MODE 0 only)
// @variant B_T {true|false} B (f32) with k stride 1 and K, n stride and offset multiples of 4: vec4s along k
// @variant B_V4 {true|false} B bound as vec4s: B_VEC or B_T
// @variant A_T {true|false} A column-major (m stride 1) with M, k stride and offset multiples of 4: vec4s along m
// @variant A_V4 {true|false} A bound as vec4s: A_VEC or A_T
// @variant A_TYPE {vec4<f32>|f32} the element type A is bound as: vec4<f32> exactly when A_V4
// @variant B_TYPE {vec4<f32>|f32|u32} the element type B is bound as: vec4<f32> when B_V4, u32 in the q4 modes

const TM: u32 = {{TM}}u;
const TN: u32 = {{TN}}u;
const BK: u32 = {{BK}}u;
const STAGES: u32 = {{STAGES}}u;
// Workgroup tiles are [k][m] and [k][n]. A load ordered along memory where that is k (A as vec4s along k, A with k
// stride 1, B = W^T in either form) stores a warp's values into a few banks, 4 to 16 ways in conflict; with TSTORE
// the threads of a warp take 32 neighbouring m (n) instead: conflict-free stores, but strided global loads, each
// using part of a sector whose rest another load of the same tile takes (from cache, if it is still there). Which
// costs less is for the H200 to say (scripts/h200/gemm_fp32.sh).
const TSTORE: bool = {{TSTORE}};
const B_MODE: u32 = {{B_MODE}}u;
const A_VEC: bool = {{A_VEC}};
const A_T: bool = {{A_T}};
const B_VEC: bool = {{B_VEC}};
const B_T: bool = {{B_T}};
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
const TM4: u32 = TM / 4u;  // row blocks of 4 per thread
const TN4: u32 = TN / 4u;  // column blocks of 4 per thread

// Each thread's loads of a k-tile (256 threads share it): A as vec4s or floats, B as vec4s or floats, or (q4)
// Q_LOADS u32 words of 8 codes (threads past the tile's Q_ITEMS words idle).
const A_LOADS4: u32 = BM * BK / 1024u;
const A_LOADS1: u32 = BM * BK / 256u;
const B_LOADS4: u32 = BN * BK / 1024u;
const B_LOADS1: u32 = BN * BK / 256u;
const Q_ITEMS: u32 = BN * BK / 8u;
const Q_LOADS: u32 = (Q_ITEMS + 255u) / 256u;
const_assert A_LOADS4 >= 1u && B_LOADS4 >= 1u;
const A_STAGE: u32 = BK * BM / 4u;  // vec4s of one buffer
const B_STAGE: u32 = BK * BN / 4u;

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch0: u32,      // first batch index of this dispatch (batches beyond the grid limit take several)
  a_off: u32,
  a_sb: u32,
  a_sm: u32,
  a_sk: u32,
  b_off: u32,
  b_sb: u32,
  b_sk: u32,
  b_sn: u32,
  bias_off: u32,
  flags: u32,       // 1: add bias[n]; 2: accumulate into C; 4: A's k stride is 1; 8: B's n stride is 1
  q_words: u32,     // q4: u32 words per weight row
  q_rows: u32,      // q4: N_w, the row count of the weight (the scales' row stride)
  group_size: u32,  // q4: consecutive k sharing a scale (a multiple of 8)
  c_off: u32,
  k_chunk: u32,     // split-K: k per grid z, a multiple of BK (0: no split; then z is the batch)
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<{{A_TYPE}}>;
@group(0) @binding(2) var<storage, read> b: array<{{B_TYPE}}>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> c: array<f32>;

// Element accessors for the bound types (as gemm.wgsl: every variant defines all of them).
{{#A_V4}}
fn load_a1(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn load_a4(i: u32) -> vec4<f32> { return a[i]; }
{{/A_V4}}
{{^A_V4}}
fn load_a1(i: u32) -> f32 { return a[i]; }
fn load_a4(i: u32) -> vec4<f32> {
  return vec4<f32>(a[4u * i], a[4u * i + 1u], a[4u * i + 2u], a[4u * i + 3u]);
}
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

// The buffer is the outer index, so that the index within one (in the products, a constant plus lid once the loops
// are unrolled) is one the GPU compiler could prove in bounds, folding away the clamp that the robustness pass puts
// on every workgroup access (whether NVIDIA's does is not measured).
var<workgroup> As: array<array<vec4<f32>, A_STAGE>, STAGES>;  // [STAGES][BK][BM]
var<workgroup> Bs: array<array<vec4<f32>, B_STAGE>, STAGES>;  // [STAGES][BK][BN]

fn store_a(s: u32, k: u32, m: u32, v: f32) {
  As[s][k * (BM / 4u) + m / 4u][m % 4u] = v;
}

fn store_b(s: u32, k: u32, n: u32, v: f32) {
  Bs[s][k * (BN / 4u) + n / 4u][n % 4u] = v;
}

fn dequant(word: u32, j: u32, scale: f32) -> f32 {
  return (f32((word >> (4u * j)) & 15u) - 8.0) * scale;
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  // The output layer: the batch, or in split-K the chunk (whose operands are batch 0's).
  let out_bat = wid.z + p.batch0;
  let bat = select(out_bat, 0u, p.k_chunk != 0u);
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let tid = lid.y * 16u + lid.x;
  _ = &scales;  // one bind group layout for every variant: the f32 ones read no scales
  let a_base = p.a_off + bat * p.a_sb;
  let b_base = p.b_off + bat * p.b_sb;
  let a_kfast = (p.flags & 4u) != 0u;  // A's k stride is 1: neighbouring threads take neighbouring k
  let b_nfast = (p.flags & 8u) != 0u;  // B's n stride is 1: neighbouring threads take neighbouring n

  // The k range: the whole of k, or this layer's chunk. Loads check against k_end, so a chunk never reads its
  // neighbour's k.
  var k_begin = 0u;
  var k_end = p.k;
  if (p.k_chunk != 0u) {
    k_begin = wid.z * p.k_chunk;
    k_end = min(p.k, k_begin + p.k_chunk);
  }

  // acc[i][q]: row i, column block q of the thread's outputs (sized for TM = 16, TN = 16; a variant uses
  // acc[0..TM)[0..TN4), the rest is never touched and compiles away).
  var acc: array<array<vec4<f32>, 4>, 16>;
  // This thread's share of the next k-tile, between its global loads and its stores to workgroup memory.
  var ra4: array<vec4<f32>, A_LOADS4>;
  var ra1: array<f32, A_LOADS1>;
  var rb4: array<vec4<f32>, B_LOADS4>;
  var rb1: array<f32, B_LOADS1>;
  var rw: array<u32, Q_LOADS>;
  var rs: array<f32, Q_LOADS>;

  var k0n = k_begin;  // the k-tile being loaded
  var stage = 0u;     // the buffer it goes to (STAGES 2); the products read the other one
  loop {
    // 1. Global loads of tile k0n. Thread tid takes elements tid, tid + 256, ... of each tile, in an order that
    // makes neighbouring threads read neighbouring addresses; outside M, N or the k range it takes zeros.
    if (k0n < k_end) {
      if (A_VEC) {
        for (var l = 0u; l < A_LOADS4; l = l + 1u) {
          let e = tid + l * 256u;
          let gm = m0 + select(e / (BK / 4u), e % BM, TSTORE);
          let gk = k0n + select(e % (BK / 4u), e / BM, TSTORE) * 4u;
          ra4[l] = vec4<f32>();
          if (gm < p.m && gk < k_end) { ra4[l] = load_a4((a_base + gm * p.a_sm + gk) / 4u); }
        }
      } else if (A_T) {
        // 4 neighbouring m of one k: one vec4 of the tile's row k.
        for (var l = 0u; l < A_LOADS4; l = l + 1u) {
          let e = tid + l * 256u;
          let gm = m0 + (e % (BM / 4u)) * 4u;
          let gk = k0n + e / (BM / 4u);
          ra4[l] = vec4<f32>();
          if (gm < p.m && gk < k_end) { ra4[l] = load_a4((a_base + gk * p.a_sk + gm) / 4u); }
        }
      } else {
        for (var l = 0u; l < A_LOADS1; l = l + 1u) {
          let e = tid + l * 256u;
          let am = select(e % BM, e / BK, a_kfast && !TSTORE);
          let ak = select(e / BM, e % BK, a_kfast && !TSTORE);
          let gm = m0 + am;
          let gk = k0n + ak;
          ra1[l] = 0.0;
          if (gm < p.m && gk < k_end) { ra1[l] = load_a1(a_base + gm * p.a_sm + gk * p.a_sk); }
        }
      }
      if (B_MODE == 0u && B_VEC) {
        for (var l = 0u; l < B_LOADS4; l = l + 1u) {
          let e = tid + l * 256u;
          let bk = e / (BN / 4u);
          let bn = (e % (BN / 4u)) * 4u;
          let gn = n0 + bn;
          let gk = k0n + bk;
          rb4[l] = vec4<f32>();
          if (gn < p.n && gk < k_end) { rb4[l] = load_b4((b_base + gk * p.b_sk + gn) / 4u); }
        }
      } else if (B_MODE == 0u && B_T) {
        // 4 neighbouring k of one column n (W^T of a row-major weight W).
        for (var l = 0u; l < B_LOADS4; l = l + 1u) {
          let e = tid + l * 256u;
          let gn = n0 + select(e / (BK / 4u), e % BN, TSTORE);
          let gk = k0n + select(e % (BK / 4u), e / BN, TSTORE) * 4u;
          rb4[l] = vec4<f32>();
          if (gn < p.n && gk < k_end) { rb4[l] = load_b4((b_base + gn * p.b_sn + gk) / 4u); }
        }
      } else if (B_MODE == 0u) {
        for (var l = 0u; l < B_LOADS1; l = l + 1u) {
          let e = tid + l * 256u;
          let bn = select(e / BK, e % BN, b_nfast || TSTORE);
          let bk = select(e % BK, e / BN, b_nfast || TSTORE);
          let gn = n0 + bn;
          let gk = k0n + bk;
          rb1[l] = 0.0;
          if (gn < p.n && gk < k_end) { rb1[l] = load_b1(b_base + gk * p.b_sk + gn * p.b_sn); }
        }
      } else if (B_MODE == 1u) {
        // B[k][n] = W[n][k]: BN weight rows, BK / 8 words of each.
        for (var l = 0u; l < Q_LOADS; l = l + 1u) {
          let e = tid + l * 256u;
          let gn = n0 + select(e / (BK / 8u), e % BN, TSTORE);
          let gk = k0n + select(e % (BK / 8u), e / BN, TSTORE) * 8u;
          rw[l] = 0x88888888u;
          rs[l] = 0.0;
          if (e < Q_ITEMS && gn < p.n && gk < k_end) {
            rw[l] = load_bw(gn * p.q_words + gk / 8u);
            rs[l] = scales[(gk / p.group_size) * p.q_rows + gn];
          }
        }
      } else {
        // B[r][j] = W[r][j]: BK weight rows, BN / 8 words of each.
        for (var l = 0u; l < Q_LOADS; l = l + 1u) {
          let e = tid + l * 256u;
          let gr = k0n + e / (BN / 8u);
          let gj = n0 + (e % (BN / 8u)) * 8u;
          rw[l] = 0x88888888u;
          rs[l] = 0.0;
          if (e < Q_ITEMS && gr < k_end && gj < p.n) {
            rw[l] = load_bw(gr * p.q_words + gj / 8u);
            rs[l] = scales[(gj / p.group_size) * p.q_rows + gr];
          }
        }
      }
    }

    // 2. The products of the previous tile, in workgroup memory since the last iteration.
    if (k0n != k_begin) {
      let cs = select(0u, stage ^ 1u, STAGES == 2u);
      for (var kk = 0u; kk < BK; kk = kk + 1u) {
        var av: array<vec4<f32>, TM4>;
        var bv: array<vec4<f32>, TN4>;
        for (var g = 0u; g < TM4; g = g + 1u) { av[g] = As[cs][kk * (BM / 4u) + g * 16u + lid.y]; }
        for (var q = 0u; q < TN4; q = q + 1u) { bv[q] = Bs[cs][kk * (BN / 4u) + q * 16u + lid.x]; }
        for (var i = 0u; i < TM; i = i + 1u) {
          for (var q = 0u; q < TN4; q = q + 1u) {
            acc[i][q] = fma(vec4<f32>(av[i / 4u][i % 4u]), bv[q], acc[i][q]);
          }
        }
      }
    }
    // One buffer: every thread must be done reading it before any stores the next tile.
    if (STAGES == 1u) {
      workgroupBarrier();
    }
    if (k0n >= k_end) {
      break;
    }

    // 3. Tile k0n to workgroup memory, each element where its load took it from; q4 words dequantised. With two
    // buffers this one was last read by the previous iteration's products, which the barrier below it closed.
    let s = select(0u, stage, STAGES == 2u);
    if (A_VEC) {
      for (var l = 0u; l < A_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        let am = select(e / (BK / 4u), e % BM, TSTORE);
        let ak = select(e % (BK / 4u), e / BM, TSTORE) * 4u;
        store_a(s, ak, am, ra4[l].x);
        store_a(s, ak + 1u, am, ra4[l].y);
        store_a(s, ak + 2u, am, ra4[l].z);
        store_a(s, ak + 3u, am, ra4[l].w);
      }
    } else if (A_T) {
      for (var l = 0u; l < A_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        As[s][e] = ra4[l];  // k = e / (BM / 4), m = 4 (e % (BM / 4)): the tile's own order
      }
    } else {
      for (var l = 0u; l < A_LOADS1; l = l + 1u) {
        let e = tid + l * 256u;
        let am = select(e % BM, e / BK, a_kfast && !TSTORE);
        let ak = select(e / BM, e % BK, a_kfast && !TSTORE);
        store_a(s, ak, am, ra1[l]);
      }
    }
    if (B_MODE == 0u && B_VEC) {
      for (var l = 0u; l < B_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        let bk = e / (BN / 4u);
        let bn = (e % (BN / 4u)) * 4u;
        Bs[s][bk * (BN / 4u) + bn / 4u] = rb4[l];
      }
    } else if (B_MODE == 0u && B_T) {
      for (var l = 0u; l < B_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        let bn = select(e / (BK / 4u), e % BN, TSTORE);
        let bk = select(e % (BK / 4u), e / BN, TSTORE) * 4u;
        store_b(s, bk, bn, rb4[l].x);
        store_b(s, bk + 1u, bn, rb4[l].y);
        store_b(s, bk + 2u, bn, rb4[l].z);
        store_b(s, bk + 3u, bn, rb4[l].w);
      }
    } else if (B_MODE == 0u) {
      for (var l = 0u; l < B_LOADS1; l = l + 1u) {
        let e = tid + l * 256u;
        let bn = select(e / BK, e % BN, b_nfast || TSTORE);
        let bk = select(e % BK, e / BN, b_nfast || TSTORE);
        store_b(s, bk, bn, rb1[l]);
      }
    } else if (B_MODE == 1u) {
      for (var l = 0u; l < Q_LOADS; l = l + 1u) {
        let e = tid + l * 256u;
        if (e < Q_ITEMS) {
          let bn = select(e / (BK / 8u), e % BN, TSTORE);
          let wq = select(e % (BK / 8u), e / BN, TSTORE);
          for (var j = 0u; j < 8u; j = j + 1u) { store_b(s, wq * 8u + j, bn, dequant(rw[l], j, rs[l])); }
        }
      }
    } else {
      // A word's 8 weights are 8 neighbouring columns of one row: two vec4 stores.
      for (var l = 0u; l < Q_LOADS; l = l + 1u) {
        let e = tid + l * 256u;
        if (e < Q_ITEMS) {
          let at = (e / (BN / 8u)) * (BN / 4u) + (e % (BN / 8u)) * 2u;
          let w = rw[l];
          let sc = rs[l];
          Bs[s][at] = vec4<f32>(dequant(w, 0u, sc), dequant(w, 1u, sc), dequant(w, 2u, sc), dequant(w, 3u, sc));
          Bs[s][at + 1u] = vec4<f32>(dequant(w, 4u, sc), dequant(w, 5u, sc), dequant(w, 6u, sc), dequant(w, 7u, sc));
        }
      }
    }
    workgroupBarrier();
    stage = stage ^ 1u;
    k0n = k0n + BK;
  }

  // 4. The outputs, row by row (written out: see the top).
  let gm = m0 + 4u * lid.y;
  let gn = n0 + 4u * lid.x;
  store_row(out_bat, gm + 0u, gn, acc[0]);
  store_row(out_bat, gm + 1u, gn, acc[1]);
  store_row(out_bat, gm + 2u, gn, acc[2]);
  store_row(out_bat, gm + 3u, gn, acc[3]);
  if (TM >= 8u) {
    store_row(out_bat, gm + 64u, gn, acc[4]);
    store_row(out_bat, gm + 65u, gn, acc[5]);
    store_row(out_bat, gm + 66u, gn, acc[6]);
    store_row(out_bat, gm + 67u, gn, acc[7]);
  }
  if (TM >= 16u) {
    store_row(out_bat, gm + 128u, gn, acc[8]);
    store_row(out_bat, gm + 129u, gn, acc[9]);
    store_row(out_bat, gm + 130u, gn, acc[10]);
    store_row(out_bat, gm + 131u, gn, acc[11]);
    store_row(out_bat, gm + 192u, gn, acc[12]);
    store_row(out_bat, gm + 193u, gn, acc[13]);
    store_row(out_bat, gm + 194u, gn, acc[14]);
    store_row(out_bat, gm + 195u, gn, acc[15]);
  }
}

// One row of the thread's outputs: TN4 blocks of 4 columns, 64 apart.
fn store_row(bat: u32, gm: u32, gn: u32, r: array<vec4<f32>, 4>) {
  if (gm >= p.m) {
    return;
  }
  store_c4(bat, gm, gn, r[0]);
  if (TN >= 8u) { store_c4(bat, gm, gn + 64u, r[1]); }
  if (TN >= 16u) {
    store_c4(bat, gm, gn + 128u, r[2]);
    store_c4(bat, gm, gn + 192u, r[3]);
  }
}

// Four outputs of a row, from columns gn.. gn + 3.
fn store_c4(bat: u32, gm: u32, gn: u32, v: vec4<f32>) {
  store_c(bat, gm, gn, v.x);
  store_c(bat, gm, gn + 1u, v.y);
  store_c(bat, gm, gn + 2u, v.z);
  store_c(bat, gm, gn + 3u, v.w);
}

// One output: bias, accumulation, and the bounds check for tiles that overhang M or N.
fn store_c(bat: u32, gm: u32, gn: u32, acc: f32) {
  if (gm >= p.m || gn >= p.n) {
    return;
  }
  var v = acc;
  if ((p.flags & 1u) != 0u) {
    v = v + bias[p.bias_off + gn];
  }
  let at = p.c_off + (bat * p.m + gm) * p.n + gn;
  if ((p.flags & 2u) != 0u) {
    v = v + c[at];
  }
  c[at] = v;
}
