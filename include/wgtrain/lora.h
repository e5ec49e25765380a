// LoRA and QLoRA: low-rank adapters on the linears of a frozen Llama (its block linears usually 4-bit q4gsw), in the
// layout and file format of Hugging Face `peft`.
//
// Each targeted linear y = W x (+ b) becomes y = W x (+ b) + scale * B A dropout(x), with A [r, in] and B [out, r]
// trained and W frozen; scale = alpha / r (alpha / sqrt(r) with rsLoRA). A starts as PEFT draws it (Kaiming-uniform
// with a = sqrt(5): uniform(-1/sqrt(in), 1/sqrt(in))), B at zero, so training starts from the base model exactly.
// The adapters join the model through its LinearHook; every A and B lives in one float32 arena (and their gradients
// in a second), so one AdamW dispatch updates them all.
//
// A LoRA run, in order (the trainer's side):
//   Llama model(device, config, ..., Trainable::None)   // or Trainable::Norms to train the RMSNorm gains too
//   LoraAdapters lora(model, lora_config);              // or load_peft(model, dir) to continue a PEFT adapter
//   model.set_linear_hook(&lora);
//   Tensor lm = zeros(lora.arena_size()), lv = ..., mm = zeros(model.arena_size()), mv = ...;
//   std::vector<ops::AdamWParam> ps = model.adamw_params(mm, mv);   // empty with Trainable::None
//   append lora.adamw_params(lm, lv) to ps;  ops::AdamW opt(ps, options);
//   Recording step = device.record([&] { loss = lora.train_step(model, tokens, targets, opt); });
//   Recording eval = device.record([&] { eval_loss = model.loss(...).value(); });   // no dropout outside train_step
//   each step: write tokens/targets; opt.set_step(step, lr); lora.set_step(step); step.replay();
//   save_lora_checkpoint(...) / load_lora_checkpoint(...) to resume; save_peft(...) for Hugging Face;
//   fuse(model, lora) then hf::export_model for a merged model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/autograd.h"
#include "wgtrain/llama.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

struct LoraConfig {
  int64_t rank = 8;      // r
  double alpha = 16;     // lora_alpha
  double dropout = 0.0;  // on the adapter's input, in training steps only; 0: no dropout op at all
  // Hugging Face module names: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj. PEFT's Llama default.
  // A name matches a linear whose module name ends in "." + name, as PEFT matches a list.
  std::vector<std::string> targets = {"q_proj", "v_proj"};
  // PEFT's target_modules given as one string: a regular expression (ECMAScript, as std::regex reads it; the common
  // Python patterns read the same) that must match a whole module name such as "model.layers.3.mlp.up_proj". Used
  // instead of `targets` when not empty; "all-linear" means every block linear.
  std::string target_regex;
  int64_t layers = -1;                  // -1: every layer; N: the last N (MLX-LM's --num-layers)
  std::vector<int64_t> layer_indices;   // PEFT's layers_to_transform: these layers (overrides `layers` if not empty)
  bool rslora = false;                  // scale alpha / sqrt(r) (PEFT's use_rslora)
  // PEFT's rank_pattern and alpha_pattern: per-module r and alpha, the first pattern (in order) that matches the end
  // of a module name (Python: re.match(rf"(.*\.)?({key})$", name)) wins.
  std::vector<std::pair<std::string, int64_t>> rank_pattern;
  std::vector<std::pair<std::string, double>> alpha_pattern;
  uint64_t seed = 0;                    // A's initial values and the dropout masks
  std::string base_model;               // written as base_model_name_or_path (a path or hub id), may be empty

  // Throws ArgumentError naming the field that is wrong (rank < 1, alpha <= 0, dropout outside [0, 1), an unknown
  // module name, layers < -1 or 0, a bad regex).
  void validate() const;
  // JSON with every field (wgtrain's own form, kept in adapter checkpoints); from_json takes exactly that form.
  std::string to_json() const;
  static LoraConfig from_json(const std::string& text);
  static const std::vector<std::string>& module_names();  // the seven block linears
};

// The adapters of one model. The model must outlive them; the object stays where it is (the model holds its address
// as its hook), so it is neither copied nor moved.
class LoraAdapters final : public LinearHook {
 public:
  struct Adapter {
    size_t param = 0;     // the linear's weight in model.params()
    std::string module;   // its module name, e.g. "model.layers.3.self_attn.q_proj"
    int64_t layer = 0;
    int64_t in = 0, out = 0, rank = 0;
    double alpha = 0, scale = 0;
    int64_t a_offset = 0, b_offset = 0;  // into the arenas, multiples of 4
  };

  // Adapters on the linears `config` selects, A drawn from config.seed, B zero. Throws ArgumentError for a config
  // that is invalid or selects nothing in this model (naming the target), or that targets lm_head.
  LoraAdapters(const Llama& model, const LoraConfig& config);
  LoraAdapters(const LoraAdapters&) = delete;
  LoraAdapters& operator=(const LoraAdapters&) = delete;

  const LoraConfig& config() const { return config_; }
  const Llama& model() const { return *model_; }
  const std::vector<Adapter>& adapters() const { return adapters_; }
  // The adapter on a model parameter (its index in adapters()), if any.
  std::optional<size_t> adapter_of(size_t param) const;
  int64_t arena_size() const { return arena_size_; }
  const Tensor& values() const { return values_; }  // every A and B
  const Tensor& grads() const { return grads_; }
  Tensor a(size_t i) const;  // views into the arenas: A [r, in], B [out, r] and their gradients
  Tensor b(size_t i) const;
  Tensor grad_a(size_t i) const;
  Tensor grad_b(size_t i) const;
  // PEFT's tensor names: "base_model.model.<module>.lora_A.weight" and "...lora_B.weight".
  std::string name_a(size_t i) const;
  std::string name_b(size_t i) const;

  // y + scale * B A dropout(x) for a targeted linear, y itself for any other (LinearHook).
  autograd::Var apply(const Llama& model, size_t param, const autograd::Var& x,
                      const autograd::Var& y) const override;

  void zero_grads();
  // AdamW's view of A and B, with moments m and v: arenas of arena_size(). Weight decay: the optimizer options' value
  // (PEFT under Hugging Face's Trainer decays LoRA matrices too; MLX-LM uses none: pass weight_decay 0 for that).
  std::vector<ops::AdamWParam> adamw_params(const Tensor& m, const Tensor& v) const;

  // Dropout is applied only while a training step is issued (train_step, or between set_training(true) and
  // set_training(false)): the choice is made when ops are issued, so it is fixed in a recording.
  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }
  // The dropout masks' counter: a value unique to each training forward pass (the step; with gradient accumulation
  // step * micro_batches + micro_batch). Written to the device, ordered before later replays: call it before each
  // replay, outside Device::record. Masks are a function of (config.seed, counter, adapter, element): a resumed run
  // repeats them.
  void set_step(uint64_t counter);

  // One training step with the adapters: zeroed adapter (and model) gradients, the loss with dropout, the backward
  // pass and `optimizer`'s update (built over adamw_params, plus the model's own when its norms train). The model's
  // hook must be this object. Returns the loss (a scalar tensor); issue it inside Device::record and replay it.
  Tensor train_step(Llama& model, const Tensor& tokens, const Tensor& targets, const ops::AdamW& optimizer);

  // Used by the loaders: the adapters a file describes, A and B uninitialised (the file fills them).
  struct NoInit {};
  LoraAdapters(const Llama& model, const LoraConfig& config, NoInit);

 private:
  const Llama* model_;
  LoraConfig config_;
  std::vector<Adapter> adapters_;
  std::vector<int> by_param_;  // model parameter -> adapter index, -1 for none
  int64_t arena_size_ = 0;
  Tensor values_, grads_;
  Tensor dropout_key_;  // int32 [4]: ops::dropout_key(seed, counter)
  bool training_ = false;

  void build();
};

// ---- files ----------------------------------------------------------------------------------------------------------

// Writes `dir`/adapter_model.safetensors and `dir`/adapter_config.json as `peft` writes a LoRA adapter of a
// LlamaForCausalLM (and the Qwen2, Qwen3 and Mistral classes): float32 tensors
// "base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight" [r, in] and ".lora_B.weight" [out, r], the
// config with peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, target_modules, layers_to_transform, ... When the
// model's norm gains train (Trainable::Norms) they are saved as PEFT's modules_to_save (input_layernorm,
// post_attention_layernorm, norm; q_norm and k_norm where the model has them), as peft saves such modules. The
// directory is created if needed; each file is written atomically.
void save_peft(const LoraAdapters& lora, const std::string& dir);

// Loads a LoRA adapter that `peft` (or save_peft) wrote, for `model`. adapter_config.json is read as peft reads it:
// what wgtrain implements is honoured (target_modules as a list or a regex string, layers_to_transform,
// layers_pattern "layers", use_rslora, rank_pattern, alpha_pattern, modules_to_save naming norm modules, whose
// gains are written into the model), fields that change nothing at inference (initialisation, dropout, task type,
// versions) are accepted, and anything else that would compute a different model (use_dora, bias other than
// "none", fan_in_fan_out, other modules_to_save, layer_replication, ...) is an Error naming the field. Every tensor's
// name and shape is checked against the model before any is uploaded; F32, F16, BF16 and F64 are read.
std::unique_ptr<LoraAdapters> load_peft(Llama& model, const std::string& dir);

// ---- merging --------------------------------------------------------------------------------------------------------

// The weight a linear computes with, adapters merged: W + scale * B A on the host (W dequantised for a q4 linear), or
// the model's weight unchanged for a parameter without an adapter.
std::vector<float> merged_weight(const Llama& model, const LoraAdapters& lora, size_t param);
// A new model (Trainable::None) whose weights are the merged weights, every linear float32 (quantize_blocks and
// quantize_head off: a q4 base is dequantised), for hf::export_model to write as a plain Hugging Face model. Its
// logits equal those of `model` with `lora` as its hook to float32 rounding.
std::unique_ptr<Llama> fuse(const Llama& model, const LoraAdapters& lora);

// ---- resuming -------------------------------------------------------------------------------------------------------

// A LoRA run's checkpoint in one safetensors file: every A and B (PEFT's names), their AdamW moments
// ("optimizer.m.NAME", "optimizer.v.NAME"), the model's trainable parameters (norm gains with Trainable::Norms) and
// their moments, and as metadata the LoRA config, the model config, the caller's state JSON and a checksum of every
// tensor byte. Written atomically (a temporary file, fsync, rename), as checkpoints are. The moments are arenas laid
// out as lora.adamw_params and model.adamw_params take them (the model's may be null when it has no arena). The model
// must be Trainable::None or Trainable::Norms (a whole model that trains is save_checkpoint's).
void save_lora_checkpoint(const std::string& path, const Llama& model, const LoraAdapters& lora,
                          const Tensor& lora_m, const Tensor& lora_v, const Tensor* model_m, const Tensor* model_v,
                          const std::string& state_json);
// Reads the LoRA config a checkpoint was saved with (to build the adapters before loading), checking the file.
LoraConfig read_lora_checkpoint_config(const std::string& path);
// Loads a checkpoint into adapters built with its config on a model of its config (and the same Trainable), and
// the moments into the given arenas. Every tensor is checked before anything is written. Returns the state JSON.
std::string load_lora_checkpoint(const std::string& path, Llama& model, LoraAdapters& lora, const Tensor& lora_m,
                                 const Tensor& lora_v, const Tensor* model_m, const Tensor* model_v);

}  // namespace wgtrain
