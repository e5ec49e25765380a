// CPU reference for rope (float64).
#include "ops/reference.h"

namespace wgtrain::ref {

HostTensor rope(const HostTensor& x, const HostTensor& cos, const HostTensor& sin, bool inverse, double scale) {
  const int r = x.rank();
  const int64_t T = x.shape[r - 3], H = x.shape[r - 2], hd = x.shape[r - 1], half = hd / 2;
  const int64_t table = cos.shape[1];
  HostTensor y(x.shape);
  for (int64_t row = 0; row < x.numel() / hd; ++row) {
    const int64_t t = (row / H) % T;
    for (int64_t i = 0; i < half; ++i) {
      const double c = cos.data[t * table + i], s = (inverse ? -1.0 : 1.0) * sin.data[t * table + i];
      const double a = x.data[row * hd + i], b = x.data[row * hd + i + half];
      y.data[row * hd + i] = (a * c - b * s) * scale;
      y.data[row * hd + i + half] = (b * c + a * s) * scale;
    }
  }
  return y;
}

}  // namespace wgtrain::ref
