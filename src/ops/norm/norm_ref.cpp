// CPU reference for rms_norm and its gradient (float64).
#include <cmath>

#include "ops/reference.h"

namespace wgtrain::ref {

RmsNormRef rms_norm(const HostTensor& x, const HostTensor& w, double eps) {
  const int64_t dim = x.shape.back(), rows = x.numel() / dim;
  RmsNormRef out{HostTensor(x.shape), HostTensor(Shape(x.shape.begin(), x.shape.end() - 1))};
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < dim; ++j) ss += x.data[r * dim + j] * x.data[r * dim + j];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    out.rstd.data[r] = rs;
    for (int64_t j = 0; j < dim; ++j) out.y.data[r * dim + j] = x.data[r * dim + j] * rs * w.data[j];
  }
  return out;
}

RmsNormGradRef rms_norm_backward(const HostTensor& dy, const HostTensor& x, const HostTensor& w, double eps) {
  const int64_t dim = x.shape.back(), rows = x.numel() / dim;
  RmsNormGradRef g{HostTensor(x.shape), HostTensor({dim})};
  const RmsNormRef f = rms_norm(x, w, eps);
  for (int64_t r = 0; r < rows; ++r) {
    const double rs = f.rstd.data[r];
    double dot = 0;
    for (int64_t j = 0; j < dim; ++j) dot += dy.data[r * dim + j] * w.data[j] * x.data[r * dim + j];
    for (int64_t j = 0; j < dim; ++j) {
      const double xv = x.data[r * dim + j], gv = dy.data[r * dim + j];
      g.dx.data[r * dim + j] = rs * gv * w.data[j] - xv * rs * rs * rs / static_cast<double>(dim) * dot;
      g.dweight.data[j] += gv * xv * rs;
    }
  }
  return g;
}

}  // namespace wgtrain::ref
