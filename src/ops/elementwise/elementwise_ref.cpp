// CPU references for the elementwise ops, with broadcasting (float64).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/reference.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain::ref {

HostTensor expand(const HostTensor& a, const Shape& shape) {
  HostTensor out(shape);
  const size_t lead = shape.size() - a.shape.size();
  const Shape a_strides = contiguous_strides(a.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i, src = 0;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t c = rem % shape[d];
      rem /= shape[d];
      if (d >= static_cast<int>(lead) && a.shape[d - lead] != 1) src += c * a_strides[d - lead];
    }
    out.data[i] = a.data[src];
  }
  return out;
}

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double apply(const char* op, double x, double y, double alpha) {
  if (!std::strcmp(op, "add")) return x + alpha * y;
  if (!std::strcmp(op, "maximum")) return std::max(x, y);
  if (!std::strcmp(op, "minimum")) return std::min(x, y);
  if (!std::strcmp(op, "silu_backward")) return x * sigmoid(y) * (1.0 + y * (1.0 - sigmoid(y)));
  if (!std::strcmp(op, "sigmoid_backward")) return x * y * (1.0 - y);
  if (!std::strcmp(op, "tanh_backward")) return x * (1.0 - y * y);
  if (!std::strcmp(op, "sub")) return x - alpha * y;
  if (!std::strcmp(op, "mul")) return x * y;
  if (!std::strcmp(op, "div")) return x / y;
  throw ArgumentError(std::string("ref::binary: unknown op ") + op);
}
}  // namespace

HostTensor binary(const char* op, const HostTensor& a, const HostTensor& b, double alpha) {
  const Shape shape = ops::broadcast_shapes(a.shape, b.shape);
  const HostTensor ea = expand(a, shape), eb = expand(b, shape);
  HostTensor out(shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.data[i] = apply(op, ea.data[i], eb.data[i], alpha);
  return out;
}

HostTensor binary_scalar(const char* op, const HostTensor& a, double s) {
  HostTensor out(a.shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.data[i] = apply(op, a.data[i], s, 1.0);
  return out;
}

double unary_value(const char* op, double x, double e) {
  const std::string o = op;
  if (o == "neg") return -x;
  if (o == "abs") return std::fabs(x);
  if (o == "sign") return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  if (o == "exp") return std::exp(x);
  if (o == "log") return std::log(x);
  if (o == "sqrt") return std::sqrt(x);
  if (o == "rsqrt") return 1.0 / std::sqrt(x);
  if (o == "reciprocal") return 1.0 / x;
  if (o == "sigmoid") return sigmoid(x);
  if (o == "silu") return x * sigmoid(x);
  if (o == "tanh") return std::tanh(x);
  if (o == "sin") return std::sin(x);
  if (o == "cos") return std::cos(x);
  if (o == "pow.Scalar") return std::pow(x, e);
  throw ArgumentError("ref::unary: unknown op " + o);
}

HostTensor unary(const char* op, const HostTensor& x, double scalar) {
  HostTensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = unary_value(op, x.data[i], scalar);
  return out;
}

}  // namespace wgtrain::ref
