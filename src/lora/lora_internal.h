// Shared by the LoRA sources: which linears a config selects, and their module names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wgtrain/llama.h"
#include "wgtrain/lora.h"

namespace wgtrain::lora_detail {

// "model.layers.3.self_attn.q_proj", "model.layers.3.mlp.up_proj": Hugging Face's module names.
std::string module_name(int64_t layer, const std::string& linear);

struct Selection {
  size_t param;        // the linear's weight in model.params()
  std::string module;  // its module name
  int64_t layer;
};
// The linears `config` selects in `model`, in parameter order, with PEFT's matching rules. Throws ArgumentError for
// an invalid config, a target that matches nothing, or one that reaches the LM head.
std::vector<Selection> select(const Llama& model, const LoraConfig& config);

}  // namespace wgtrain::lora_detail
