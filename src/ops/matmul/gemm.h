// The launcher of matmul/gemm.wgsl, shared by the matmul and q4gsw families.
#pragma once

#include "gpu/kernels.h"
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
// Whether gemm runs in mixed precision on this device (gemm_sm), where the finishing pass can also take an addend.
bool gemm_is_mixed(const DeviceImpl& dev);

// The second pass of a split-K product (split_sum.wgsl): c[M, N] (+)= the sum of part's `splits` partial tiles
// [splits, M, N] in a fixed order; gemm and gemm_sm both end with it.
void sum_split_parts(const char* op, const Tensor& part, const Tensor& c, int64_t splits, int64_t outputs,
                     bool accumulate);

// Mixed precision (wgtrain/precision.h): gemm runs gemm_sm.wgsl, f16 products on subgroup matrices, where this is
// empty; otherwise it says what the device lacks ("offers no shader-f16", ...).
std::string gemm_sm_missing(const DeviceImpl& dev);
// gemm_sm.wgsl's variants as gemm_sm picks them (index mode * 9 + A's form * 3 + B's form), for its tests.
const std::vector<wgtrain::detail::KernelDefs>& gemm_sm_variants();
// gemm's contract on subgroup matrices (gemm_sm.wgsl), A's rows and (f32) B's columns scaled by powers of two.
// `addend` (contiguous, c's size, not c's memory) joins in the finishing pass: c = addend + a B, added in that order.
void gemm_sm(const char* op, const Tensor& a, const GemmB& b, int64_t n, const Tensor* bias, const Tensor& c,
             bool accumulate, const Tensor* addend = nullptr);
// The largest magnitude of each row of x[batch, rows, len] (any strides), as a float32 tensor [batch, rows]: the
// absmax passes of gemm_sm (sm_row_absmax.wgsl, or sm_absmax.wgsl's rows), here for their tests.
Tensor row_absmax(const Tensor& x);
// Of each row, then of each column of x[R, C] (any strides), as a float32 tensor [R + C]: sm_absmax.wgsl's one
// read for both, as gemm_sm takes it for an operand, here for its tests.
Tensor row_and_column_absmax(const Tensor& x);
// For a kernel that writes the maxima of its own output, a matrix that mixed GEMMs read next, in the absmax pass's
// stead (swiglu.wgsl's MAXIMA form, with matmul/tile_maxima): `floats` zeros of the device's scratch arena, for
// rows + columns of each output; and, after the kernel's dispatch (which would drop them), the maxima of x
// (contiguous, [rows, cols]: rows at `at`, columns after them) remembered as the GEMMs' absmax pass would have
// remembered its own, for x as an operand and transposed.
wgtrain::detail::DerivedValue operand_maxima_scratch(DeviceImpl& dev, int64_t floats);
void remember_operand_maxima(const Tensor& x, int64_t rows, int64_t cols, const wgtrain::detail::DerivedValue& at);
// The same pass into out[R + C], combined (atomic max) with what out holds: zeros for the maxima alone. For the
// benchmark, which times the pass without its fill.
void row_and_column_absmax_(const Tensor& x, const Tensor& out);

}  // namespace wgtrain::ops::detail
