// The CPU reference of the Llama model and its training step, in float64: the forward pass and a backward pass
// derived by hand (not by the autograd tape, which it checks), AdamW, and q4gsw re-quantisation. Parameters are
// stored rounded to float32 between steps, as the device stores them, so that the two runs follow one trajectory.
// LoRA adapters (set_lora) add scale * B A (m * x) to the linears they target, with their gradients and AdamW.
#pragma once

#include <cstdint>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"

namespace wgtrain::ref {

// One LoRA linear in float64: y = x W^T + scale * ((m * x) A^T) B^T for x [n, in], W [out, in], A [r, in],
// B [out, r] and dropout multipliers m [n, in] (empty: none); and, for dy [n, out], the gradients of x, A and B.
struct LoraLinear {
  std::vector<double> y, dx, da, db;
};
LoraLinear lora_linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& a,
                       const std::vector<double>& b, const std::vector<double>& mask, int64_t n, int64_t in,
                       int64_t out, int64_t r, double scale, const std::vector<double>& dy);

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
  // AdamW's moments, per parameter (zero until a train_step, or as set_moments left them).
  const std::vector<std::vector<double>>& first_moments() const { return m_; }
  const std::vector<std::vector<double>>& second_moments() const { return v_; }
  // Takes AdamW's moments from the device's arenas (those given to Llama::adamw_params, read back), so that a
  // reference made from a model in mid-training takes the next step from exactly the device's state.
  void set_moments(const std::vector<float>& m_arena, const std::vector<float>& v_arena);

  // LoRA: the adapters' current values (read back), scales and dropout; from then on the forward adds them, the
  // backward fills their gradients, and train_step updates them with AdamW (the options' weight decay).
  struct Lora {
    size_t param = 0;
    int64_t in = 0, out = 0, rank = 0;
    double scale = 0;
    uint32_t stream = 0;  // the adapter's index: its dropout stream
    std::vector<double> a, b, ga, gb, ma, va, mb, vb;
  };
  void set_lora(const LoraAdapters& lora);
  // Dropout in the following passes as the device's training step draws it after lora.set_step(counter) (on), or
  // none (off: evaluation).
  void set_lora_dropout(bool on, uint64_t counter = 0);
  const std::vector<Lora>& lora() const { return lora_; }

 private:
  LlamaConfig config_;
  std::vector<Llama::Param> params_;
  std::vector<std::vector<double>> values_;    // float32-rounded parameters (latents for q4 linears)
  std::vector<std::vector<double>> weights_;   // what the forward multiplies by (dequantised for q4)
  std::vector<std::vector<float>> scales_;     // per q4 parameter
  std::vector<std::vector<double>> grads_, m_, v_;
  std::vector<double> cos_, sin_;              // rotary tables, float32-rounded as the device's

  std::vector<Lora> lora_;
  std::vector<int> lora_of_;  // parameter -> adapter, -1 for none
  double lora_p_ = 0;
  uint64_t lora_seed_ = 0, lora_counter_ = 0;
  bool lora_dropout_ = false;
  struct LoraSaved {
    std::vector<double> xd, u, mask;  // the dropped input, scale * (xd A^T), the multipliers (empty: none)
    int64_t n = 0;
  };
  std::vector<LoraSaved> lora_saved_;

  void dequantize(size_t i, bool recompute_scales);
  // y += the adapter's output for linear `param` of input x [n, in] (nothing without an adapter).
  void lora_forward(int64_t param, const std::vector<double>& x, std::vector<double>& y, int64_t n);
  // dx += the adapter's input gradient for dy [n, out]; the adapter's gradients accumulate.
  void lora_backward(int64_t param, const std::vector<double>& dy, std::vector<double>& dx);
};

}  // namespace wgtrain::ref
