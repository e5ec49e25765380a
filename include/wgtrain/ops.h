// The ops, as C++ functions. Each checks shapes and dtypes on the host, then records its dispatches into the
// device's open batch (no wait). Outputs are new contiguous tensors. Inputs may be any strided view.
#pragma once

#include <optional>
#include <vector>

#include "wgtrain/tensor.h"

namespace wgtrain::ops {

// ---- shape / copy ----
// A contiguous copy of any view (the view itself when it already is contiguous).
Tensor contiguous(const Tensor& x);

// ---- matmul family (src/ops/matmul) ----
// [M,K] x [K,N] -> [M,N]
Tensor mm(const Tensor& a, const Tensor& b);
// [B,M,K] x [B,K,N] -> [B,M,N]
Tensor bmm(const Tensor& a, const Tensor& b);
// x[..., K] W[N,K]^T (+ bias[N]) -> [..., N], as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

// ---- softmax family (src/ops/softmax) ----
Tensor softmax(const Tensor& x, int dim = -1);
Tensor log_softmax(const Tensor& x, int dim = -1);

// ---- elementwise binary (src/ops/elementwise); NumPy/PyTorch broadcasting ----
Tensor add(const Tensor& a, const Tensor& b, float alpha = 1.0f);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, float alpha = 1.0f);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // IEEE division: x/0 is +-inf, 0/0 NaN
Tensor add(const Tensor& a, float s);
Tensor sub(const Tensor& a, float s);
Tensor mul(const Tensor& a, float s);
Tensor div(const Tensor& a, float s);

// ---- reduce (src/ops/reduce) ----
// Over `dims` (negative allowed; empty means every dim); keepdim keeps them as size 1. mean of nothing is NaN.
Tensor sum(const Tensor& x, const std::vector<int>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int>& dims = {}, bool keepdim = false);

// The shape two tensors broadcast to; throws ArgumentError naming both shapes when they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace wgtrain::ops
