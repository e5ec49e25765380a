// WGSL kernels embedded at build time (cmake/embed_wgsl.cmake), and the {{KEY}} substitution that makes variants.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgtrain::detail {

// Substitutions for one variant, as (KEY, value) pairs. Callers build them from typed variant fields; the pipeline
// cache keys on (kernel, defs).
using KernelDefs = std::vector<std::pair<std::string, std::string>>;

struct EmbeddedKernel {
  const char* name;    // path under src/ops without ".wgsl", e.g. "matmul/matmul"
  const char* source;
};

// All embedded kernels (generated).
std::vector<EmbeddedKernel> embedded_kernels();
// The source of one kernel; throws Error if there is none of that name.
std::string_view kernel_source(std::string_view name);
// Inserts every {{>other}} (another embedded kernel, for shared helpers), then replaces every {{KEY}} by its value. Throws Error naming the kernel if a placeholder has no value or a
// value has no placeholder (a misspelt key must not pass silently).
std::string render_kernel(std::string_view name, std::string_view source, const KernelDefs& defs);

}  // namespace wgtrain::detail
