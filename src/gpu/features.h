// WebGPU features by name, in the numbering of the pinned Dawn library (webgpu_abi.h), and what wgtrain does with
// each: for `wgtrain devices`, which would otherwise print bare numbers.
#pragma once

#include <cstdint>
#include <string>

namespace wgtrain::gpu {

// "timestamp-query" for 3; "" for a value the pinned library does not define.
std::string feature_name(uint32_t value);
// What the feature enables in wgtrain, in a few words; "" for the features wgtrain has no use for (texture formats,
// rendering, Dawn's own internals).
std::string feature_use(uint32_t value);

}  // namespace wgtrain::gpu
