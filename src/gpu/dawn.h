// Loading the Dawn library (the pinned prebuilt: npm webgpu@0.4.0's dist/linux-x64.dawn.node, a Node addon) and
// resolving the entry points wgtrain uses.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpu/webgpu_abi.h"

namespace wgtrain::gpu {

// The library's path: $WGTRAIN_DAWN_LIBRARY if set, else the copy scripts/setup.sh placed in the source tree's
// .deps/ (its path is compiled in), else "linux-x64.dawn.node" on the loader's search path.
std::string dawn_library_path();

#ifndef __EMSCRIPTEN__
// The addresses (relative to the load base) of the named symbols in the ELF file's .symtab, local ones included:
// the addon exports its wgpu* functions only there. Names not found are absent from the result. Throws
// wgtrain::Error if the file cannot be read as 64-bit ELF.
std::map<std::string, uint64_t> elf_local_symbols(const std::string& path, const std::vector<std::string>& names);
#endif

// Loads the library once and resolves every function of WGPU_ABI_FUNCTIONS; throws wgtrain::Error naming the path
// and the missing symbols if that fails. Thread-safe.
const webgpu::Api& dawn();

}  // namespace wgtrain::gpu
