// Training a Llama model end to end: data, tokenizer, batches, the training step recorded once and replayed,
// validation, checkpoints, the loss curve (CSV and PNG), resuming bit for bit; and fine-tuning a trained run or a
// Hugging Face model, fully (quantisation-aware, every weight) or with LoRA adapters on its frozen weights.
//
// A run lives in one directory:
//   checkpoint.safetensors  the trainable weights, optimizer moments and trainer state (wgtrain/checkpoint.h; a
//                           LoRA run's holds the adapters: wgtrain/lora.h)
//   tokenizer.json, tokenizer_config.json, generation_config.json
//                           the tokenizer (trained on the run's corpus, or the base model's); a LoRA run has none
//   config.json             the model config, for reading (not in a LoRA run)
//   adapter_model.safetensors, adapter_config.json
//                           a LoRA run's adapters as Hugging Face peft saves them
//   loss.csv, loss.png      step, tokens, lr, train and validation loss, elapsed seconds; and their plot
// The trainer holds the directory (wgtrain/run_dir.h) for its life: locked against a second run, a new run refused
// where a run is (unless `overwrite`), stale temporaries of killed saves removed; all checked before any work, as is
// whether the model fits the device and the machine (wgtrain/memory_estimate.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "wgtrain/device.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {

class Device;

struct TrainOptions {
  // Training from scratch: a preset (LlamaConfig::preset) or the path of a JSON config. Fine-tuning: a run
  // directory or a Hugging Face model directory.
  std::string model = "tiny";
  // A corpus (load_corpus): brown, fortunes, or a text file; fine-tuning also takes JSONL data (a directory with
  // train.jsonl and valid.jsonl, or one .jsonl file: wgtrain/dataset.h).
  std::string data = "brown";
  std::string out_dir = "runs/tiny-brown";
  int64_t steps = 0;           // the step to train up to; 0: 600 for a new run, a resumed run's own target
  // 0: chosen for the device: 16 sequences of the model's max_seq_len on a GPU; 8 of at most 64 tokens on a CPU
  // rasteriser (llvmpipe), where a step is about 50 times slower.
  int64_t batch_size = 0;
  int64_t seq_len = 0;
  double lr = 3e-3;            // peak; linear warm-up, then cosine decay to lr * min_lr_ratio at `steps`
  double min_lr_ratio = 0.1;
  int64_t warmup = 50;
  double weight_decay = 0.1;   // on matrices (embeddings, linears), not on norm gains
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  int64_t eval_every = 100;    // validation loss every this many steps (and at the end)
  int64_t eval_batches = 8;    // of batch_size windows each
  int64_t save_every = 200;    // checkpoint every this many steps (and at the end or on interrupt)
  uint64_t seed = 1;           // model initialisation and batch order
  bool resume = false;         // continue the run in out_dir from its checkpoint (its options win, but steps)
  bool overwrite = false;      // start over in an out_dir that holds a run, deleting that run's files first
  std::string init_from;       // fine-tune: start from the weights of this run directory, with its tokenizer

  // Fine-tuning `model` (a run or Hugging Face directory): "" (none), "full" (every weight, q4 linears as
  // quantisation-aware latents) or "lora" (adapters on the frozen weights).
  std::string fine_tune;
  LoraConfig lora;             // fine_tune "lora"
  bool train_norms = false;    // fine_tune "lora": the RMSNorm gains train too
  bool quantize = true;        // a Hugging Face model's block linears as q4gsw (QLoRA), else float32
  int64_t group_size = 32;     // their group size
  bool mask_prompt = false;    // JSONL data: the loss on completions / assistant turns only
  bool pack = false;           // JSONL data: examples packed into rows, else one padded example per row
  // The GEMMs' arithmetic, "fp32" or "mixed" (wgtrain/precision.h): the device must have been opened for it
  // (precision_options). Saved with the run; a resumed run keeps its own.
  std::string precision = "fp32";
};

struct StepInfo {
  int64_t step = 0, steps = 0;
  double loss = 0, lr = 0;
  double tokens_per_second = 0;  // this step's
  double elapsed = 0;            // seconds since the run (or its resumption) began
  std::optional<double> val_loss;  // at validation steps
  bool saved = false;
};

class Trainer {
 public:
  // Sets the run up: loads the corpus and splits it, trains or loads the tokenizer, tokenises, builds (or loads)
  // the model and the optimizer. `log` receives one-line progress messages about the set-up.
  Trainer(Device& device, TrainOptions options, std::function<void(const std::string&)> log = {});
  ~Trainer();

  enum class Outcome { Finished, Interrupted };
  // Trains until options.steps or until request_stop(); then saves a checkpoint. Calls on_step after each step.
  // Throws Error if the loss stops being finite (nothing is saved then).
  Outcome run(const std::function<void(const StepInfo&)>& on_step = {});
  // Asks run() to stop after the step in progress (safe from a signal handler).
  void request_stop() { stop_.store(true); }

  // Mean loss over the validation windows.
  double evaluate();
  // Writes the checkpoint (and the loss plot) now.
  void save();

  int64_t step() const { return step_; }
  double lr_at(int64_t step) const;
  const TrainOptions& options() const { return opt_; }
  const Llama& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const LoraAdapters* lora() const;  // a LoRA run's adapters, else nullptr
  // The device's memory when the training step had been recorded (model, optimizer, the step's buffers; before the
  // validation step's): its `peak` is the step's high-water mark, by category (wgtrain/device.h), counted from an
  // emptied pool (what loading the model left idle is given back first).
  const MemoryReport& step_memory() const;
  int64_t train_tokens() const;
  int64_t val_tokens() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Device& device_;
  TrainOptions opt_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<Llama> model_;
  Tokenizer tokenizer_;
  int64_t step_ = 0;
  std::atomic<bool> stop_{false};
};

}  // namespace wgtrain
