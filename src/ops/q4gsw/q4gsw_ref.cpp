// CPU references for q4gsw (float64): dequantisation, re-quantisation with round-half-even, scales.
#include <cmath>

#include "ops/q4gsw/q4gsw_ref.h"
#include "wgtrain/error.h"

namespace wgtrain::ref {

HostTensor q4_dequant(std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n, int64_t k,
                      int64_t group_size) {
  const int64_t bpr = (k + 1) / 2;
  HostTensor w({n, k});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t b = bytes[r * bpr + c / 2];
      const int code = c % 2 ? b >> 4 : b & 15;
      w.data[r * k + c] = (code - 8) * static_cast<double>(scales[(c / group_size) * n + r]);
    }
  return w;
}

std::vector<uint8_t> q4_requant(const HostTensor& latent, std::span<const float> scales, int64_t group_size) {
  const int64_t n = latent.shape[0], k = latent.shape[1], bpr = (k + 1) / 2;
  std::vector<uint8_t> bytes(static_cast<size_t>(n * bpr), 0x88);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const double s = scales[(c / group_size) * n + r];
      int code = 8;
      if (s != 0) {
        // nearbyint rounds half to even in the default rounding mode; x / s is exact enough in double (q4gsw_ref.h).
        const double q = std::nearbyint(latent.data[r * k + c] / s);
        code = static_cast<int>(std::fmin(std::fmax(q, -8.0), 7.0)) + 8;
      }
      uint8_t& b = bytes[r * bpr + c / 2];
      b = c % 2 ? static_cast<uint8_t>((b & 0x0f) | (code << 4)) : static_cast<uint8_t>((b & 0xf0) | code);
    }
  return bytes;
}

std::vector<float> q4_scales(const HostTensor& latent, int64_t group_size) {
  const int64_t n = latent.shape[0], k = latent.shape[1], g = (k + group_size - 1) / group_size;
  std::vector<float> s(static_cast<size_t>(g * n));
  for (int64_t gi = 0; gi < g; ++gi)
    for (int64_t r = 0; r < n; ++r) {
      double m = 0;
      for (int64_t c = gi * group_size; c < std::min(k, (gi + 1) * group_size); ++c)
        m = std::fmax(m, std::fabs(latent.data[r * k + c]));
      s[gi * n + r] = static_cast<float>(m) / 7.0f;
    }
  return s;
}

}  // namespace wgtrain::ref
