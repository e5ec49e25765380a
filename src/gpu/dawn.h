// Loading the Dawn library (the pinned prebuilt libwebgpu_wrapper.so) and resolving the entry points wgtrain uses.
#pragma once

#include <string>

#include "gpu/webgpu_abi.h"

namespace wgtrain::gpu {

// The library's path: $WGTRAIN_DAWN_LIBRARY if set, else the copy scripts/setup.sh placed in the source tree's
// .deps/ (its path is compiled in), else "libwebgpu_wrapper.so" on the loader's search path.
std::string dawn_library_path();

// Loads the library once and resolves every function of WGPU_ABI_FUNCTIONS; throws wgtrain::Error naming the path
// and the missing symbols if that fails. Thread-safe.
const webgpu::Api& dawn();

}  // namespace wgtrain::gpu
