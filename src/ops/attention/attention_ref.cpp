// CPU reference for fused causal attention (float64): scores, softmax and products spelled out per query.
#include "ops/attention/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace wgtrain::ref {

namespace {

struct Layout {
  int64_t B, T, L, H, KV, hd;
  size_t q(int64_t b, int64_t t, int64_t h) const { return static_cast<size_t>(((b * T + t) * H + h) * hd); }
  size_t k(int64_t b, int64_t j, int64_t g) const { return static_cast<size_t>(((b * L + j) * KV + g) * hd); }
};

Layout layout(const HostTensor& q, const HostTensor& k) {
  return {q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]};
}

// The probabilities of query t of head h (over keys 0 .. L - 1, zero past its last key) and their logsumexp.
std::vector<double> probabilities(const Layout& d, const HostTensor& q, const HostTensor& k, int64_t b, int64_t t,
                                  int64_t h, double scale, double* lse) {
  const int64_t g = h / (d.H / d.KV), last = d.L - d.T + t;
  std::vector<double> s(static_cast<size_t>(d.L), 0.0);
  double m = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    double dot = 0;
    for (int64_t i = 0; i < d.hd; ++i) dot += q.data[d.q(b, t, h) + i] * k.data[d.k(b, j, g) + i];
    s[j] = scale * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j <= last; ++j) sum += std::exp(s[j] - m);
  for (int64_t j = 0; j < d.L; ++j) s[j] = j <= last ? std::exp(s[j] - m) / sum : 0.0;
  if (lse) *lse = m + std::log(sum);
  return s;
}

}  // namespace

AttentionRef attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, double scale) {
  const Layout d = layout(q, k);
  AttentionRef r{HostTensor({d.B, d.T, d.H * d.hd}), HostTensor({d.B, d.H, d.T})};
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        double lse = 0;
        const std::vector<double> pr = probabilities(d, q, k, b, t, h, scale, &lse);
        r.lse.data[static_cast<size_t>((b * d.H + h) * d.T + t)] = lse;
        const int64_t g = h / (d.H / d.KV);
        for (int64_t j = 0; j < d.L; ++j)
          for (int64_t i = 0; i < d.hd; ++i) r.out.data[d.q(b, t, h) + i] += pr[j] * v.data[d.k(b, j, g) + i];
      }
  return r;
}

AttentionGradRef attention_backward(const HostTensor& dout, const HostTensor& q, const HostTensor& k,
                                    const HostTensor& v, double scale) {
  const Layout d = layout(q, k);
  AttentionGradRef r{HostTensor(q.shape), HostTensor(k.shape), HostTensor(k.shape)};
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t g = h / (d.H / d.KV);
        const std::vector<double> pr = probabilities(d, q, k, b, t, h, scale, nullptr);
        const size_t qi = d.q(b, t, h);
        // dP = dO v^T; dS = P (dP - sum_j P dP) (the softmax's gradient); dq = scale dS k; dk = scale dS^T q;
        // dv = P^T dO.
        std::vector<double> dp(static_cast<size_t>(d.L), 0.0);
        double weighted = 0;
        for (int64_t j = 0; j < d.L; ++j) {
          for (int64_t i = 0; i < d.hd; ++i) dp[j] += dout.data[qi + i] * v.data[d.k(b, j, g) + i];
          weighted += pr[j] * dp[j];
        }
        for (int64_t j = 0; j < d.L; ++j) {
          const double ds = pr[j] * (dp[j] - weighted);
          const size_t ki = d.k(b, j, g);
          for (int64_t i = 0; i < d.hd; ++i) {
            r.dq.data[qi + i] += scale * ds * k.data[ki + i];
            r.dk.data[ki + i] += scale * ds * q.data[qi + i];
            r.dv.data[ki + i] += pr[j] * dout.data[qi + i];
          }
        }
      }
  return r;
}

}  // namespace wgtrain::ref
