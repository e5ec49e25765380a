// The pieces of wgtrain's checkpoint files that the model checkpoints (checkpoint.cpp) and the LoRA checkpoints
// (src/lora) share: the checksum over every tensor byte, float32 arrays, and checked reads. Internal.
#pragma once

#include <string>

#include "wgtrain/safetensors.h"
#include "wgtrain/tensor.h"

namespace wgtrain::detail {

// FNV-1a over each tensor's name and bytes, in name order, as 16 hex digits (the "checksum" metadata).
std::string checkpoint_checksum(const safetensors::Contents& c);

// A float32 array of `shape` copied from host memory.
safetensors::Array f32_array(const float* data, const Shape& shape);

// The tensor `name` of a file read from `path`, which must have this dtype and shape; Error naming both otherwise.
const safetensors::Array& need_tensor(const safetensors::Contents& c, const std::string& path, const std::string& name,
                                      const char* dtype, const Shape& shape);

// Reads a whole file and checks that its "format" metadata is `format` and its data matches its checksum. `kind`
// names such files in messages ("checkpoint", "LoRA checkpoint"). Throws Error saying what is wrong.
safetensors::Contents read_checked(const std::string& path, const std::string& format, const std::string& kind);

}  // namespace wgtrain::detail
