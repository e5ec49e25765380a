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
// word (8 weights) per load. Every per-thread loop below has a trip count fixed by the variant (TM, BK and the
// load counts are constants), and each small private array (the accumulators, the staged tile) is indexed by the
// counter of a loop that runs over exactly its length: the GPU compiler unrolls those loops, and the arrays stay in
// registers.
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
// vec4s or floats, or (q4) as u32 words of 8 codes, the BN * BK / 8 (or BK * BN / 8) words of a tile spread over
// Q_LOADS rounds of which the last may leave threads idle.
const A_LOADS4: u32 = BM * BK / 256u / 4u;
const A_LOADS1: u32 = BM * BK / 256u;
const B_LOADS4: u32 = BN * BK / 256u / 4u;
const B_LOADS1: u32 = BN * BK / 256u;
const Q_ITEMS: u32 = select(BK * (BN / 8u), BN * (BK / 8u), B_MODE == 1u);
const Q_LOADS: u32 = (Q_ITEMS + 255u) / 256u;

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

// Where this thread's workgroup sits, and what its loads need to know.
struct Tile {
  m0: u32,
  n0: u32,
  tid: u32,
  a_base: u32,
  b_base: u32,
  a_kfast: bool,  // A's k stride is 1: neighbouring threads take neighbouring k
  b_nfast: bool,  // B's n stride is 1: neighbouring threads take neighbouring n
}

// This thread's share of one k-tile of A (BM x BK) and B (BK x BN), held in registers between its global loads and
// its stores to workgroup memory. Each form of A and B has its own arrays; a variant uses one of each.
struct Staged {
  a4: array<vec4<f32>, A_LOADS4>,
  a1: array<f32, A_LOADS1>,
  b4: array<vec4<f32>, B_LOADS4>,
  b1: array<f32, B_LOADS1>,
  w: array<u32, Q_LOADS>,  // q4: code words
  s: array<f32, Q_LOADS>,  // q4: their scales
}

// The global loads of the k-tile starting at k0n. Thread `tid` takes elements tid, tid + 256, ... of each tile, in
// an order that makes neighbouring threads read neighbouring addresses; outside M, N or K it takes zeros.
fn load_tile(t: Tile, k0n: u32) -> Staged {
  var r: Staged;
  if (A_VEC) {
    for (var l = 0u; l < A_LOADS4; l = l + 1u) {
      let e = t.tid + l * 256u;
      let gm = t.m0 + e / (BK / 4u);
      let gk = k0n + (e % (BK / 4u)) * 4u;
      r.a4[l] = vec4<f32>();
      if (gm < p.m && gk < p.k) { r.a4[l] = load_a4((t.a_base + gm * p.a_sm + gk) / 4u); }
    }
  } else {
    for (var l = 0u; l < A_LOADS1; l = l + 1u) {
      let e = t.tid + l * 256u;
      let am = select(e % BM, e / BK, t.a_kfast);
      let ak = select(e / BM, e % BK, t.a_kfast);
      let gm = t.m0 + am;
      let gk = k0n + ak;
      r.a1[l] = 0.0;
      if (gm < p.m && gk < p.k) { r.a1[l] = load_a1(t.a_base + gm * p.a_sm + gk * p.a_sk); }
    }
  }
  if (B_MODE == 0u && B_VEC) {
    for (var l = 0u; l < B_LOADS4; l = l + 1u) {
      let e = t.tid + l * 256u;
      let bk = e / (BN / 4u);
      let bn = (e % (BN / 4u)) * 4u;
      let gn = t.n0 + bn;
      let gk = k0n + bk;
      r.b4[l] = vec4<f32>();
      if (gn < p.n && gk < p.k) { r.b4[l] = load_b4((t.b_base + gk * p.b_sk + gn) / 4u); }
    }
  } else if (B_MODE == 0u) {
    for (var l = 0u; l < B_LOADS1; l = l + 1u) {
      let e = t.tid + l * 256u;
      let bn = select(e / BK, e % BN, t.b_nfast);
      let bk = select(e % BK, e / BN, t.b_nfast);
      let gn = t.n0 + bn;
      let gk = k0n + bk;
      r.b1[l] = 0.0;
      if (gn < p.n && gk < p.k) { r.b1[l] = load_b1(t.b_base + gk * p.b_sk + gn * p.b_sn); }
    }
  } else if (B_MODE == 1u) {
    // B[k][n] = W[n][k]: BN weight rows, BK / 8 words of each.
    for (var l = 0u; l < Q_LOADS; l = l + 1u) {
      let e = t.tid + l * 256u;
      if (e < Q_ITEMS) {
        let bn = e / (BK / 8u);
        let wq = e % (BK / 8u);
        let gn = t.n0 + bn;
        let gk = k0n + wq * 8u;
        r.w[l] = 0x88888888u;
        r.s[l] = 0.0;
        if (gn < p.n && gk < p.k) {
          r.w[l] = load_bw(gn * p.q_words + gk / 8u);
          r.s[l] = scales[(gk / p.group_size) * p.q_rows + gn];
        }
      }
    }
  } else {
    // B[r][j] = W[r][j]: BK weight rows, BN / 8 words of each.
    for (var l = 0u; l < Q_LOADS; l = l + 1u) {
      let e = t.tid + l * 256u;
      if (e < Q_ITEMS) {
        let bk = e / (BN / 8u);
        let wq = e % (BN / 8u);
        let gr = k0n + bk;
        let gj = t.n0 + wq * 8u;
        r.w[l] = 0x88888888u;
        r.s[l] = 0.0;
        if (gr < p.k && gj < p.n) {
          r.w[l] = load_bw(gr * p.q_words + gj / 8u);
          r.s[l] = scales[(gj / p.group_size) * p.q_rows + gr];
        }
      }
    }
  }
  return r;
}

// The staged registers to workgroup memory, each element where load_tile took it from; q4 words dequantised.
fn store_tile(t: Tile, r: Staged) {
  if (A_VEC) {
    for (var l = 0u; l < A_LOADS4; l = l + 1u) {
      let e = t.tid + l * 256u;
      let am = e / (BK / 4u);
      let ak = (e % (BK / 4u)) * 4u;
      store_a(ak, am, r.a4[l].x);
      store_a(ak + 1u, am, r.a4[l].y);
      store_a(ak + 2u, am, r.a4[l].z);
      store_a(ak + 3u, am, r.a4[l].w);
    }
  } else {
    for (var l = 0u; l < A_LOADS1; l = l + 1u) {
      let e = t.tid + l * 256u;
      let am = select(e % BM, e / BK, t.a_kfast);
      let ak = select(e / BM, e % BK, t.a_kfast);
      store_a(ak, am, r.a1[l]);
    }
  }
  if (B_MODE == 0u && B_VEC) {
    for (var l = 0u; l < B_LOADS4; l = l + 1u) {
      let e = t.tid + l * 256u;
      let bk = e / (BN / 4u);
      let bn = (e % (BN / 4u)) * 4u;
      Bs[bk * (BN / 4u) + bn / 4u] = r.b4[l];
    }
  } else if (B_MODE == 0u) {
    for (var l = 0u; l < B_LOADS1; l = l + 1u) {
      let e = t.tid + l * 256u;
      let bn = select(e / BK, e % BN, t.b_nfast);
      let bk = select(e % BK, e / BN, t.b_nfast);
      store_b(bk, bn, r.b1[l]);
    }
  } else if (B_MODE == 1u) {
    for (var l = 0u; l < Q_LOADS; l = l + 1u) {
      let e = t.tid + l * 256u;
      if (e < Q_ITEMS) {
        let bn = e / (BK / 8u);
        let wq = e % (BK / 8u);
        for (var j = 0u; j < 8u; j = j + 1u) { store_b(wq * 8u + j, bn, dequant(r.w[l], j, r.s[l])); }
      }
    }
  } else {
    for (var l = 0u; l < Q_LOADS; l = l + 1u) {
      let e = t.tid + l * 256u;
      if (e < Q_ITEMS) {
        let bk = e / (BN / 8u);
        let wq = e % (BN / 8u);
        for (var j = 0u; j < 8u; j = j + 1u) { store_b(bk, wq * 8u + j, dequant(r.w[l], j, r.s[l])); }
      }
    }
  }
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
  let tile = Tile(m0, n0, tid, p.a_off + bat * p.a_sb, p.b_off + bat * p.b_sb, (p.flags & 4u) != 0u,
                  (p.flags & 8u) != 0u);

  var k_begin = 0u;
  var k_end = p.k;
  if (p.k_chunk != 0u) {
    k_begin = wid.z * p.k_chunk;
    k_end = min(p.k, k_begin + p.k_chunk);
  }

  // The thread's TM x TM outputs, as TM rows of G vec4s: acc[i][q] holds row (i / 4) * 64 + 4 lid.y + i % 4 of the
  // tile, columns q * 64 + 4 lid.x + 0..3. Indexed only by the counters of loops whose trip counts are the array's
  // lengths (i < TM, q < G), the form compilers unroll for certain, so that it stays in registers (indexed as
  // acc[i * G + q], llvmpipe kept it in memory: 40% slower).
  var acc: array<array<vec4<f32>, G>, TM>;
  // Software pipelining: the next k-tile's global loads go out (into registers) before the current tile's
  // products, so their latency hides behind the arithmetic; the registers go to workgroup memory at the top of the
  // next iteration (on the H200: 3-9% on 4096^3 products).
  var k0n = k_begin;
  var staged = load_tile(tile, k0n);
  for (var k0 = k_begin; k0 < k_end; k0 = k0 + BK) {
    store_tile(tile, staged);
    workgroupBarrier();
    k0n = k0 + BK;
    if (k0n < k_end) {
      staged = load_tile(tile, k0n);
    }
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

  for (var i = 0u; i < TM; i = i + 1u) {
    for (var q = 0u; q < G; q = q + 1u) {
      for (var j = 0u; j < 4u; j = j + 1u) {
        store_c(out_bat, m0 + (i / 4u) * 64u + i % 4u + 4u * lid.y, n0 + q * 64u + j + 4u * lid.x, acc[i][q][j]);
      }
    }
  }
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
