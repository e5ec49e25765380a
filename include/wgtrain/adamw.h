// AdamW on the GPU, in place, for any number of parameters at once.
#pragma once

#include <cstdint>
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

// One optimizer step (step counts from 1) over every parameter: as torch.optim.AdamW, operation for operation.
// Parameters whose four tensors share buffers with the others' (views into flat arenas) go in one dispatch; each
// distinct set of buffers takes one. The step's scalars travel as uniforms: no read-back.
void adamw_step(const std::vector<AdamWParam>& params, const AdamWOptions& options, int64_t step);

}  // namespace wgtrain::ops
