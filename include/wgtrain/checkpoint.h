// Checkpoints: one safetensors file with a model's parameters (for a q4gsw linear: its float32 latent `X.weight`,
// its codes `X.qweight` as bytes [N, ceil(K/2)] and its scales `X.scales` [ceil(K/group), N]), optionally the
// optimizer's moments (`optimizer.m.NAME`, `optimizer.v.NAME`), and as metadata the model config, the trainer's
// state, the hash of the tokenizer.json the model was trained with and a checksum of every tensor byte. Written
// atomically: a temporary file, fsync, rename.
#pragma once

#include <string>
#include <vector>

#include "wgtrain/llama.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

struct CheckpointInfo {
  LlamaConfig config;
  std::string state;  // the trainer's state as it saved it (JSON), empty if none
  bool has_optimizer = false;
  // tokenizer_file_hash() of the tokenizer.json the model was trained with; empty in checkpoints written before
  // wgtrain bound the two (they load as before, unchecked).
  std::string tokenizer_hash;
};

// Saves the model (and the moments m, v: arenas laid out as the model's parameters, when both are given).
// `tokenizer_hash` (tokenizer_file_hash() of the run's tokenizer.json) binds the checkpoint to its tokenizer.
void save_checkpoint(const std::string& path, const Llama& model, const Tensor* m, const Tensor* v,
                     const std::string& state_json, const std::string& tokenizer_hash = "");

// Reads a checkpoint's config and state, checking its format and checksum. Throws Error saying what is wrong.
CheckpointInfo read_checkpoint_info(const std::string& path);
// The same from the file's header alone (no checksum over the data): cheap, for checks before any work starts.
CheckpointInfo peek_checkpoint_info(const std::string& path);

// A tokenizer.json's identity: FNV-1a over the file's bytes, as "fnv1a64:" and 16 hex digits. A different
// vocabulary, merges or special tokens give a different hash (and so does re-formatting the file).
std::string tokenizer_file_hash(const std::string& tokenizer_path);
// Throws Error when `info` (read from `checkpoint_path`) is bound to a tokenizer other than the file at
// `tokenizer_path`. A checkpoint without a hash passes.
void check_tokenizer_binding(const CheckpointInfo& info, const std::string& checkpoint_path,
                             const std::string& tokenizer_path);

// The files of the run directory `run_dir` belong with its checkpoint (`info`): its config.json describes the
// checkpoint's model and its tokenizer.json is the one the checkpoint is bound to (each checked when present).
// Files mixed from two runs would otherwise fail deep inside (a token id past the embedding) or, worse, run on with
// the wrong text. Throws Error saying which file does not belong.
void check_run_files(const std::string& run_dir, const CheckpointInfo& info);

// The fields in which two model configs differ, as "dim 128 vs 256" (a's value first); empty when they are equal.
std::vector<std::string> config_differences(const LlamaConfig& a, const LlamaConfig& b);

// Loads a checkpoint into a model built with its config (and the moments into m and v, when given: then the
// checkpoint must hold them). Every tensor's presence, dtype and shape is checked first, so a bad file leaves the
// model untouched. Throws Error naming the file and what does not fit.
CheckpointInfo load_checkpoint(const std::string& path, Llama& model, const Tensor* m, const Tensor* v);

}  // namespace wgtrain
