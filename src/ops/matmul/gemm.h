// The launcher of matmul/gemm.wgsl, shared by the matmul and q4gsw families.
#pragma once

#include "ops/common.h"

namespace wgtrain::ops::detail {

struct GemmB {
  enum Mode : uint32_t { F32 = 0, Q4_NK = 1, Q4_RJ = 2 };
  Mode mode = F32;
  const Tensor* b = nullptr;       // F32: a [batch, K, N] view; q4: the packed code words
  const Tensor* scales = nullptr;  // q4: [ceil(K_w / group), N_w]
  int64_t q_words = 0, q_rows = 0, group_size = 0;
};

// c[batch, M, N] (+)= a[batch, M, K] B (+ bias[N]). c must be contiguous; `accumulate` adds to what c holds.
void gemm(const char* op, const Tensor& a, const GemmB& b, int64_t n, const Tensor* bias, const Tensor& c,
          bool accumulate);

}  // namespace wgtrain::ops::detail
