// The CPU reference of the Llama model and its training step, in float64: the forward pass and a backward pass
// derived by hand (not by the autograd tape, which it checks), AdamW, and q4gsw re-quantisation. Parameters are
// stored rounded to float32 between steps, as the device stores them, so that the two runs follow one trajectory.
#pragma once

#include <cstdint>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/llama.h"

namespace wgtrain::ref {

class LlamaRef {
 public:
  // Starts from the device model's current parameters, codes and scales (read back).
  explicit LlamaRef(const Llama& model);

  // Mean next-token cross-entropy of tokens [B, T] against targets [B * T] (negative: ignored); with grads, also
  // fills grads() (per parameter, in Llama::params() order; a q4 latent gets its dequantised weight's gradient).
  double loss(const std::vector<int32_t>& tokens, int64_t batch, int64_t time, const std::vector<int32_t>& targets,
              bool with_grads);
  const std::vector<std::vector<double>>& grads() const { return grads_; }

  // One training step as the trainer takes it: loss and gradients, AdamW (step counts from 1), re-quantisation.
  double train_step(const std::vector<int32_t>& tokens, int64_t batch, int64_t time,
                    const std::vector<int32_t>& targets, const ops::AdamWOptions& options, double lr, int64_t step);

  const std::vector<std::vector<double>>& values() const { return values_; }

 private:
  LlamaConfig config_;
  std::vector<Llama::Param> params_;
  std::vector<std::vector<double>> values_;    // float32-rounded parameters (latents for q4 linears)
  std::vector<std::vector<double>> weights_;   // what the forward multiplies by (dequantised for q4)
  std::vector<std::vector<float>> scales_;     // per q4 parameter
  std::vector<std::vector<double>> grads_, m_, v_;
  std::vector<double> cos_, sin_;              // rotary tables, float32-rounded as the device's

  void dequantize(size_t i, bool recompute_scales);
};

}  // namespace wgtrain::ref
