// The ops, as C++ functions. Each checks shapes and dtypes on the host, then records its dispatches into the
// device's open batch (no wait). Outputs are new contiguous tensors. Inputs may be any strided view.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "wgtrain/tensor.h"

namespace wgtrain {
class Device;
}

namespace wgtrain::ops {

// ---- shape / copy (src/ops/shape) ----
// A contiguous copy of any view (the view itself when it already is contiguous): the dim-order copy.
Tensor contiguous(const Tensor& x);
// A materialised broadcast of x to `shape` (NumPy rules).
Tensor expand_copy(const Tensor& x, const Shape& shape);
// A new tensor of `shape` with every element `value` (converted to dtype; bool: value != 0).
Tensor full(Device& device, const Shape& shape, double value, DType dtype = DType::F32);
// A tensor like x with every element `value`.
Tensor fill(const Tensor& like, double value);
// Sets every element of a contiguous tensor (or view) to `value`, in place.
void fill_(const Tensor& t, double value);
// Concatenation along dim; every other dim must match, dtypes too.
Tensor cat(const std::vector<Tensor>& tensors, int dim);
// Writes src into the view dst (same shape and dtype), in place: slice assignment.
void copy_(const Tensor& dst, const Tensor& src);

// ---- matmul family (src/ops/matmul) ----
// [M,K] x [K,N] -> [M,N]
Tensor mm(const Tensor& a, const Tensor& b);
// [B,M,K] x [B,K,N] -> [B,M,N]
Tensor bmm(const Tensor& a, const Tensor& b);
// x[..., K] W[N,K]^T (+ bias[N]) -> [..., N], as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

// ---- softmax family (src/ops/softmax) ----
// causal: x is [..., T, T] attention scores (dim -1), and each row t counts only its first t + 1 entries (the rest
// are -inf: probability 0), with no mask tensor and no masking pass.
Tensor softmax(const Tensor& x, int dim = -1, bool causal = false);
Tensor log_softmax(const Tensor& x, int dim = -1);
// The gradient of y = softmax(x, dim): grad * y - y * sum(grad * y, dim), in one pass over each row.
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int dim = -1);

// ---- norm (src/ops/norm) ----
struct RmsNorm {
  Tensor y;     // x * rstd * weight
  Tensor rstd;  // 1 / sqrt(mean(x^2) + eps) per row: x's shape without its last dim
};
// RMSNorm over the last dim of x with a gain weight[D], in one pass per row.
RmsNorm rms_norm(const Tensor& x, const Tensor& weight, double eps);
struct RmsNormGrads {
  Tensor dx, dweight;
};
// Its gradients, from the forward's rstd: dx in one pass per row, dweight summed over rows. With dx_addend (x's
// shape), dx is dx_addend + the norm's gradient, in the same pass: the residual stream's gradient joined without an
// add of its own. With dweight_acc (contiguous, weight's shape), dweight is added into it (acc + dweight, as an add
// would give) by the sum's last pass, and returned as that tensor: a parameter's gradient buffer, no add or copy.
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               const Tensor* dx_addend = nullptr, const Tensor* dweight_acc = nullptr);

// ---- rope (src/ops/rope) ----
// Rotary position embedding of x [..., T, H, head_dim]: each head's pairs (i, i + head_dim / 2) at position t rotate
// by cos/sin[t][i] (tables [>= T, head_dim / 2]), and the result is multiplied by `scale`. `inverse` rotates the
// other way: the gradient of the forward (times the same scale).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse = false, double scale = 1.0);

// ---- swiglu (src/ops/swiglu) ----
// The gated MLP activation silu(gate) * up of Llama-family models, in one pass (silu(gate) is never stored), and its
// gradients from the incoming grad and the forward's two inputs, in one pass: d_gate, d_up. Float32, one shape.
Tensor swiglu(const Tensor& gate, const Tensor& up);
struct SwigluGrads {
  Tensor dgate, dup;
};
SwigluGrads swiglu_backward(const Tensor& grad, const Tensor& gate, const Tensor& up);

// ---- elementwise (src/ops/elementwise) ----
// By name, as listed by `wgtrain ops`: binary ops broadcast (NumPy rules) and need one dtype on both sides.
Tensor binary(const std::string& op, const Tensor& a, const Tensor& b, float alpha = 1.0f);
Tensor binary_scalar(const std::string& op, const Tensor& a, double s);
Tensor unary(const std::string& op, const Tensor& x, double scalar = 0.0);
std::vector<std::string> binary_op_names();
std::vector<std::string> unary_op_names();

inline Tensor neg(const Tensor& x) { return unary("neg", x); }
inline Tensor abs(const Tensor& x) { return unary("abs", x); }
inline Tensor exp(const Tensor& x) { return unary("exp", x); }
inline Tensor log(const Tensor& x) { return unary("log", x); }
inline Tensor sqrt(const Tensor& x) { return unary("sqrt", x); }
inline Tensor rsqrt(const Tensor& x) { return unary("rsqrt", x); }
inline Tensor sigmoid(const Tensor& x) { return unary("sigmoid", x); }
inline Tensor silu(const Tensor& x) { return unary("silu", x); }
inline Tensor tanh(const Tensor& x) { return unary("tanh", x); }
inline Tensor sin(const Tensor& x) { return unary("sin", x); }
inline Tensor cos(const Tensor& x) { return unary("cos", x); }
inline Tensor pow(const Tensor& x, double exponent) { return unary("pow.Scalar", x, exponent); }
inline Tensor maximum(const Tensor& a, const Tensor& b) { return binary("maximum", a, b); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return binary("minimum", a, b); }
// Gradients: grad * d(silu)/dx at x; grad * y (1 - y) for y = sigmoid(x); grad * (1 - y^2) for y = tanh(x).
inline Tensor silu_backward(const Tensor& grad, const Tensor& x) { return binary("silu_backward", grad, x); }
inline Tensor sigmoid_backward(const Tensor& grad, const Tensor& y) { return binary("sigmoid_backward", grad, y); }
inline Tensor tanh_backward(const Tensor& grad, const Tensor& y) { return binary("tanh_backward", grad, y); }

// ---- select (src/ops/select): comparisons give bool tensors ----
// op: "eq", "ne", "lt", "le", "gt", "ge"
Tensor compare(const std::string& op, const Tensor& a, const Tensor& b);
Tensor compare_scalar(const std::string& op, const Tensor& a, double s);
// cond ? a : b, elementwise, all three broadcast; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x where mask is false, value where it is true (an attention mask).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor logical_not(const Tensor& x);

// ---- gather (src/ops/gather): index tensors are int32 ----
// out[..i..] = input[..index[..i..]..] along dim; index has input's rank, and index.size(d) <= input.size(d).
Tensor gather(const Tensor& input, int dim, const Tensor& index);
// out[..., :] = weight[indices[...], :]
Tensor embedding(const Tensor& weight, const Tensor& indices);
// The gradient of embedding with respect to its weight: out[v, :] = sum of grad[i, :] over the positions i whose
// index is v (grad is indices' shape plus [D]; out is [num_weights, D], zero for rows no index names). The sum runs
// in position order on every run: deterministic, unlike a scatter with float atomics.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights);

// ---- elementwise arithmetic, by name ----
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
