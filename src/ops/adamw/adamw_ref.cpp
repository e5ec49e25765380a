// CPU reference for AdamW (float64), torch.optim.AdamW's update.
#include "ops/adamw/adamw_ref.h"

#include <cmath>

namespace wgtrain::ref {

void adamw_step(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<double>& g,
                double lr, double beta1, double beta2, double eps, double wd, int64_t step) {
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(step));
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - lr * wd;
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    p[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
  }
}

}  // namespace wgtrain::ref
