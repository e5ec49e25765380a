// The GEMM of the native Vulkan backend (the GLSL twin of gemm.wgsl: the same parameters, bindings, grid and
// tiling, so that matmul.cpp drives both): C[b] (+)= A[b] B[b] (+ bias), C contiguous [batch, M, N], A and B
// strided. B comes in one of three forms (B_MODE): 0 f32, strided; 1 a q4gsw weight W[N, K] read as B[k][n] =
// W[n][k] (the forward x W^T); 2 a q4gsw weight read as B[r][j] = W[r][j] (the input gradient dy W). q4gsw codes
// are u32 words of 8 nibbles [N_w, ceil(K_w / 8)], code + 8 each; scales [ceil(K_w / g), N_w].
// A 16 x 16 workgroup computes a (16 TM)^2 tile. Each thread owns TM x TM outputs in blocks of 4 x 4 spaced 64
// apart: rows (i / 4) 64 + 4 ty + i % 4, columns g 64 + 4 tx + 0..3, so that it reads A and B from shared memory as
// vec4s and neighbouring threads write neighbouring 16-byte runs of C. Tiles are staged BK = 16 deep in k, the
// next one loaded into registers while the current one is multiplied; q4 tiles are dequantised into shared
// memory. TM and B_MODE are compile-time (one SPIR-V module per variant, see gemm.variants), so that every loop
// unrolls and the accumulators stay in registers. Grid: x the N tiles, y the M tiles, z the batch (from
// p.batch0) or, in split-K (k_chunk > 0), the chunk: layer z sums k in [z k_chunk, (z + 1) k_chunk) of batch 0
// into C[z], and split_sum.comp adds the layers. Flags: 1 add bias[bias_off + n], 2 accumulate into C (bias
// first, then C); 4 and 8 (A's k, B's n stride is 1) are layout hints this kernel reads from the strides instead.
// A and B are bound as f32 / u32 arrays whatever the WGSL variant binds (vec4s have the same bytes; offsets and
// strides count floats either way).
#version 450
#extension GL_EXT_control_flow_attributes : require

#ifndef TM
#define TM 8
#endif
#ifndef B_MODE
#define B_MODE 0
#endif
#define BM (16 * TM)
#define BN (16 * TM)
#define BK 16
#define G (TM / 4)
#define A_LOADS (BM * BK / 256)
#define B_LOADS (BN * BK / 256)
#define Q_ITEMS (B_MODE == 1 ? BN * (BK / 8) : BK * (BN / 8))
#define Q_LOADS ((Q_ITEMS + 255) / 256)

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(push_constant) uniform Params {
  uint m, n, k, batch0;
  uint a_off, a_sb, a_sm, a_sk;
  uint b_off, b_sb, b_sk, b_sn;
  uint bias_off;
  uint flags;       // 1: add bias[n]; 2: accumulate into C; 4, 8: layout hints (unused here)
  uint q_words;     // q4: u32 words per weight row
  uint q_rows;      // q4: N_w, the row count of the weight (the scales' row stride)
  uint group_size;  // q4: consecutive k sharing a scale (a multiple of 8)
  uint c_off;
  uint k_chunk;     // split-K: k per grid z (0: no split; then z is the batch)
  uint _pad1;
} p;  // 80 bytes: GemmParams in matmul.cpp, Params in gemm.wgsl

layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, binding = 1) readonly buffer BBuf { uint b[]; };  // floats as bits (B_MODE 0), or q4 words
layout(std430, binding = 2) readonly buffer SBuf { float scales[]; };  // q4 only (any buffer otherwise)
layout(std430, binding = 3) readonly buffer BiasBuf { float bias[]; };  // flags & 1 only (any buffer otherwise)
layout(std430, binding = 4) buffer CBuf { float c[]; };

shared vec4 As[BK * BM / 4];  // [k][m / 4]
shared vec4 Bs[BK * BN / 4];  // [k][n / 4]

float dequant(uint word, uint j, float scale) { return (float((word >> (4u * j)) & 15u) - 8.0) * scale; }

// One output: bias, accumulation, and the bounds check for tiles that overhang M or N.
void store_c(uint bat, uint gm, uint gn, float acc) {
  if (gm >= p.m || gn >= p.n) return;
  float v = acc;
  if ((p.flags & 1u) != 0u) v += bias[p.bias_off + gn];
  const uint at = p.c_off + (bat * p.m + gm) * p.n + gn;
  if ((p.flags & 2u) != 0u) v += c[at];
  c[at] = v;
}

void main() {
#if B_MODE == 0
  // The f32 variants read no scales, but keep the binding in the module's interface (one binding list for every
  // variant, as gemm.wgsl's `_ = &scales`; glslc -O drops unused ones): a length query that cannot match (a binding
  // holds at most 2^30 floats) keeps it without touching memory.
  if (scales.length() == 0xFFFFFFFFu) return;
#endif
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint out_bat = gl_WorkGroupID.z + p.batch0;
  const uint bat = p.k_chunk != 0u ? 0u : out_bat;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint a_base = p.a_off + bat * p.a_sb, b_base = p.b_off + bat * p.b_sb;
  const uint k_begin = p.k_chunk != 0u ? gl_WorkGroupID.z * p.k_chunk : 0u;
  const uint k_end = p.k_chunk != 0u ? min(p.k, k_begin + p.k_chunk) : p.k;
  const bool a_kfast = p.a_sk == 1u, b_nfast = p.b_sn == 1u;

  vec4 acc[TM][G];
  [[unroll]] for (int i = 0; i < TM; ++i)
    [[unroll]] for (int q = 0; q < G; ++q) acc[i][q] = vec4(0.0);

  // This thread's share of the next tile, in registers.
  float ra[A_LOADS];
#if B_MODE == 0
  float rb[B_LOADS];
#else
  uint rw[Q_LOADS];
  float rs[Q_LOADS];
#endif

  uint k0n = k_begin;
  for (;;) {
    // ---- load tile k0n into registers
    [[unroll]] for (int l = 0; l < A_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      const uint am = a_kfast ? e / BK : e % BM, ak = a_kfast ? e % BK : e / BM;
      const uint gm = m0 + am, gk = k0n + ak;
      ra[l] = (gm < p.m && gk < p.k) ? a[a_base + gm * p.a_sm + gk * p.a_sk] : 0.0;
    }
#if B_MODE == 0
    [[unroll]] for (int l = 0; l < B_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      const uint bn = b_nfast ? e % BN : e / BK, bk = b_nfast ? e / BN : e % BK;
      const uint gn = n0 + bn, gk = k0n + bk;
      rb[l] = (gn < p.n && gk < p.k) ? uintBitsToFloat(b[b_base + gk * p.b_sk + gn * p.b_sn]) : 0.0;
    }
#else
    [[unroll]] for (int l = 0; l < Q_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      rw[l] = 0x88888888u;
      rs[l] = 0.0;
#if B_MODE == 1
      const uint gn = n0 + e / (BK / 8u), gk = k0n + (e % (BK / 8u)) * 8u;
      if (e < Q_ITEMS && gn < p.n && gk < p.k) {
        rw[l] = b[gn * p.q_words + gk / 8u];
        rs[l] = scales[(gk / p.group_size) * p.q_rows + gn];
      }
#else
      const uint gr = k0n + e / (BN / 8u), gj = n0 + (e % (BN / 8u)) * 8u;
      if (e < Q_ITEMS && gr < p.k && gj < p.n) {
        rw[l] = b[gr * p.q_words + gj / 8u];
        rs[l] = scales[(gj / p.group_size) * p.q_rows + gr];
      }
#endif
    }
#endif
    if (k0n != k_begin) {
      // ---- multiply the tile in shared memory (loaded one iteration ago) while the loads above are in flight
      [[unroll]] for (int kk = 0; kk < BK; ++kk) {
        vec4 av[G], bv[G];
        [[unroll]] for (int q = 0; q < G; ++q) {
          av[q] = As[kk * (BM / 4) + q * 16 + int(ty)];
          bv[q] = Bs[kk * (BN / 4) + q * 16 + int(tx)];
        }
        [[unroll]] for (int i = 0; i < TM; ++i)
          [[unroll]] for (int q = 0; q < G; ++q) acc[i][q] = fma(vec4(av[i / 4][i % 4]), bv[q], acc[i][q]);
      }
      barrier();
    }
    if (k0n >= k_end) break;
    // ---- registers to shared memory
    [[unroll]] for (int l = 0; l < A_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      const uint am = a_kfast ? e / BK : e % BM, ak = a_kfast ? e % BK : e / BM;
      As[ak * (BM / 4) + am / 4][am % 4] = ra[l];
    }
#if B_MODE == 0
    [[unroll]] for (int l = 0; l < B_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      const uint bn = b_nfast ? e % BN : e / BK, bk = b_nfast ? e / BN : e % BK;
      Bs[bk * (BN / 4) + bn / 4][bn % 4] = rb[l];
    }
#else
    [[unroll]] for (int l = 0; l < Q_LOADS; ++l) {
      const uint e = tid + uint(l) * 256u;
      if (e < Q_ITEMS) {
#if B_MODE == 1
        const uint bn = e / (BK / 8u), wq = e % (BK / 8u);
        [[unroll]] for (uint j = 0; j < 8u; ++j) Bs[(wq * 8u + j) * (BN / 4) + bn / 4][bn % 4] = dequant(rw[l], j, rs[l]);
#else
        const uint bk = e / (BN / 8u), wq = e % (BN / 8u);
        [[unroll]] for (uint j = 0; j < 8u; ++j) {
          const uint col = wq * 8u + j;
          Bs[bk * (BN / 4) + col / 4][col % 4] = dequant(rw[l], j, rs[l]);
        }
#endif
      }
    }
#endif
    barrier();
    k0n += BK;
  }

  [[unroll]] for (int i = 0; i < TM; ++i)
    [[unroll]] for (int q = 0; q < G; ++q)
      [[unroll]] for (int j = 0; j < 4; ++j)
        store_c(out_bat, m0 + uint((i / 4) * 64 + i % 4) + 4u * ty, n0 + uint(q * 64 + j) + 4u * tx, acc[i][q][j]);
}
