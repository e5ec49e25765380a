// CPU reference for dropout: the kernel's hash, bit for bit, and the op in float64.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace wgtrain::ref {

// True when element `index` survives under `key` (ops::dropout_key's words) and `stream` for drop probability p.
bool dropout_keep(const std::array<int32_t, 4>& key, uint32_t stream, uint32_t index, double p);
// The multipliers of n elements: 0 or 1 / (1 - p) rounded to float32, as the kernel multiplies by.
std::vector<double> dropout_mask(const std::array<int32_t, 4>& key, uint32_t stream, int64_t n, double p);

}  // namespace wgtrain::ref
