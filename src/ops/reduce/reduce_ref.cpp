// CPU reference for sum and mean over dims (float64).
#include <cmath>
#include <limits>

#include "ops/reference.h"

namespace wgtrain::ref {

namespace {
HostTensor reduce_impl(const HostTensor& x, const std::vector<int>& dims, bool keepdim, bool mean, bool absolute) {
  const int rank = x.rank();
  std::vector<bool> red(rank, dims.empty());
  for (int d : dims) red[d < 0 ? d + std::max(rank, 1) : d] = rank > 0 ? true : false;
  Shape out_shape, kept_shape;
  for (int i = 0; i < rank; ++i) {
    if (!red[i]) kept_shape.push_back(x.shape[i]);
    if (!red[i] || keepdim) out_shape.push_back(red[i] ? 1 : x.shape[i]);
  }
  HostTensor out(out_shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = rem % x.shape[d];
      rem /= x.shape[d];
      if (!red[d]) {
        o += c * mul;
        mul *= x.shape[d];
      }
    }
    out.data[o] += absolute ? std::fabs(x.data[i]) : x.data[i];
  }
  if (mean) {
    int64_t per = 1;
    for (int i = 0; i < rank; ++i)
      if (red[i]) per *= x.shape[i];
    for (auto& v : out.data) v = per == 0 ? std::numeric_limits<double>::quiet_NaN() : v / static_cast<double>(per);
  }
  return out;
}
}  // namespace

HostTensor reduce(const HostTensor& x, const std::vector<int>& dims, bool keepdim, bool mean) {
  return reduce_impl(x, dims, keepdim, mean, false);
}
HostTensor reduce_abs(const HostTensor& x, const std::vector<int>& dims, bool keepdim) {
  return reduce_impl(x, dims, keepdim, false, true);
}

}  // namespace wgtrain::ref
