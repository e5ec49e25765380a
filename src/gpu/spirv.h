// The native Vulkan backend's kernels: SPIR-V modules compiled by glslc from src/ops/**/*.comp and embedded, with
// the variants declared in each kernel's .variants file.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace wgtrain::detail {

// The words of one module (a kernel's path under src/ops without ".comp", plus "_<suffix>" for a variant); throws
// Error if there is none.
std::span<const uint32_t> spirv(std::string_view module);

// One compiled variant: the kernel it belongs to, its module, and the WGSL defs it serves ("KEY=value KEY=value";
// empty: any).
struct SpirvVariant {
  const char* kernel;
  const char* module;
  const char* when;
};
std::span<const SpirvVariant> spirv_variants();

}  // namespace wgtrain::detail
