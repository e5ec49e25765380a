// CPU references for q4gsw, on the exchange layout (bytes [N, ceil(K/2)], even k in the low nibble).
// Re-quantisation divides in float64: for float32 inputs and |quotient| <= 9 that decides round-half-even exactly
// (a float32 quotient's distance to a half-integer, when not 0, is far above float64's rounding error).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/reference.h"

namespace wgtrain::ref {

HostTensor q4_dequant(std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n, int64_t k,
                      int64_t group_size);
std::vector<uint8_t> q4_requant(const HostTensor& latent, std::span<const float> scales, int64_t group_size);
// max |latent| / 7 per group, divided in float32 as the kernel does.
std::vector<float> q4_scales(const HostTensor& latent, int64_t group_size);

}  // namespace wgtrain::ref
