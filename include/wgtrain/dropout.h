// Dropout on the GPU with a counter-based random stream (src/ops/dropout): which elements drop is a pure function of
// (seed, counter, stream, element index), so a recorded step replays with new masks when the counter changes, a
// resumed run draws the masks it would have drawn, and the op applied to a gradient with the same key is its own
// backward.
#pragma once

#include <array>
#include <cstdint>

#include "wgtrain/tensor.h"

namespace wgtrain::ops {

// The key as the kernel reads it: an int32 tensor [4] of the words (seed low, seed high, counter low, counter high).
// Make it with Tensor::from_host once, and overwrite it with Tensor::write before each replay.
std::array<int32_t, 4> dropout_key(uint64_t seed, uint64_t counter);

// Inverted dropout of x (float32, any view): element i (row-major) is zeroed with probability p (0 <= p < 1) and
// otherwise multiplied by float32(1 / (1 - p)). `stream` separates independent masks under one key (e.g. one per
// layer). The decision: the top 24 bits of the hash are >= round(p * 2^24).
Tensor dropout(const Tensor& x, const Tensor& key, double p, uint32_t stream);
// The multipliers dropout would apply to a tensor of `shape`: 0 or float32(1 / (1 - p)) per element, on the key's
// device. dropout(x) == x * dropout_mask(x.shape()) element for element.
Tensor dropout_mask(const Shape& shape, const Tensor& key, double p, uint32_t stream);

}  // namespace wgtrain::ops
