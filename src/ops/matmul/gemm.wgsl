// Batched, tiled f32 GEMM: C[b] (+)= A[b] B[b] (+ bias), C contiguous [batch, M, N], A and B strided.
// B comes in one of three forms (B_MODE), so that one kernel serves mm/bmm/linear and the q4gsw linears:
//   0: f32, strided (linear's W^T is B with (sk, sn) = (1, K): transposed views cost nothing);
//   1: q4gsw weight W[N_w, K_w] read as B[k][n] = W[n][k] (the forward y = x W^T);
//   2: q4gsw weight W[N_w, K_w] read as B[r][j] = W[r][j] (the input gradient dx = dy W).
// q4gsw codes are u32 words of 8 nibbles, row-major [N_w, ceil(K_w / 8)], nibble j of word w holding k = 8w + j as
// code + 8; scales are f32 [ceil(K_w / group_size), N_w]; w = (code - 8) * scale. Padding nibbles hold 8 (zero).
// Tiling: a workgroup of 16x16 threads computes a (16 TM) x (16 TM) tile of C; each thread owns TM x TM outputs,
// in blocks of 4 x 4 spaced 64 apart, so that it reads its A and B values from workgroup memory as vec4s and
// neighbouring threads write neighbouring 16-byte runs of C. A and B tiles are staged in workgroup memory BK = 16
// deep in k, loaded a tile ahead into registers; q4 tiles are dequantised on the way into workgroup memory, one u32
// word (8 weights) per load.
// Registers: the accumulators and the staged tile are small private arrays, and every loop that indexes one has a
// trip count fixed by the variant and small enough for the GPU compilers to unroll it, so that the arrays stay in
// registers. The loops that would be long (the TM x TM stores) are written out instead: NVIDIA's Vulkan compiler
// left a 64-store loop rolled, the accumulators went to memory, and the product ran 15 times slower. Everything
// stays in main: with a function returning the staged tile, the H200 ran it 30% slower.
// Split-K (k_chunk > 0): a product with few output tiles and a long k (a weight gradient, summed over every token)
// is cut along k into chunks of k_chunk (a multiple of BK), chunk z of the grid writing its partial product to
// c[z]; split_sum.wgsl then adds the chunks up.
//
// Variants (matmul.cpp fills them in; `wgtrain kernels` lists them, `wgtrain kernels --dump` writes the results):
// @variant TM {4|8} outputs per thread per side: 64 x 64 tiles (small outputs) or 128 x 128
// @variant B_MODE {0|1|2} the form of B: f32, q4gsw read as W^T, q4gsw read as W
// @variant A_VEC {true|false} A row-major with rows and offset multiples of 4 floats: bound and loaded as vec4s
// @variant B_VEC {true|false} the same for B (B_MODE 0 only)
// @variant A_TYPE {vec4<f32>|f32} the element type A is bound as: vec4<f32> exactly when A_VEC
// @variant B_TYPE {vec4<f32>|f32|u32} the element type B is bound as: vec4<f32> when B_VEC, u32 in the q4 modes

const TM: u32 = {{TM}}u;
const B_MODE: u32 = {{B_MODE}}u;
const A_VEC: bool = {{A_VEC}};
const B_VEC: bool = {{B_VEC}};
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TM;
const BK: u32 = 16u;
const G: u32 = TM / 4u;  // vec4 groups per thread and side

// How many loads each thread makes of the next tile (256 threads share it): A as vec4s or single floats, B as
// vec4s or floats, or (q4) one u32 word of 8 codes, the Q_ITEMS words of a tile (BN * BK / 8) being at most one per
// thread (threads past them idle).
const A_LOADS4: u32 = BM * BK / 256u / 4u;
const A_LOADS1: u32 = BM * BK / 256u;
const B_LOADS4: u32 = BN * BK / 256u / 4u;
const B_LOADS1: u32 = BN * BK / 256u;
const Q_ITEMS: u32 = BN * BK / 8u;
const_assert Q_ITEMS <= 256u;

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
  k_chunk: u32,     // split-K: k per grid z (0: no split; then z is the batch)
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<{{A_TYPE}}>;
@group(0) @binding(2) var<storage, read> b: array<{{B_TYPE}}>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> c: array<f32>;

// Element accessors for the bound types, by f32 index (load_a1, load_b1), vec4 index (load_a4, load_b4) or u32
// word (load_bw). Every variant defines all of them, so that the code below type-checks in every variant; each
// uses the ones its form of A and B calls for.
{{#A_VEC}}
fn load_a1(i: u32) -> f32 { return a[i / 4u][i % 4u]; }
fn load_a4(i: u32) -> vec4<f32> { return a[i]; }
{{/A_VEC}}
{{^A_VEC}}
fn load_a1(i: u32) -> f32 { return a[i]; }
fn load_a4(i: u32) -> vec4<f32> {
  return vec4<f32>(a[4u * i], a[4u * i + 1u], a[4u * i + 2u], a[4u * i + 3u]);
}
{{/A_VEC}}
{{#B_VEC}}
fn load_b1(i: u32) -> f32 { return b[i / 4u][i % 4u]; }
fn load_b4(i: u32) -> vec4<f32> { return b[i]; }
fn load_bw(i: u32) -> u32 { return 0u; }
{{/B_VEC}}
{{^B_VEC}}
fn load_b1(i: u32) -> f32 { return f32(b[i]); }
fn load_b4(i: u32) -> vec4<f32> {
  return vec4<f32>(f32(b[4u * i]), f32(b[4u * i + 1u]), f32(b[4u * i + 2u]), f32(b[4u * i + 3u]));
}
fn load_bw(i: u32) -> u32 { return u32(b[i]); }
{{/B_VEC}}

var<workgroup> As: array<vec4<f32>, BK * BM / 4u>;  // [BK][BM]
var<workgroup> Bs: array<vec4<f32>, BK * BN / 4u>;  // [BK][BN]

fn store_a(k: u32, m: u32, v: f32) {
  As[k * (BM / 4u) + m / 4u][m % 4u] = v;
}

fn store_b(k: u32, n: u32, v: f32) {
  Bs[k * (BN / 4u) + n / 4u][n % 4u] = v;
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

  var k_begin = 0u;
  var k_end = p.k;
  if (p.k_chunk != 0u) {
    k_begin = wid.z * p.k_chunk;
    k_end = min(p.k, k_begin + p.k_chunk);
  }

  // The thread's outputs: acc[i][q] holds row (i / 4) * 64 + 4 lid.y + i % 4 of the tile, columns
  // q * 64 + 4 lid.x + 0..3, for i < TM and q < G (sized for TM = 8; a TM = 4 variant uses acc[0..3][0]).
  var acc: array<array<vec4<f32>, 2>, 8>;
  // This thread's share of the next k-tile, between its global loads and its stores to workgroup memory: A as
  // vec4s or floats, B as vec4s or floats, or (q4) a code word and its scale. A variant uses one form of each.
  var ra4: array<vec4<f32>, A_LOADS4>;
  var ra1: array<f32, A_LOADS1>;
  var rb4: array<vec4<f32>, B_LOADS4>;
  var rb1: array<f32, B_LOADS1>;
  var rw = 0x88888888u;
  var rs = 0.0;

  // Software pipelining: each iteration sends the global loads of tile k0n (into registers) before the products of
  // the tile already in workgroup memory, so that their latency hides behind the arithmetic, then stores them to
  // workgroup memory for the next iteration (on the H200: 3-9% on 4096^3 products).
  var k0n = k_begin;
  loop {
    // 1. Global loads of tile k0n. Thread tid takes elements tid, tid + 256, ... of each tile, in an order that
    // makes neighbouring threads read neighbouring addresses; outside M, N or K it takes zeros.
    if (k0n < k_end) {
      if (A_VEC) {
        for (var l = 0u; l < A_LOADS4; l = l + 1u) {
          let e = tid + l * 256u;
          let gm = m0 + e / (BK / 4u);
          let gk = k0n + (e % (BK / 4u)) * 4u;
          ra4[l] = vec4<f32>();
          if (gm < p.m && gk < p.k) { ra4[l] = load_a4((a_base + gm * p.a_sm + gk) / 4u); }
        }
      } else {
        for (var l = 0u; l < A_LOADS1; l = l + 1u) {
          let e = tid + l * 256u;
          let am = select(e % BM, e / BK, a_kfast);
          let ak = select(e / BM, e % BK, a_kfast);
          let gm = m0 + am;
          let gk = k0n + ak;
          ra1[l] = 0.0;
          if (gm < p.m && gk < p.k) { ra1[l] = load_a1(a_base + gm * p.a_sm + gk * p.a_sk); }
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
          if (gn < p.n && gk < p.k) { rb4[l] = load_b4((b_base + gk * p.b_sk + gn) / 4u); }
        }
      } else if (B_MODE == 0u) {
        for (var l = 0u; l < B_LOADS1; l = l + 1u) {
          let e = tid + l * 256u;
          let bn = select(e / BK, e % BN, b_nfast);
          let bk = select(e % BK, e / BN, b_nfast);
          let gn = n0 + bn;
          let gk = k0n + bk;
          rb1[l] = 0.0;
          if (gn < p.n && gk < p.k) { rb1[l] = load_b1(b_base + gk * p.b_sk + gn * p.b_sn); }
        }
      } else if (B_MODE == 1u && tid < Q_ITEMS) {
        // B[k][n] = W[n][k]: BN weight rows, BK / 8 words of each.
        let bn = tid / (BK / 8u);
        let wq = tid % (BK / 8u);
        let gn = n0 + bn;
        let gk = k0n + wq * 8u;
        rw = 0x88888888u;
        rs = 0.0;
        if (gn < p.n && gk < p.k) {
          rw = load_bw(gn * p.q_words + gk / 8u);
          rs = scales[(gk / p.group_size) * p.q_rows + gn];
        }
      } else if (B_MODE == 2u && tid < Q_ITEMS) {
        // B[r][j] = W[r][j]: BK weight rows, BN / 8 words of each.
        let bk = tid / (BN / 8u);
        let wq = tid % (BN / 8u);
        let gr = k0n + bk;
        let gj = n0 + wq * 8u;
        rw = 0x88888888u;
        rs = 0.0;
        if (gr < p.k && gj < p.n) {
          rw = load_bw(gr * p.q_words + gj / 8u);
          rs = scales[(gj / p.group_size) * p.q_rows + gr];
        }
      }
    }

    // 2. The products of the previous tile, in workgroup memory since the last iteration.
    if (k0n != k_begin) {
      for (var kk = 0u; kk < BK; kk = kk + 1u) {
        var av: array<vec4<f32>, G>;
        var bv: array<vec4<f32>, G>;
        for (var q = 0u; q < G; q = q + 1u) {
          av[q] = As[kk * (BM / 4u) + q * 16u + lid.y];
          bv[q] = Bs[kk * (BN / 4u) + q * 16u + lid.x];
        }
        for (var i = 0u; i < TM; i = i + 1u) {
          for (var q = 0u; q < G; q = q + 1u) {
            acc[i][q] = fma(vec4<f32>(av[i / 4u][i % 4u]), bv[q], acc[i][q]);
          }
        }
      }
      workgroupBarrier();
    }
    if (k0n >= k_end) {
      break;
    }

    // 3. Tile k0n to workgroup memory, each element where its load took it from; q4 words dequantised.
    if (A_VEC) {
      for (var l = 0u; l < A_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        let am = e / (BK / 4u);
        let ak = (e % (BK / 4u)) * 4u;
        store_a(ak, am, ra4[l].x);
        store_a(ak + 1u, am, ra4[l].y);
        store_a(ak + 2u, am, ra4[l].z);
        store_a(ak + 3u, am, ra4[l].w);
      }
    } else {
      for (var l = 0u; l < A_LOADS1; l = l + 1u) {
        let e = tid + l * 256u;
        let am = select(e % BM, e / BK, a_kfast);
        let ak = select(e / BM, e % BK, a_kfast);
        store_a(ak, am, ra1[l]);
      }
    }
    if (B_MODE == 0u && B_VEC) {
      for (var l = 0u; l < B_LOADS4; l = l + 1u) {
        let e = tid + l * 256u;
        let bk = e / (BN / 4u);
        let bn = (e % (BN / 4u)) * 4u;
        Bs[bk * (BN / 4u) + bn / 4u] = rb4[l];
      }
    } else if (B_MODE == 0u) {
      for (var l = 0u; l < B_LOADS1; l = l + 1u) {
        let e = tid + l * 256u;
        let bn = select(e / BK, e % BN, b_nfast);
        let bk = select(e % BK, e / BN, b_nfast);
        store_b(bk, bn, rb1[l]);
      }
    } else if (B_MODE == 1u && tid < Q_ITEMS) {
      let bn = tid / (BK / 8u);
      let wq = tid % (BK / 8u);
      for (var j = 0u; j < 8u; j = j + 1u) { store_b(wq * 8u + j, bn, dequant(rw, j, rs)); }
    } else if (B_MODE == 2u && tid < Q_ITEMS) {
      let bk = tid / (BN / 8u);
      let wq = tid % (BN / 8u);
      for (var j = 0u; j < 8u; j = j + 1u) { store_b(bk, wq * 8u + j, dequant(rw, j, rs)); }
    }
    workgroupBarrier();
    k0n = k0n + BK;
  }

  // 4. The outputs, row by row, in vec4s (written out: see the top; TM = 8 has rows 4-7 and a second column
  // group, 64 further on).
  let gm = m0 + 4u * lid.y;
  let gn = n0 + 4u * lid.x;
  store_c4(out_bat, gm + 0u, gn, acc[0][0]);
  if (TM == 8u) { store_c4(out_bat, gm + 0u, gn + 64u, acc[0][1]); }
  store_c4(out_bat, gm + 1u, gn, acc[1][0]);
  if (TM == 8u) { store_c4(out_bat, gm + 1u, gn + 64u, acc[1][1]); }
  store_c4(out_bat, gm + 2u, gn, acc[2][0]);
  if (TM == 8u) { store_c4(out_bat, gm + 2u, gn + 64u, acc[2][1]); }
  store_c4(out_bat, gm + 3u, gn, acc[3][0]);
  if (TM == 8u) { store_c4(out_bat, gm + 3u, gn + 64u, acc[3][1]); }
  if (TM == 8u) {
    store_c4(out_bat, gm + 64u, gn, acc[4][0]);
    store_c4(out_bat, gm + 64u, gn + 64u, acc[4][1]);
    store_c4(out_bat, gm + 65u, gn, acc[5][0]);
    store_c4(out_bat, gm + 65u, gn + 64u, acc[5][1]);
    store_c4(out_bat, gm + 66u, gn, acc[6][0]);
    store_c4(out_bat, gm + 66u, gn + 64u, acc[6][1]);
    store_c4(out_bat, gm + 67u, gn, acc[7][0]);
    store_c4(out_bat, gm + 67u, gn + 64u, acc[7][1]);
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
