// The train/validation split and the batch sampler.
#include "wgtrain/data.h"

#include <algorithm>

#include "wgtrain/error.h"
#include "wgtrain/random.h"

namespace wgtrain::data {

TextSplit split_text(const std::string& text, int every, size_t block) {
  if (every < 2) throw ArgumentError("split_text: every must be at least 2");
  TextSplit out;
  size_t pos = 0;
  for (int64_t index = 0; pos < text.size(); ++index) {
    size_t end = std::min(pos + block, text.size());
    if (end < text.size()) {
      // A block ends at the next line end; in text without one near, at the next space, else at a character
      // boundary: the split must not depend on the text having newlines.
      size_t cut = text.find('\n', end);
      if (cut == std::string::npos || cut - end > block) cut = text.find_first_of(" \t\r", end);
      if (cut != std::string::npos && cut - end <= block) {
        end = cut + 1;
      } else {
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
      }
    }
    (index % every == every - 1 ? out.val : out.train).append(text, pos, end - pos);
    pos = end;
  }
  return out;
}

BatchSampler::BatchSampler(std::vector<int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed)
    : tokens_(std::move(tokens)), batch_(batch), seq_(seq_len), seed_(seed) {
  if (batch < 1 || seq_len < 1) throw ArgumentError("BatchSampler: batch and sequence length must be >= 1");
  // Two windows at the largest offset, so that every epoch has at least one.
  if (static_cast<int64_t>(tokens_.size()) < 2 * seq_len + 1)
    throw Error("the training text has " + std::to_string(tokens_.size()) + " tokens, too few for windows of " +
                std::to_string(seq_len) + ": use a shorter sequence length or more text");
}

// Every epoch has the windows that fit at the largest offset (seq_len - 1), so epoch boundaries fall at multiples
// of one count and a window's epoch is a division away.
int64_t BatchSampler::windows() const { return (static_cast<int64_t>(tokens_.size()) - seq_) / seq_; }

void BatchSampler::prepare(int64_t epoch) const {
  if (epoch == cached_epoch_) return;
  SplitMix64 rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch) + 1);
  // Epoch 0 starts at token 0; later ones at a random offset, so window boundaries move between epochs.
  cached_offset_ = epoch == 0 ? 0 : static_cast<int64_t>(rng.next() % static_cast<uint64_t>(seq_));
  const int64_t n = windows();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[rng.next() % static_cast<uint64_t>(i + 1)]);
  cached_epoch_ = epoch;
}

void BatchSampler::batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const {
  if (step < 0) throw ArgumentError("BatchSampler: negative step");
  inputs.resize(static_cast<size_t>(batch_ * seq_));
  targets.resize(inputs.size());
  const int64_t per_epoch = windows();
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t global = step * batch_ + b;
    prepare(global / per_epoch);
    const int64_t start = cached_offset_ + order_[global % per_epoch] * seq_;
    std::copy(tokens_.begin() + start, tokens_.begin() + start + seq_, inputs.begin() + b * seq_);
    std::copy(tokens_.begin() + start + 1, tokens_.begin() + start + seq_ + 1, targets.begin() + b * seq_);
  }
}

void even_windows(const std::vector<int32_t>& tokens, int64_t count, int64_t seq_len, std::vector<int32_t>& inputs,
                  std::vector<int32_t>& targets) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (count < 1 || n < seq_len + 1)
    throw Error("the validation text has " + std::to_string(n) + " tokens, too few for a window of " +
                std::to_string(seq_len));
  inputs.resize(static_cast<size_t>(count * seq_len));
  targets.resize(inputs.size());
  const int64_t span = n - seq_len - 1;  // last possible start
  for (int64_t w = 0; w < count; ++w) {
    const int64_t start = count == 1 ? 0 : span * w / (count - 1);
    std::copy(tokens.begin() + start, tokens.begin() + start + seq_len, inputs.begin() + w * seq_len);
    std::copy(tokens.begin() + start + 1, tokens.begin() + start + seq_len + 1, targets.begin() + w * seq_len);
  }
}

}  // namespace wgtrain::data
