// The launcher of matmul/gemm.comp for the native Vulkan backend (the twin of gemm.h), used by the q4gsw ops.
#pragma once

#include <cstdint>

#include "vulkan/context.h"

namespace wgtrain::vk::detail {

// A strided operand: element (row r, column c) at offset + r * row_stride + c * col_stride. A is [M, K], B [K, N].
struct GemmOperand {
  const Buffer* buffer = nullptr;
  int64_t offset = 0, row_stride = 0, col_stride = 0;
};

struct GemmQ4 {
  uint32_t mode = 0;  // 0: B is f32; 1: B[k][n] = W[n][k]; 2: B[r][j] = W[r][j]
  const Buffer* scales = nullptr;
  int64_t words = 0, rows = 0, group_size = 0;
};

// c[M, N] (+)= A B, c contiguous at c_offset. Splits along k where the output has few tiles (not on a CPU).
void gemm(Context& ctx, const GemmOperand& a, const GemmOperand& b, const GemmQ4& q, int64_t M,
          int64_t N, int64_t K, const Buffer& c, int64_t c_offset, bool accumulate);

}  // namespace wgtrain::vk::detail
