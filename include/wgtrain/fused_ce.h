// Fused cross-entropy: the loss and its gradient with respect to the logits in one launch chain.
#pragma once

#include <optional>

#include "wgtrain/tensor.h"

namespace wgtrain::ops {

struct CrossEntropy {
  Tensor loss;     // float32 scalar: mean over rows with label >= 0 of logsumexp(row) - row[label]
  Tensor dlogits;  // float32 [R, V]: (softmax(row) - onehot(label)) / n_valid; zero on ignored rows
};

// logits float32 [R, V], labels int32 [R] (negative: ignore the row). n_valid, when given, replaces the count of
// labels >= 0 as the divisor (e.g. to average over a whole batch split in pieces); it must not be negative. With
// in_place, dlogits is written over the logits' own buffer. A label >= V is an ArgumentError: before the dispatch
// if the host wrote the labels, else at the next read-back.
// When no row counts (every label negative, no rows, or n_valid given as 0) the loss is 0 and dlogits all 0, not
// PyTorch's NaN (0 / 0): a batch with nothing to learn (all prompt under prompt masking) leaves the weights alone.
CrossEntropy fused_ce(const Tensor& logits, const Tensor& labels, std::optional<int64_t> n_valid = std::nullopt,
                      bool in_place = false);

}  // namespace wgtrain::ops
