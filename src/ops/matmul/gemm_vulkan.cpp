// The native Vulkan GEMM launcher (gemm.comp, split_sum.comp).
#include "ops/matmul/gemm_vulkan.h"

#include <algorithm>
#include <string>

#include "ops/common.h"
#include "ops/matmul/split_k.h"
#include "wgtrain/error.h"

namespace wgtrain::vk::detail {

namespace {

using wgtrain::ops::detail::u32;

struct GemmPush {
  uint32_t m, n, k, batch0;
  uint32_t a_off, a_sb, a_sm, a_sk;
  uint32_t b_off, b_sb, b_sk, b_sn;
  uint32_t flags, q_words, q_rows, group_size;
  uint32_t c_off, k_chunk;
};
static_assert(sizeof(GemmPush) == 72);

struct SplitPush {
  uint32_t n, splits, c_off, row;
};

}  // namespace

void gemm(Context& ctx, const GemmOperand& a, const GemmOperand& b, const GemmQ4& q, int64_t M,
          int64_t N, int64_t K, const Buffer& c, int64_t c_offset, bool accumulate) {
  if (M == 0 || N == 0) return;
  u32(M * N, "output elements");
  GemmPush p{};
  p.m = u32(M, "M");
  p.n = u32(N, "N");
  p.k = u32(K, "K");
  p.a_off = u32(a.offset, "offset");
  p.a_sm = u32(a.row_stride, "stride");
  p.a_sk = u32(a.col_stride, "stride");
  p.b_off = u32(b.offset, "offset");
  p.b_sk = u32(b.row_stride, "stride");
  p.b_sn = u32(b.col_stride, "stride");
  p.flags = accumulate ? 2u : 0u;
  p.q_words = u32(q.words, "words per row");
  p.q_rows = u32(q.rows, "weight rows");
  p.group_size = u32(q.group_size, "group size");
  p.c_off = u32(c_offset, "offset");
  const uint32_t tm = (M >= 128 && N >= 128) ? 8 : 4;
  // Cooperative matrices (64 x 64 tiles of fp16 products), or the fp32 kernel: one module per (TM, B_MODE)
  // (gemm.variants), compile-time sizes so that the accumulators stay in registers.
  const int64_t tile = ctx.coopmat ? 64 : 16 * tm;
  const Kernel& k = ctx.coopmat ? ctx.kernel("matmul/gemm_coopmat_b" + std::to_string(q.mode), {}, 4, sizeof(GemmPush))
                                : ctx.kernel("matmul/gemm_tm" + std::to_string(tm) + "_b" + std::to_string(q.mode), {},
                                             4, sizeof(GemmPush));
  const uint32_t gx = u32((N + tile - 1) / tile, "N tiles"), gy = u32((M + tile - 1) / tile, "M tiles");
  // Unused bindings still need a buffer.
  const Buffer* scales = q.scales ? q.scales : a.buffer;

  // Split-K by the WebGPU GEMM's policy (split_k.h); chunks a multiple of both kernels' k tiles (16 and 32).
  const auto [splits, chunk] = wgtrain::ops::detail::plan_split_k(static_cast<int64_t>(gx) * gy, K, ctx.split_k,
                                                                  ctx.info.software, 32);
  if (splits <= 1) {
    ctx.dispatch(k, &p, {a.buffer, b.buffer, scales, &c}, gx, gy, 1);
    return;
  }
  auto part = ctx.allocate(static_cast<uint64_t>(splits * M * N) * 4, "split-K partial products");
  p.k_chunk = u32(chunk, "k chunk");
  p.flags = 0;
  p.c_off = 0;
  ctx.dispatch(k, &p, {a.buffer, b.buffer, scales, part.get()}, gx, gy, u32(splits, "splits"));
  const auto [sx, sy] = ctx.grid((static_cast<uint64_t>(M * N) + 255) / 256);
  SplitPush sp{u32(M * N, "outputs"), u32(splits, "splits"), u32(c_offset, "offset"), sx * 256u};
  ctx.dispatch(ctx.kernel("matmul/split_sum", {accumulate ? 1u : 0u}, 2, sizeof sp), &sp, {part.get(), &c}, sx, sy);
}

}  // namespace wgtrain::vk::detail
