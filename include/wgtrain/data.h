// Training data: a deterministic train/validation split of a corpus, and the batches a run draws from its tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wgtrain::data {

struct TextSplit {
  std::string train, val;
};

// Cuts the text into blocks of about `block` bytes (each ending at a line end) and sends every `every`-th block
// to validation (5% by default): the split samples the whole corpus, not one end of it, and is the same every run.
TextSplit split_text(const std::string& text, int every = 20, size_t block = 8192);

// Windows of seq_len + 1 tokens (inputs, and the same shifted by one as targets) drawn from a token stream in
// epochs: each epoch starts the windows at a new offset and visits all of them in a new order. Batch `step` is a
// function of (seed, step) alone, so a resumed run draws exactly the batches an uninterrupted one would.
class BatchSampler {
 public:
  BatchSampler(std::vector<int32_t> tokens, int64_t batch, int64_t seq_len, uint64_t seed);

  // The batch of training step `step` (from 0): inputs [batch * seq_len] and targets [batch * seq_len].
  void batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const;
  // Windows per epoch (at offset 0).
  int64_t windows() const;
  int64_t tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::vector<int32_t> tokens_;
  int64_t batch_, seq_;
  uint64_t seed_;
  // The window order of one epoch, kept for the epoch in use.
  mutable int64_t cached_epoch_ = -1;
  mutable int64_t cached_offset_ = 0;
  mutable std::vector<int64_t> order_;
  void prepare(int64_t epoch) const;
};

// A fixed set of `count` windows spread evenly over a token stream (validation: the same windows every time).
// Fills inputs and targets [count * seq_len]; throws Error if the stream is shorter than one window.
void even_windows(const std::vector<int32_t>& tokens, int64_t count, int64_t seq_len, std::vector<int32_t>& inputs,
                  std::vector<int32_t>& targets);

}  // namespace wgtrain::data
