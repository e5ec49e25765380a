// The GEMM of the native Vulkan backend (the GLSL twin of gemm.wgsl): C[b] (+)= A[b] B[b], C contiguous
// [batch, M, N], A and B strided. B comes in one of three forms (B_MODE): 0 f32, strided; 1 a q4gsw weight W[N, K]
// read as B[k][n] = W[n][k] (the forward x W^T); 2 a q4gsw weight read as B[r][j] = W[r][j] (the input gradient
// dy W). q4gsw codes are u32 words of 8 nibbles [N_w, ceil(K_w / 8)], code + 8 each; scales [ceil(K_w/g), N_w].
// A 16 x 16 workgroup computes a (16 TM)^2 tile, each thread TM x TM outputs strided 16 apart (conflict-free reads
// of the tiles, coalesced writes of C); tiles are staged in shared memory BK = 16 deep in k, the q4 ones
// dequantised on the way in. Split-K (k_chunk > 0): grid layer z sums k in [z k_chunk, (z + 1) k_chunk) into
// C[z], and split_sum.comp adds the layers.
#version 450

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
layout(constant_id = 0) const uint TM = 8;
layout(constant_id = 1) const uint B_MODE = 0;
const uint BM = 16 * TM;
const uint BN = 16 * TM;
const uint BK = 16;

layout(push_constant) uniform Params {
  uint m, n, k, batch0;
  uint a_off, a_sb, a_sm, a_sk;
  uint b_off, b_sb, b_sk, b_sn;
  uint flags;  // 2: accumulate into C
  uint q_words, q_rows, group_size;
  uint c_off, k_chunk;
} p;

layout(std430, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, binding = 1) readonly buffer BBuf { uint b[]; };  // floats as bits (B_MODE 0), or q4 words
layout(std430, binding = 2) readonly buffer SBuf { float scales[]; };
layout(std430, binding = 3) buffer CBuf { float c[]; };

shared float As[BK * BM];  // [k][m]
shared float Bs[BK * BN];  // [k][n]

float dequant(uint word, uint j, float scale) { return (float((word >> (4u * j)) & 15u) - 8.0) * scale; }

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint out_bat = gl_WorkGroupID.z + p.batch0;
  const uint bat = p.k_chunk != 0u ? 0u : out_bat;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint a_base = p.a_off + bat * p.a_sb, b_base = p.b_off + bat * p.b_sb;
  const uint k_begin = p.k_chunk != 0u ? gl_WorkGroupID.z * p.k_chunk : 0u;
  const uint k_end = p.k_chunk != 0u ? min(p.k, k_begin + p.k_chunk) : p.k;

  float acc[TM][TM];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TM; ++j) acc[i][j] = 0.0;

  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    // A tile: consecutive threads along whichever of m and k is contiguous in memory.
    const bool a_kfast = p.a_sk == 1u;
    for (uint e = tid; e < BM * BK; e += 256u) {
      const uint am = a_kfast ? e / BK : e % BM;
      const uint ak = a_kfast ? e % BK : e / BM;
      const uint gm = m0 + am, gk = k0 + ak;
      As[ak * BM + am] = (gm < p.m && gk < p.k) ? a[a_base + gm * p.a_sm + gk * p.a_sk] : 0.0;
    }
    if (B_MODE == 0u) {
      const bool b_nfast = p.b_sn == 1u;
      for (uint e = tid; e < BN * BK; e += 256u) {
        const uint bn = b_nfast ? e % BN : e / BK;
        const uint bk = b_nfast ? e / BN : e % BK;
        const uint gn = n0 + bn, gk = k0 + bk;
        Bs[bk * BN + bn] = (gn < p.n && gk < p.k) ? uintBitsToFloat(b[b_base + gk * p.b_sk + gn * p.b_sn]) : 0.0;
      }
    } else if (B_MODE == 1u) {
      for (uint e = tid; e < BN * (BK / 8u); e += 256u) {
        const uint bn = e / (BK / 8u), wq = e % (BK / 8u);
        const uint gn = n0 + bn, gk = k0 + wq * 8u;
        uint word = 0x88888888u;
        float scale = 0.0;
        if (gn < p.n && gk < p.k) {
          word = b[gn * p.q_words + gk / 8u];
          scale = scales[(gk / p.group_size) * p.q_rows + gn];
        }
        for (uint j = 0; j < 8u; ++j) Bs[(wq * 8u + j) * BN + bn] = dequant(word, j, scale);
      }
    } else {
      for (uint e = tid; e < BK * (BN / 8u); e += 256u) {
        const uint bk = e / (BN / 8u), wq = e % (BN / 8u);
        const uint gr = k0 + bk, gj = n0 + wq * 8u;
        uint word = 0x88888888u;
        float scale = 0.0;
        if (gr < p.k && gj < p.n) {
          word = b[gr * p.q_words + gj / 8u];
          scale = scales[(gj / p.group_size) * p.q_rows + gr];
        }
        for (uint j = 0; j < 8u; ++j) Bs[bk * BN + wq * 8u + j] = dequant(word, j, scale);
      }
    }
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TM];
      for (uint i = 0; i < TM; ++i) av[i] = As[kk * BM + ty + 16u * i];
      for (uint j = 0; j < TM; ++j) bv[j] = Bs[kk * BN + tx + 16u * j];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TM; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    const uint gm = m0 + ty + 16u * i;
    if (gm >= p.m) continue;
    for (uint j = 0; j < TM; ++j) {
      const uint gn = n0 + tx + 16u * j;
      if (gn >= p.n) continue;
      const uint at = p.c_off + (out_bat * p.m + gm) * p.n + gn;
      c[at] = (p.flags & 2u) != 0u ? c[at] + acc[i][j] : acc[i][j];
    }
  }
}
