// AdamW on the GPU, in place, for any number of parameters at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "wgtrain/tensor.h"

namespace wgtrain::ops {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// One parameter's tensors: all float32, contiguous, of one shape. weight_decay < 0 takes the options' value
// (0 for norms and biases, typically).
struct AdamWParam {
  Tensor param, grad, m, v;
  double weight_decay = -1;
};

// AdamW over a fixed list of parameters, as torch.optim.AdamW computes it, operation for operation. Parameters whose
// four tensors share buffers with the others' (views into flat arenas) go in one dispatch; each distinct set of
// buffers takes one. Built for a training loop that records its update once and replays it (Device::record): the
// segment tables are made here, once, and each step's scalars (learning rate, bias corrections, decay factors)
// live in a small device buffer that set_step rewrites, so a recorded update reads the current step's values.
class AdamW {
 public:
  // Checks every parameter (float32, contiguous, one shape per param/grad/m/v, four distinct buffers), and sets
  // the scalars of step 1 with options.lr.
  AdamW(std::vector<AdamWParam> params, AdamWOptions options);
  ~AdamW();
  AdamW(AdamW&&) noexcept;
  AdamW& operator=(AdamW&&) noexcept;

  // Sets the scalars of step `step` (counting from 1) with learning rate `lr` (the options' beta1, beta2, eps and
  // weight decays stay). A queue write in order after the work recorded so far: no wait.
  void set_step(int64_t step, double lr);
  // Records the update of every parameter with the scalars last set.
  void update() const;
  const AdamWOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One optimizer step (step counts from 1) over every parameter, with options.lr: an AdamW used once.
void adamw_step(const std::vector<AdamWParam>& params, const AdamWOptions& options, int64_t step);

}  // namespace wgtrain::ops
