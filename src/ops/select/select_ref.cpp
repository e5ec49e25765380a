// CPU references for comparisons and where (float64; booleans as 0/1).
#include <string>

#include "ops/reference.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain::ref {

HostTensor compare(const char* op, const HostTensor& a, const HostTensor& b) {
  const Shape shape = ops::broadcast_shapes(a.shape, b.shape);
  const HostTensor ea = expand(a, shape), eb = expand(b, shape);
  const std::string o = op;
  HostTensor out(shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double x = ea.data[i], y = eb.data[i];
    bool r;
    if (o == "eq") r = x == y;
    else if (o == "ne") r = x != y;
    else if (o == "lt") r = x < y;
    else if (o == "le") r = x <= y;
    else if (o == "gt") r = x > y;
    else if (o == "ge") r = x >= y;
    else throw ArgumentError("ref::compare: unknown op " + o);
    out.data[i] = r ? 1.0 : 0.0;
  }
  return out;
}

HostTensor where(const HostTensor& cond, const HostTensor& a, const HostTensor& b) {
  const Shape shape = ops::broadcast_shapes(ops::broadcast_shapes(cond.shape, a.shape), b.shape);
  const HostTensor ec = expand(cond, shape), ea = expand(a, shape), eb = expand(b, shape);
  HostTensor out(shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.data[i] = ec.data[i] != 0 ? ea.data[i] : eb.data[i];
  return out;
}

}  // namespace wgtrain::ref
