// CPU reference for add, sub, mul, div with broadcasting (float64).
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
double apply(const char* op, double x, double y, double alpha) {
  if (!std::strcmp(op, "add")) return x + alpha * y;
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

}  // namespace wgtrain::ref
