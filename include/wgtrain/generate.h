// Text generation from a trained run or a Hugging Face model directory: the prompt (optionally formatted with the
// model's chat template) is prefilled in one pass through a KV cache, then one token a step, greedy or sampled,
// until max_tokens or an end-of-sequence id. Greedy output equals `transformers`' greedy generate() token for token
// on the same float32 weights (tests/hf_test.cpp, on the fixtures of every architecture).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wgtrain/hf.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {

class Device;

struct GenerateOptions {
  std::string prompt;
  bool chat = false;       // format the prompt as one user message with the model's chat template
  std::string system;      // with chat: a system message first
  int64_t max_tokens = 100;
  double temperature = 0.8;  // 0: greedy
  int64_t top_k = 40;        // 0: the whole vocabulary
  uint64_t seed = 1;
  bool stop_at_eos = true;   // stop at any of the tokenizer's end-of-sequence ids
};

// What one generate() call did, for the user and for benchmarks.
struct GenerateStats {
  int64_t prompt_tokens = 0, new_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  bool stopped_at_eos = false;
};

class Generator {
 public:
  // `dir`: a run directory (checkpoint.safetensors + tokenizer.json) or a Hugging Face model directory (read with
  // `import`), with the LoRA adapters of `adapter_dir` (a peft directory: adapter_config.json and
  // adapter_model.safetensors) when given. Throws Error saying what is missing.
  Generator(Device& device, const std::string& dir, const hf::ImportOptions& import = {},
            const std::string& adapter_dir = "");
  // A model and tokenizer already in hand (the generator keeps references: they must outlive it).
  Generator(const Llama& model, const Tokenizer& tokenizer);
  ~Generator();

  // The prompt's ids as generate() feeds them (chat-formatted when asked).
  std::vector<int32_t> prompt_ids(const GenerateOptions& options) const;
  // New token ids after `prompt` (the prompt itself not included).
  std::vector<int32_t> generate_ids(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                    const std::function<void(int32_t)>& on_token = {});
  // The new text (the prompt not repeated); each piece goes to on_text as it completes (never a broken UTF-8
  // character).
  std::string generate(const GenerateOptions& options, const std::function<void(const std::string&)>& on_text = {});

  const GenerateStats& stats() const { return stats_; }
  const Llama& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const hf::ImportReport& import_report() const { return report_; }  // empty for a run directory

 private:
  std::unique_ptr<Llama> owned_model_;
  std::unique_ptr<Tokenizer> owned_tokenizer_;
  std::unique_ptr<LoraAdapters> adapters_;
  const Llama* model_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  hf::ImportReport report_;
  GenerateStats stats_;
};

// A run directory's model with frozen weights (codes and scales for its q4 linears): what generation and
// evaluation need. Throws Error naming the directory when it holds no usable checkpoint.
std::unique_ptr<Llama> load_run_model(Device& device, const std::string& run_dir, Trainable trainable);

}  // namespace wgtrain
