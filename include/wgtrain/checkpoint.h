// Checkpoints: one safetensors file with a model's parameters (for a q4gsw linear: its float32 latent `X.weight`,
// its codes `X.qweight` as bytes [N, ceil(K/2)] and its scales `X.scales` [ceil(K/group), N]), optionally the
// optimizer's moments (`optimizer.m.NAME`, `optimizer.v.NAME`), and as metadata the model config, the trainer's
// state and a checksum of every tensor byte. Written atomically: a temporary file, fsync, rename.
#pragma once

#include <string>

#include "wgtrain/llama.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

struct CheckpointInfo {
  LlamaConfig config;
  std::string state;  // the trainer's state as it saved it (JSON), empty if none
  bool has_optimizer = false;
};

// Saves the model (and the moments m, v: arenas laid out as the model's parameters, when both are given).
void save_checkpoint(const std::string& path, const Llama& model, const Tensor* m, const Tensor* v,
                     const std::string& state_json);

// Reads a checkpoint's config and state, checking its format and checksum. Throws Error saying what is wrong.
CheckpointInfo read_checkpoint_info(const std::string& path);

// Loads a checkpoint into a model built with its config (and the moments into m and v, when given: then the
// checkpoint must hold them). Every tensor's presence, dtype and shape is checked first, so a bad file leaves the
// model untouched. Throws Error naming the file and what does not fit.
CheckpointInfo load_checkpoint(const std::string& path, Llama& model, const Tensor* m, const Tensor* v);

}  // namespace wgtrain
