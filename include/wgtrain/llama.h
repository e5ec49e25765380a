// A Llama-style decoder whose block linears are 4-bit group-wise weights (q4gsw), trained as quantisation-aware
// training: token embedding, RMSNorm, rotary position embedding, causal multi-head attention with grouped KV heads,
// a SwiGLU MLP, a final RMSNorm and a tied or untied LM head.
//
// Every parameter lives in one float32 arena (and its gradient in a second), so one AdamW dispatch updates them
// all. A q4gsw linear keeps its float32 master ("latent") weight in the arena and its 4-bit codes and scales
// beside it: the forward reads the codes, the backward sends the weight gradient straight through to the latent,
// and requantize() refreshes the codes (and, by default, the scales) from the latents after each optimizer step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/autograd.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

class Device;

struct LlamaConfig {
  int64_t vocab_size = 2048;
  int64_t dim = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;      // grouped-query attention: n_heads must be a multiple of it
  int64_t ffn_dim = 0;         // 0: 8/3 dim rounded up to a multiple of 32
  int64_t max_seq_len = 128;   // rotary tables are made for this many positions
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  bool tie_embeddings = true;  // the LM head reuses the token embedding
  // q4gsw: which linears are 4-bit (the rest float32), their group size, and whether requantisation recomputes
  // each group's scale as max|latent| / 7 (true) or keeps the scales it started with.
  bool quantize_blocks = true;
  bool quantize_head = false;  // an untied head only
  int64_t group_size = 32;
  bool recompute_scales = true;

  int64_t head_dim() const { return dim / n_heads; }
  int64_t hidden_dim() const { return ffn_dim > 0 ? ffn_dim : (8 * dim / 3 + 31) / 32 * 32; }
  // Throws ArgumentError naming the field that does not fit.
  void validate() const;
  int64_t parameter_count() const;

  // JSON: every field above by name; missing fields keep their defaults, unknown ones are an error.
  std::string to_json() const;
  static LlamaConfig from_json(const std::string& text);
  // Built-in sizes: "tiny" (about 1M parameters, trains in minutes on a CPU), "small" (about 10M) and
  // "base" (about 50M). Throws ArgumentError listing them for any other name.
  static LlamaConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

class Llama {
 public:
  // One parameter: its place in the arenas, and whether it is a q4gsw latent (q4 >= 0: index into q4_weights()).
  struct Param {
    std::string name;   // Hugging Face Llama names: "layers.0.attention.wq.weight", "norm.weight", ...
    Shape shape;
    int64_t offset = 0;  // in elements, a multiple of 4
    bool decay = true;   // weight decay applies (matrices), or not (norm gains)
    int q4 = -1;
  };

  // A model with its parameters initialised from `seed`: normal(0, 0.02) weights (output projections scaled by
  // 1 / sqrt(2 n_layers)), unit norm gains; the q4 codes and scales are made from the latents.
  Llama(Device& device, const LlamaConfig& config, uint64_t seed);

  const LlamaConfig& config() const { return config_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Q4Weight>& q4_weights() const { return q4_; }
  int64_t arena_size() const { return values_.numel(); }
  const Tensor& values() const { return values_; }  // the parameter arena
  const Tensor& grads() const { return grads_; }    // the gradient arena
  Tensor value(size_t i) const;
  Tensor grad(size_t i) const;
  size_t index_of(const std::string& name) const;  // throws ArgumentError for an unknown name

  // Logits [B, T, V] for int32 tokens [B, T] (T <= max_seq_len), recorded on the autograd tape.
  autograd::Var logits(const Tensor& tokens) const;
  // Mean next-token cross-entropy: logits of tokens [B, T] against int32 targets [B * T] (negative: ignored).
  // With overwrite_logits the gradient is written over the logits buffer (training; saves B T V floats).
  autograd::Var loss(const Tensor& tokens, const Tensor& targets, bool overwrite_logits = true) const;

  void zero_grads();
  // Codes (and with recompute_scales, scales) from the current latents: after each optimizer step.
  void requantize();

  // The parameters as AdamW takes them, with moments m and v: arenas of arena_size() laid out as the parameters.
  // Norm gains get no weight decay; the rest the options' value.
  std::vector<ops::AdamWParam> adamw_params(const Tensor& m, const Tensor& v) const;
  // One training step: zeroed gradients, the loss of tokens against targets, the backward pass, the optimizer's
  // update (with the scalars last set on it) and requantisation. Returns the loss (a scalar tensor). Issued inside
  // Device::record, this is the step a training loop replays.
  Tensor train_step(const Tensor& tokens, const Tensor& targets, const ops::AdamW& optimizer);

 private:
  Device* device_;
  LlamaConfig config_;
  std::vector<Param> params_;
  std::vector<Q4Weight> q4_;
  Tensor values_, grads_;
  Tensor rope_cos_, rope_sin_;                // [max_seq_len, head_dim / 2]

  autograd::Var param(size_t i) const;
  autograd::Var linear(const autograd::Var& x, size_t i) const;
  autograd::Var rms_norm(const autograd::Var& x, size_t gain) const;
  autograd::Var rope(const autograd::Var& x, double scale) const;
};

// Deterministic, platform-independent random numbers for initialisation and data order (splitmix64).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // Box-Muller
 private:
  uint64_t state_;
};

}  // namespace wgtrain
