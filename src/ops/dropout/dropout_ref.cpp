// CPU reference for dropout (dropout.wgsl's hash in C++).
#include "ops/dropout/dropout_ref.h"

#include <cmath>

namespace wgtrain::ref {

namespace {

uint32_t mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

}  // namespace

bool dropout_keep(const std::array<int32_t, 4>& key, uint32_t stream, uint32_t index, double p) {
  const auto k = [&](int i) { return static_cast<uint32_t>(key[i]); };
  const uint32_t state = mix32(k(0) ^ mix32(k(1) ^ mix32(k(2) ^ mix32(k(3) ^ mix32(stream ^ 0x9e3779b9u)))));
  const uint32_t h = mix32(mix32(index ^ state) + state);
  return (h >> 8) >= static_cast<uint32_t>(std::nearbyint(p * 16777216.0));
}

std::vector<double> dropout_mask(const std::array<int32_t, 4>& key, uint32_t stream, int64_t n, double p) {
  const double scale = static_cast<float>(1.0 / (1.0 - p));
  std::vector<double> m(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) m[i] = dropout_keep(key, stream, static_cast<uint32_t>(i), p) ? scale : 0.0;
  return m;
}

}  // namespace wgtrain::ref
