// CPU reference for mm, bmm, linear (float64).
#include <cmath>

#include "ops/reference.h"
#include "wgtrain/error.h"

namespace wgtrain::ref {

namespace {
HostTensor bmm_impl(const HostTensor& a, const HostTensor& b, bool absolute) {
  const int64_t B = a.shape[0], M = a.shape[1], K = a.shape[2], N = b.shape[2];
  if (b.shape[0] != B || b.shape[1] != K) throw ArgumentError("ref::bmm: shape mismatch");
  HostTensor c({B, M, N});
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = a.data[(z * M + i) * K + k] * b.data[(z * K + k) * N + j];
          acc += absolute ? std::fabs(p) : p;
        }
        c.data[(z * M + i) * N + j] = acc;
      }
  return c;
}
HostTensor as3(const HostTensor& t) { return HostTensor({1, t.shape[0], t.shape[1]}, t.data); }
}  // namespace

HostTensor bmm(const HostTensor& a, const HostTensor& b) { return bmm_impl(a, b, false); }

HostTensor mm(const HostTensor& a, const HostTensor& b) {
  HostTensor c = bmm_impl(as3(a), as3(b), false);
  return HostTensor({a.shape[0], b.shape[1]}, std::move(c.data));
}

HostTensor mm_abs(const HostTensor& a, const HostTensor& b) {
  if (a.rank() == 3) return bmm_impl(a, b, true);
  HostTensor c = bmm_impl(as3(a), as3(b), true);
  return HostTensor({a.shape[0], b.shape[1]}, std::move(c.data));
}

HostTensor linear(const HostTensor& x, const HostTensor& w, const std::optional<HostTensor>& bias) {
  const int64_t N = w.shape[0], K = w.shape[1];
  const int64_t M = K == 0 ? x.numel() : x.numel() / K;
  Shape out_shape = x.shape;
  out_shape.back() = N;
  HostTensor y(out_shape);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = bias ? bias->data[j] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += x.data[i * K + k] * w.data[j * K + k];
      y.data[i * N + j] = acc;
    }
  return y;
}

}  // namespace wgtrain::ref
