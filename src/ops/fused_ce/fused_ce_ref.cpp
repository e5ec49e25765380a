// CPU reference for fused_ce (float64).
#include "ops/fused_ce/fused_ce_ref.h"

#include <cmath>
#include <limits>

namespace wgtrain::ref {

CrossEntropyRef cross_entropy(const HostTensor& logits, const std::vector<int>& labels, double n_valid) {
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  CrossEntropyRef out{0.0, HostTensor(logits.shape)};
  if (n_valid < 0) {
    n_valid = 0;
    for (int l : labels) n_valid += l >= 0;
  }
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    const double* x = logits.data.data() + r * vocab;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, x[j]);
    double s = 0;
    for (int64_t j = 0; j < vocab; ++j) s += std::exp(x[j] - m);
    total += std::log(s) + m - x[labels[r]];
    if (n_valid == 0) continue;  // nothing counts: dlogits stay 0
    for (int64_t j = 0; j < vocab; ++j)
      out.dlogits.data[r * vocab + j] = (std::exp(x[j] - m) / s - (j == labels[r] ? 1.0 : 0.0)) / n_valid;
  }
  out.loss = n_valid == 0 ? 0.0 : total / n_valid;  // not PyTorch's NaN: see fused_ce.h
  return out;
}

}  // namespace wgtrain::ref
