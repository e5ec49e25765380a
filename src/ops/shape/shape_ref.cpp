// CPU references for permute and cat (float64).
#include "ops/reference.h"
#include "wgtrain/error.h"

namespace wgtrain::ref {

HostTensor permute(const HostTensor& x, const std::vector<int>& dims) {
  Shape shape;
  for (int d : dims) shape.push_back(x.shape[d]);
  const Shape xs = contiguous_strides(x.shape);
  HostTensor out(shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i, src = 0;
    for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
      src += (rem % shape[k]) * xs[dims[k]];
      rem /= shape[k];
    }
    out.data[i] = x.data[src];
  }
  return out;
}

HostTensor cat(const std::vector<HostTensor>& xs, int dim) {
  Shape shape = xs.at(0).shape;
  const int d = dim < 0 ? dim + static_cast<int>(shape.size()) : dim;
  shape[d] = 0;
  for (const auto& x : xs) shape[d] += x.shape[d];
  HostTensor out(shape);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < d; ++k) outer *= shape[k];
  for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  int64_t at = 0;
  for (const auto& x : xs) {
    const int64_t len = x.shape[d];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t l = 0; l < len; ++l)
        for (int64_t in = 0; in < inner; ++in)
          out.data[(o * shape[d] + at + l) * inner + in] = x.data[(o * len + l) * inner + in];
    at += len;
  }
  return out;
}

}  // namespace wgtrain::ref
