// Hugging Face model directories in and out: config.json, model.safetensors (or model.safetensors.index.json and
// its shards), generation_config.json and the tokenizer files, for LlamaForCausalLM (Llama 2, 3, 3.1, 3.2,
// TinyLlama, SmolLM), Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM without a sliding window.
//
// Import maps the checkpoint's tensors one to one onto the model's parameters (wgtrain names them as Hugging Face
// does), reading each from the memory-mapped shards, converting it from bf16 / f16 / f32 and uploading it before
// the next is read: a model is never held twice on the host. Anything in config.json that would make a different
// model than wgtrain computes (another architecture, rope type, activation, a sliding window, a quantised
// checkpoint) is an Error naming the field. Checked against `transformers`' logits and greedy generations on tiny
// checkpoints of every architecture (tests/fixtures/hf/, tests/hf_test.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "wgtrain/llama.h"

namespace wgtrain {
class Device;
class Tokenizer;
}  // namespace wgtrain

namespace wgtrain::hf {

struct ImportOptions {
  bool quantize = true;        // the block linears as q4gsw (else float32)
  int64_t group_size = 32;     // 32, 64 or 128
  bool quantize_head = false;  // an untied LM head as q4gsw too
  Trainable trainable = Trainable::None;
  int64_t max_seq_len = 0;     // 0: config.json's max_position_embeddings
};

// What import saw: the checkpoint's dtype(s), its files, and per kind of q4 linear (q_proj, ..., down_proj) the
// mean over layers of the relative quantisation error ||W - Q(W)|| / ||W||.
struct ImportReport {
  std::string dtypes;  // e.g. "BF16"
  int64_t files = 0;
  int64_t tensors = 0;
  std::map<std::string, double> quantisation_error;
};

// True when `dir` has a config.json and a model.safetensors or model.safetensors.index.json.
bool is_model_dir(const std::string& dir);

// config.json as a LlamaConfig (quantisation from the options). Throws Error naming the file and the field.
LlamaConfig read_config(const std::string& dir, const ImportOptions& options = {});

// The model of a Hugging Face directory, its weights loaded. Every tensor's presence, shape and dtype is checked
// before any is uploaded.
std::unique_ptr<Llama> load_model(Device& device, const std::string& dir, const ImportOptions& options = {},
                                  ImportReport* report = nullptr);

struct ExportOptions {
  std::string dtype = "bf16";                  // "bf16", "f16" or "f32"
  int64_t max_shard_bytes = int64_t(2) << 30;  // larger models are split into shards with an index
};

// Writes `model` as a Hugging Face directory that `transformers` loads: config.json, the weights (q4 linears
// dequantised: the weights the model computes with) with Hugging Face names, generation_config.json, and the
// tokenizer: the files of `tokenizer_dir` (tokenizer.json, tokenizer_config.json, special_tokens_map.json) copied
// when given, else `tokenizer` saved with a tokenizer_config.json made for it. Written into a temporary directory
// beside `out_dir`, then renamed: an existing `out_dir` is an Error unless `overwrite`.
void export_model(const Llama& model, const std::string& out_dir, const ExportOptions& options,
                  const Tokenizer* tokenizer, const std::string& tokenizer_dir = "", bool overwrite = false);

}  // namespace wgtrain::hf
