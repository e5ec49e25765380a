// CPU references for the ops, in float64, on row-major host tensors. Each op family's *_ref.cpp defines its part.
// They are the ground truth in tests, and small enough to read as the ops' specification.
#pragma once

#include <optional>
#include <vector>

#include "wgtrain/tensor.h"

namespace wgtrain::ref {

struct HostTensor {
  Shape shape;
  std::vector<double> data;  // row-major

  HostTensor() = default;
  HostTensor(Shape s, std::vector<double> d) : shape(std::move(s)), data(std::move(d)) {}
  explicit HostTensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(wgtrain::numel(shape)), 0.0) {}
  int64_t numel() const { return wgtrain::numel(shape); }
  int rank() const { return static_cast<int>(shape.size()); }
};

// matmul family
HostTensor mm(const HostTensor& a, const HostTensor& b);
HostTensor bmm(const HostTensor& a, const HostTensor& b);
HostTensor linear(const HostTensor& x, const HostTensor& w, const std::optional<HostTensor>& bias);
// Per-element sum of |a||b| over k for mm/bmm/linear: the scale of the rounding error a GPU result may carry.
HostTensor mm_abs(const HostTensor& a, const HostTensor& b);

// softmax family
HostTensor softmax(const HostTensor& x, int dim, bool log);
HostTensor softmax_backward(const HostTensor& grad, const HostTensor& y, int dim);

// elementwise binary, by the registry's names ("add", "sub", "mul", "div", "maximum", "minimum", "*_backward")
HostTensor binary(const char* op, const HostTensor& a, const HostTensor& b, double alpha = 1.0);
// elementwise unary, by the registry's names ("exp", "silu", "pow.Scalar" with scalar = exponent, ...)
HostTensor unary(const char* op, const HostTensor& x, double scalar = 0.0);
double unary_value(const char* op, double x, double scalar = 0.0);

// select: comparisons give 0/1
HostTensor compare(const char* op, const HostTensor& a, const HostTensor& b);
HostTensor where(const HostTensor& cond, const HostTensor& a, const HostTensor& b);

// shape
HostTensor permute(const HostTensor& x, const std::vector<int>& dims);
HostTensor cat(const std::vector<HostTensor>& xs, int dim);

// gather: index values are stored as doubles
HostTensor gather(const HostTensor& input, int dim, const HostTensor& index);
HostTensor embedding(const HostTensor& weight, const HostTensor& indices);
HostTensor embedding_backward(const HostTensor& grad, const HostTensor& indices, int64_t num_weights);
HostTensor binary_scalar(const char* op, const HostTensor& a, double s);
// A broadcast copy (expand), used by the references above.
HostTensor expand(const HostTensor& a, const Shape& shape);

// reduce
HostTensor reduce(const HostTensor& x, const std::vector<int>& dims, bool keepdim, bool mean);
// Sum of |x| with the same reduction, for tolerances.
HostTensor reduce_abs(const HostTensor& x, const std::vector<int>& dims, bool keepdim);

// norm
struct RmsNormRef {
  HostTensor y, rstd;
};
RmsNormRef rms_norm(const HostTensor& x, const HostTensor& w, double eps);
struct RmsNormGradRef {
  HostTensor dx, dweight;
};
RmsNormGradRef rms_norm_backward(const HostTensor& dy, const HostTensor& x, const HostTensor& w, double eps);

// swiglu: silu(gate) * up, and its gradients
HostTensor swiglu(const HostTensor& gate, const HostTensor& up);
struct SwigluGradRef {
  HostTensor dgate, dup;
};
SwigluGradRef swiglu_backward(const HostTensor& grad, const HostTensor& gate, const HostTensor& up);

// rope: x [..., T, H, hd], tables [>= T, hd / 2]
HostTensor rope(const HostTensor& x, const HostTensor& cos, const HostTensor& sin, bool inverse, double scale);

}  // namespace wgtrain::ref
