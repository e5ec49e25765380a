// A Llama-family decoder (Llama 2/3, Qwen2, Qwen3, Mistral, SmolLM, TinyLlama: include/wgtrain/hf.h imports them)
// whose block linears are 4-bit group-wise weights (q4gsw): token embedding, RMSNorm, rotary position embedding
// (optionally Llama 3 scaled), causal multi-head attention with grouped KV heads (optional q/k/v biases, optional
// per-head q/k norms), a SwiGLU MLP, a final RMSNorm and a tied or untied LM head.
//
// Trainable parameters live in one float32 arena (and their gradients in a second), so one AdamW dispatch updates
// them all. A trainable q4gsw linear keeps its float32 master ("latent") weight in the arena and its 4-bit codes
// and scales beside it: the forward reads the codes, the backward sends the weight gradient straight through to
// the latent, and requantize() refreshes the codes (and, by default, the scales) after each optimizer step
// (quantisation-aware training). A frozen q4gsw linear (inference, LoRA) is its codes and scales alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/autograd.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

class Device;

// Llama 3's frequency-dependent rope scaling ("rope_type": "llama3"): long wavelengths slowed by `factor`, short
// ones kept, the band between interpolated, as Hugging Face computes the inverse frequencies.
struct RopeScaling {
  std::string type = "none";  // "none" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

struct LlamaConfig {
  int64_t vocab_size = 2048;
  int64_t dim = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;      // grouped-query attention: n_heads must be a multiple of it
  int64_t head_dim_override = 0;  // 0: dim / n_heads (Qwen3 gives its own, which need not equal it)
  int64_t ffn_dim = 0;         // 0: 8/3 dim rounded up to a multiple of 32
  int64_t max_seq_len = 128;   // rotary tables are made for this many positions
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_embeddings = true;  // the LM head reuses the token embedding
  bool qkv_bias = false;       // biases on the q, k and v projections (Qwen2; Llama's attention_bias)
  bool o_bias = false;         // a bias on the output projection (Llama's attention_bias)
  bool qk_norm = false;        // RMSNorm over each head of q and k before the rotation (Qwen3)
  // The Hugging Face class this model is (export writes it): LlamaForCausalLM, Qwen2ForCausalLM,
  // Qwen3ForCausalLM or MistralForCausalLM.
  std::string architecture = "LlamaForCausalLM";
  // q4gsw: which linears are 4-bit (the rest float32), their group size, and whether requantisation recomputes
  // each group's scale as max|latent| / 7 (true) or keeps the scales it started with.
  bool quantize_blocks = true;
  bool quantize_head = false;  // an untied head only
  int64_t group_size = 32;
  bool recompute_scales = true;

  int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : dim / n_heads; }
  int64_t q_dim() const { return n_heads * head_dim(); }
  int64_t kv_dim() const { return n_kv_heads * head_dim(); }
  int64_t hidden_dim() const { return ffn_dim > 0 ? ffn_dim : (8 * dim / 3 + 31) / 32 * 32; }
  // Throws ArgumentError naming the field that does not fit.
  void validate() const;
  int64_t parameter_count() const;

  // JSON: every field above by name. Unknown fields, and non-integers where integers belong, are errors. Missing
  // fields keep their defaults and are listed in `defaulted` when given (a caller says which it filled in).
  std::string to_json() const;
  static LlamaConfig from_json(const std::string& text, std::vector<std::string>* defaulted = nullptr);
  // Built-in sizes: "tiny" (about 1M parameters, trains in minutes on a CPU), "small" (about 10M) and
  // "base" (about 50M). Throws ArgumentError listing them for any other name.
  static LlamaConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

// The rotary tables [max_seq_len, head_dim / 2] as Hugging Face computes them (inverse frequencies in float32,
// rope scaling applied, angle = float32(position * frequency)), cos and sin of each angle rounded to float32.
void rope_tables(const LlamaConfig& config, std::vector<float>& cos, std::vector<float>& sin);

// Which of a model's own weights train. A frozen weight has no gradient and no optimizer state; a frozen q4gsw
// linear keeps only its codes and scales (no float32 copy).
enum class Trainable {
  All,    // every weight (pre-training, full fine-tuning; q4 linears train their float32 latents)
  Norms,  // the RMSNorm gains only (LoRA with trainable norms)
  None,   // nothing (inference, LoRA)
};

// Keys and values of every layer for generation: prefill writes the prompt's, each decode step one position more.
struct KVCache {
  int64_t batch = 0, capacity = 0;
  int64_t length = 0;        // positions held
  std::vector<Tensor> k, v;  // per layer [batch, n_kv_heads, capacity, head_dim]
};

class Llama;

// Adds to the output of a model's linears (LoRA adapters): called for every linear with its parameter index, its
// input and its output; returns the output to use.
class LinearHook {
 public:
  virtual ~LinearHook() = default;
  virtual autograd::Var apply(const Llama& model, size_t param, const autograd::Var& x,
                              const autograd::Var& y) const = 0;
};

class Llama {
 public:
  enum class Kind { Embedding, Norm, Linear, Bias, Head };

  // One parameter. Trainable ones live in the arenas (value, gradient, AdamW moments); frozen ones in tensors of
  // their own, or, for a frozen q4gsw linear, only as its codes and scales.
  struct Param {
    std::string name;   // Hugging Face names: "model.layers.0.self_attn.q_proj.weight", "lm_head.weight", ...
    Shape shape;
    Kind kind = Kind::Linear;
    bool trainable = true;
    int64_t offset = -1;  // trainable: in elements into the arenas, a multiple of 4
    bool decay = true;    // weight decay applies (matrices), or not (norm gains, biases)
    int q4 = -1;          // a q4gsw linear: index into q4_weights()
    bool has_float() const { return trainable || q4 < 0; }
  };

  // A model with its parameters initialised from `seed`: normal(0, 0.02) weights (output projections scaled by
  // 1 / sqrt(2 n_layers)), unit norm gains, zero biases; the q4 codes and scales are made from those weights.
  Llama(Device& device, const LlamaConfig& config, uint64_t seed, Trainable trainable = Trainable::All);
  // A model whose weights are undefined until load_weights() (or a checkpoint) sets them: for loading, where
  // random values would be made only to be overwritten.
  struct NoInit {};
  Llama(Device& device, const LlamaConfig& config, NoInit, Trainable trainable = Trainable::All);

  const LlamaConfig& config() const { return config_; }
  Trainable trainable() const { return trainable_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Q4Weight>& q4_weights() const { return q4_; }
  int64_t arena_size() const { return arena_size_; }  // trainable elements, padded
  // Device bytes of the parameters: the trainable arena, q4 codes and scales, frozen float32 weights (what the
  // memory report counts as weights: wgtrain/device.h MemoryCategory).
  uint64_t weight_bytes() const;
  const Tensor& values() const { return values_; }  // the trainable parameters' arena (undefined when none)
  const Tensor& grads() const { return grads_; }    // their gradients
  Tensor value(size_t i) const;  // a float32 weight (throws for a frozen q4 linear: see host_value)
  Tensor grad(size_t i) const;   // a trainable parameter's gradient
  // A weight as the forward uses it, on the host: the float32 values, or a q4 linear's dequantised codes.
  std::vector<float> host_value(size_t i) const;
  size_t index_of(const std::string& name) const;  // throws ArgumentError for an unknown name
  std::optional<size_t> find(const std::string& name) const;

  // Sets the weights from host float32 data, fetched one parameter at a time (so that a large model is never
  // held twice on the host): `fetch(param)` returns numel(param.shape) values. q4 linears are quantised from
  // them (scales recomputed); `on_quantised(param, relative_error)` hears each one's ||W - Q(W)|| / ||W||.
  void load_weights(const std::function<std::vector<float>(const Param&)>& fetch,
                    const std::function<void(const Param&, double)>& on_quantised = {});

  // Logits [B, T, V] for int32 tokens [B, T] (T <= max_seq_len), recorded on the autograd tape.
  autograd::Var logits(const Tensor& tokens) const;
  // Mean next-token cross-entropy: logits of tokens [B, T] against int32 targets [B * T] (negative: ignored).
  // With overwrite_logits the gradient is written over the logits buffer (training; saves B T V floats).
  autograd::Var loss(const Tensor& tokens, const Tensor& targets, bool overwrite_logits = true) const;

  // Generation: a cache for `batch` sequences of up to `capacity` positions (<= max_seq_len), and the logits
  // [B, V] of the last of `tokens` [B, T] given the cache's positions before them, which it then extends by T.
  // Any call may pass several tokens (a prompt, or more text after earlier calls): the fused attention lets the
  // new positions see the cached ones and each other causally.
  KVCache make_cache(int64_t batch, int64_t capacity) const;
  Tensor next_logits(const Tensor& tokens, KVCache& cache) const;

  void zero_grads();
  // Codes (and with recompute_scales, scales) from the current latents of the trainable q4 linears: after each
  // optimizer step.
  void requantize();

  // The trainable parameters as AdamW takes them, with moments m and v: arenas of arena_size() laid out as the
  // parameters. Norm gains and biases get no weight decay; the rest the options' value.
  std::vector<ops::AdamWParam> adamw_params(const Tensor& m, const Tensor& v) const;
  // One training step: zeroed gradients, the loss of tokens against targets, the backward pass, the optimizer's
  // update (with the scalars last set on it) and requantisation. Returns the loss (a scalar tensor). Issued inside
  // Device::record, this is the step a training loop replays.
  Tensor train_step(const Tensor& tokens, const Tensor& targets, const ops::AdamW& optimizer);

  // Adapters added to the linears' outputs (LoRA); nullptr for none. The hook must outlive its use.
  void set_linear_hook(const LinearHook* hook) { hook_ = hook; }
  const LinearHook* linear_hook() const { return hook_; }
  Device& device() const { return *device_; }

 private:
  struct Layer {
    size_t attn_norm, q, k, v, o, mlp_norm, gate, up, down;
    std::optional<size_t> q_bias, k_bias, v_bias, o_bias, q_norm, k_norm;
  };
  Device* device_;
  LlamaConfig config_;
  Trainable trainable_;
  std::vector<Param> params_;
  std::vector<Layer> layers_;
  size_t embedding_ = 0, final_norm_ = 0;
  std::optional<size_t> head_;
  std::vector<Q4Weight> q4_;
  std::vector<Tensor> frozen_;  // per parameter: a frozen float32 weight's own tensor
  int64_t arena_size_ = 0;
  Tensor values_, grads_;
  Tensor rope_cos_, rope_sin_;                // [max_seq_len, head_dim / 2]
  const LinearHook* hook_ = nullptr;

  void build();  // parameter layout, arenas, q4 buffers, rotary tables
  autograd::Var param(size_t i) const;
  autograd::Var linear(const autograd::Var& x, size_t i, std::optional<size_t> bias = std::nullopt) const;
  // residual + linear(x, i, bias): one node where the linear is a q4 one without bias or hook.
  autograd::Var residual_linear(const autograd::Var& residual, const autograd::Var& x, size_t i,
                                std::optional<size_t> bias) const;
  autograd::Var rms_norm(const autograd::Var& x, size_t gain) const;
  // The hidden states [B, T, dim] after the final norm; with a cache, attention also reads (and the call
  // extends) the cached positions.
  autograd::Var hidden(const Tensor& tokens, KVCache* cache) const;
  autograd::Var head(const autograd::Var& x) const;
};

}  // namespace wgtrain
