// What training a model config needs in memory, from the config alone: checked before any corpus, tokenizer or
// device work, so that an oversized model is refused in words (which field, how many bytes, against which limit)
// rather than ending in std::bad_alloc or a device error hours later.
//
// Every figure counts only what certainly gets allocated (the buffers the model and one training step hold, the
// host copies a checkpoint save makes), so the estimate is a lower bound: a refusal is never wrong, and a config
// that passes can still run out where the real use exceeds it.
#pragma once

#include <cstdint>
#include <string>

#include "wgtrain/llama.h"

namespace wgtrain {

struct DeviceLimits;

struct MemoryEstimate {
  // In doubles: a config can ask for more than int64 holds (dim 1e9 squared), and the check must still say so.
  double parameters = 0;
  double arena_bytes = 0;   // one buffer: every trainable float32 weight (the gradients and each AdamW moment: one
                            // more buffer of this size each)
  double logits_bytes = 0;  // one buffer: a step's logits [batch * seq_len, vocab_size], float32
  double device_bytes = 0;  // weights, gradients, moments, q4 codes and scales, a step's activations and logits
  double host_bytes = 0;    // the peak of a checkpoint save: weights and moments downloaded, packed, serialised
  // The config fields behind most of the parameters, in words: "vocab_size 1000000000 x dim 128 (the embedding)".
  std::string dominant;
};

// Training `config` with batches of `batch` sequences of `seq_len` tokens.
MemoryEstimate estimate_training_memory(const LlamaConfig& config, int64_t batch, int64_t seq_len);

// Throws Error when the estimate cannot fit: a buffer larger than the device's max buffer size or max storage
// buffer binding (one buffer holds the whole trainable arena; the logits are another), or more host memory than the
// machine has (`host_memory`: bytes; on a CPU rasteriser, `device_on_host`, the device's buffers count there too).
void check_training_fits(const MemoryEstimate& estimate, const DeviceLimits& limits, double host_memory,
                         bool device_on_host);

// The machine's physical memory in bytes (0 when unknown).
double physical_memory_bytes();

// "1.5 GiB", "12.0 TiB": for messages.
std::string format_bytes(double bytes);

}  // namespace wgtrain
