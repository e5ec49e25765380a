// The GEMMs of gemm.comp through cooperative matrices (VK_NV_cooperative_matrix; Debian 12's glslc has no
// GL_KHR_cooperative_matrix): fp16 operands, fp32 products. The native-only kernel "matmul/gemm_coopmat" (defs
// {B_MODE}, gemm_coopmat.variants), with the interface of gemm.wgsl / gemm.comp: the same 80-byte parameter block
// (bias, accumulation and split-K included; the layout hints of flags 4 and 8 are read from the strides) and the
// same five bindings (a, b, scales, bias, c). A workgroup of 4 subgroups of 32 computes a 64 x 64 tile of C (grid:
// x the N tiles, y the M tiles, z the batch from p.batch0 or the split-K chunk), each subgroup a 32 x 32 quarter as
// 2 x 2 16x16 fp32 accumulators; A and B are staged in shared memory 32 deep in k, converted to fp16 on the way in
// (q4 weights dequantised, then rounded to fp16), and the accumulators go out through shared memory with the
// bounds checks, bias and accumulation of gemm.comp. Split-K chunks need only be multiples of 16 (the k loop is
// bounded by the chunk's end).
// Numbers: every operand is rounded to fp16 (11 significant bits, magnitudes 6e-5 to 65504), so a dot product is
// good to about 2^-10 of sum |a_k b_k|, and values far below 6e-5 (small gradients) lose precision: an opt-in path.
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#ifndef B_MODE
#define B_MODE 0
#endif
#define BM 64
#define BN 64
#define BKC 32

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

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
layout(std430, binding = 1) readonly buffer BBuf { uint b[]; };
layout(std430, binding = 2) readonly buffer SBuf { float scales[]; };  // q4 only (any buffer otherwise)
layout(std430, binding = 3) readonly buffer BiasBuf { float bias[]; };  // flags & 1 only (any buffer otherwise)
layout(std430, binding = 4) buffer CBuf { float c[]; };

shared float16_t As[BM * BKC];  // [m][k]
shared float16_t Bs[BKC * BN];  // [k][n]
shared float Cs[BM * BN];       // [m][n]

float dequant(uint word, uint j, float scale) { return (float((word >> (4u * j)) & 15u) - 8.0) * scale; }

void main() {
#if B_MODE == 0
  // The f32 variants read no scales, but keep the binding in the module's interface (one binding list for every
  // variant, as gemm.wgsl's `_ = &scales`; glslc -O drops unused ones): a length query that cannot match (a binding
  // holds at most 2^30 floats) keeps it without touching memory.
  if (scales.length() == 0xFFFFFFFFu) return;
#endif
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = tid / 32u;
  const uint wm = (warp / 2u) * 32u, wn = (warp % 2u) * 32u;
  const uint out_bat = gl_WorkGroupID.z + p.batch0;
  const uint bat = p.k_chunk != 0u ? 0u : out_bat;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint a_base = p.a_off + bat * p.a_sb, b_base = p.b_off + bat * p.b_sb;
  const uint k_begin = p.k_chunk != 0u ? gl_WorkGroupID.z * p.k_chunk : 0u;
  const uint k_end = p.k_chunk != 0u ? min(p.k, k_begin + p.k_chunk) : p.k;
  const bool a_kfast = p.a_sk == 1u, b_nfast = p.b_sn == 1u;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
  [[unroll]] for (int i = 0; i < 2; ++i)
    [[unroll]] for (int j = 0; j < 2; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  for (uint k0 = k_begin; k0 < k_end; k0 += BKC) {
    // A: 64 x 32, consecutive threads along whichever of m and k is contiguous in memory.
    [[unroll]] for (uint l = 0; l < BM * BKC / 128u; ++l) {
      const uint e = tid + l * 128u;
      const uint am = a_kfast ? e / BKC : e % BM, ak = a_kfast ? e % BKC : e / BM;
      const uint gm = m0 + am, gk = k0 + ak;
      As[am * BKC + ak] = float16_t((gm < p.m && gk < k_end) ? a[a_base + gm * p.a_sm + gk * p.a_sk] : 0.0);
    }
#if B_MODE == 0
    [[unroll]] for (uint l = 0; l < BKC * BN / 128u; ++l) {
      const uint e = tid + l * 128u;
      const uint bn = b_nfast ? e % BN : e / BKC, bk = b_nfast ? e / BN : e % BKC;
      const uint gn = n0 + bn, gk = k0 + bk;
      Bs[bk * BN + bn] =
          float16_t((gn < p.n && gk < k_end) ? uintBitsToFloat(b[b_base + gk * p.b_sk + gn * p.b_sn]) : 0.0);
    }
#elif B_MODE == 1
    // B[k][n] = W[n][k]: 64 weight rows, 4 words (32 k) each.
    [[unroll]] for (uint l = 0; l < 2u; ++l) {
      const uint e = tid + l * 128u;
      const uint bn = e / 4u, wq = e % 4u;
      const uint gn = n0 + bn, gk = k0 + wq * 8u;
      uint word = 0x88888888u;
      float scale = 0.0;
      if (gn < p.n && gk < k_end) {
        word = b[gn * p.q_words + gk / 8u];
        scale = scales[(gk / p.group_size) * p.q_rows + gn];
      }
      [[unroll]] for (uint j = 0; j < 8u; ++j) Bs[(wq * 8u + j) * BN + bn] = float16_t(dequant(word, j, scale));
    }
#else
    // B[r][j] = W[r][j]: 32 weight rows, 8 words (64 j) each.
    [[unroll]] for (uint l = 0; l < 2u; ++l) {
      const uint e = tid + l * 128u;
      const uint bk = e / 8u, wq = e % 8u;
      const uint gr = k0 + bk, gj = n0 + wq * 8u;
      uint word = 0x88888888u;
      float scale = 0.0;
      if (gr < k_end && gj < p.n) {
        word = b[gr * p.q_words + gj / 8u];
        scale = scales[(gj / p.group_size) * p.q_rows + gr];
      }
      [[unroll]] for (uint j = 0; j < 8u; ++j) Bs[bk * BN + wq * 8u + j] = float16_t(dequant(word, j, scale));
    }
#endif
    barrier();
    [[unroll]] for (uint kk = 0; kk < BKC; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[2], fb[2];
      [[unroll]] for (int i = 0; i < 2; ++i) coopMatLoadNV(fa[i], As, (wm + 16u * i) * BKC + kk, BKC, false);
      [[unroll]] for (int j = 0; j < 2; ++j) coopMatLoadNV(fb[j], Bs, kk * BN + wn + 16u * j, BN, false);
      [[unroll]] for (int i = 0; i < 2; ++i)
        [[unroll]] for (int j = 0; j < 2; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    barrier();
  }

  [[unroll]] for (int i = 0; i < 2; ++i)
    [[unroll]] for (int j = 0; j < 2; ++j) coopMatStoreNV(acc[i][j], Cs, (wm + 16u * i) * BN + wn + 16u * j, BN, false);
  barrier();
  for (uint e = tid; e < BM * BN; e += 128u) {
    const uint gm = m0 + e / BN, gn = n0 + e % BN;
    if (gm >= p.m || gn >= p.n) continue;
    float v = Cs[e];
    if ((p.flags & 1u) != 0u) v += bias[p.bias_off + gn];
    const uint at = p.c_off + (out_bat * p.m + gm) * p.n + gn;
    if ((p.flags & 2u) != 0u) v += c[at];
    c[at] = v;
  }
}
