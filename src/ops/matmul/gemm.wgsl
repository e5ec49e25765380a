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
// word (8 weights) per load. The per-thread accumulators
// and the inner product are written out in full by the host (ACC_DECL, INNER, STORE: see gemm_code in
// matmul.cpp): WGSL has no unrolling, and indexing a private array with a loop counter can leave it in slow memory.
// Split-K (k_chunk > 0): a product with few output tiles and a long k (a weight gradient, summed over every token)
// is cut along k into chunks of k_chunk (a multiple of BK), chunk z of the grid writing its partial product to
// c[z]; split_sum.wgsl then adds the chunks up.

const TM: u32 = {{TM}}u;
const B_MODE: u32 = {{B_MODE}}u;
// Row-major operands whose rows and offsets are multiples of 4 are bound as vec4s and loaded 16 bytes at a time.
const A_VEC: bool = {{A_VEC}};
const B_VEC: bool = {{B_VEC}};
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TM;
const BK: u32 = 16u;
const A_PER_THREAD: u32 = BM * BK / 256u;
const B_PER_THREAD: u32 = BN * BK / 256u;

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

// Element accessors for the bound types (load_a1 / load_a4 by f32 / vec4 index, load_b1, load_b4, load_bw).
{{ACCESSORS}}

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
  let a_kfast = (p.flags & 4u) != 0u;
  let b_nfast = (p.flags & 8u) != 0u;

  var k_begin = 0u;
  var k_end = p.k;
  if (p.k_chunk != 0u) {
    k_begin = wid.z * p.k_chunk;
    k_end = min(p.k, k_begin + p.k_chunk);
  }

{{ACC_DECL}}
  // Software pipelining: the next k-tile's global loads go out (into registers) before the current tile's
  // products, so their latency hides behind the arithmetic; the registers go to workgroup memory at the top of the
  // next iteration (on the H200: 3-9% on 4096^3 products). The loads and stores are written out per variant by the host (TILE_DECL, TILE_LOAD,
  // TILE_STORE; see gemm_tile_code in matmul.cpp): BK x BM of A, BK x BN of B (q4 modes: the words and scales).
{{TILE_DECL}}
  var k0n = k_begin;
{{TILE_LOAD}}
  for (var k0 = k_begin; k0 < k_end; k0 = k0 + BK) {
{{TILE_STORE}}
    workgroupBarrier();
    k0n = k0 + BK;
    if (k0n < k_end) {
{{TILE_LOAD}}
    }
    for (var kk = 0u; kk < BK; kk = kk + 1u) {
{{INNER}}
    }
    workgroupBarrier();
  }

{{STORE}}
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
