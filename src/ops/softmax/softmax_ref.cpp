// CPU reference for _softmax / _log_softmax (float64, max-subtracted).
#include <cmath>
#include <limits>

#include "ops/reference.h"

namespace wgtrain::ref {

HostTensor softmax(const HostTensor& x, int dim, bool log) {
  const int rank = std::max(x.rank(), 1);
  const int d = dim < 0 ? dim + rank : dim;
  int64_t outer = 1, inner = 1, len = x.rank() == 0 ? 1 : x.shape[d];
  for (int i = 0; i < d; ++i) outer *= x.shape[i];
  for (int i = d + 1; i < x.rank(); ++i) inner *= x.shape[i];
  HostTensor y(x.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t l) { return (o * len + l) * inner + in; };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < len; ++l) m = std::max(m, x.data[at(l)]);
      double s = 0;
      for (int64_t l = 0; l < len; ++l) s += std::exp(x.data[at(l)] - m);
      for (int64_t l = 0; l < len; ++l)
        y.data[at(l)] = log ? x.data[at(l)] - m - std::log(s) : std::exp(x.data[at(l)] - m) / s;
    }
  return y;
}

HostTensor softmax_backward(const HostTensor& grad, const HostTensor& y, int dim) {
  const int rank = std::max(y.rank(), 1);
  const int d = dim < 0 ? dim + rank : dim;
  int64_t outer = 1, inner = 1, len = y.rank() == 0 ? 1 : y.shape[d];
  for (int i = 0; i < d; ++i) outer *= y.shape[i];
  for (int i = d + 1; i < y.rank(); ++i) inner *= y.shape[i];
  HostTensor dx(y.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t l) { return (o * len + l) * inner + in; };
      double dot = 0;
      for (int64_t l = 0; l < len; ++l) dot += grad.data[at(l)] * y.data[at(l)];
      for (int64_t l = 0; l < len; ++l) dx.data[at(l)] = y.data[at(l)] * (grad.data[at(l)] - dot);
    }
  return dx;
}

}  // namespace wgtrain::ref
