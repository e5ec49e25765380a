// WGSL kernels embedded at build time (cmake/embed_wgsl.cmake), and the template rendering that makes variants.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgtrain::detail {

// Values for one variant, as (KEY, value) pairs. Callers build them from typed variant fields (short values: a
// number, a bool, a type name); the pipeline cache keys on (kernel, defs).
using KernelDefs = std::vector<std::pair<std::string, std::string>>;

struct EmbeddedKernel {
  const char* name;    // path under src/ops without ".wgsl", e.g. "matmul/gemm"
  const char* source;
};

// All embedded WGSL kernels (generated), in name order.
std::vector<EmbeddedKernel> embedded_kernels();
// The source of one kernel; throws Error if there is none of that name.
std::string_view kernel_source(std::string_view name);

// Renders a variant of a WGSL kernel. The template language, small on purpose:
//   {{>other}}               the embedded kernel `other` (shared helpers), itself expanded; inserted first
//   {{KEY}}                  the value of KEY (a number, a bool, a type name; elementwise/map's expression)
//   {{#KEY}}...{{/KEY}}      the text between, when KEY is "true" (KEY must be "true" or "false")
//   {{^KEY}}...{{/KEY}}      the text between, when KEY is "false"
// A section tag alone on its line takes the line with it. Sections may nest (not two of one KEY). Every KEY the
// template names (in any section) needs a value, and every value a KEY it names: a misspelt key must not pass
// silently. A kernel declares each KEY in its header comment, one line each:
//   // @variant KEY {v1|v2|...} what it means
// and a value outside a declared {set} is an error (a set of * allows any value). Throws Error naming the kernel.
std::string render_kernel(std::string_view name, std::string_view source, const KernelDefs& defs);

// A variant field of a WGSL kernel, as its header declares it (@variant), or found undeclared in its text.
struct KernelField {
  std::string key;
  std::vector<std::string> values;  // the allowed values; empty: any
  std::string meaning;              // empty where undeclared
  bool declared = false;            // has an @variant line
  bool used = false;                // the template names it
};
// The variant fields of an embedded WGSL kernel (its includes expanded): the declared ones in their order, then any
// placeholder left undeclared.
std::vector<KernelField> kernel_fields(std::string_view name);
// Whether an embedded WGSL kernel is a shared helper for {{>include}} rather than a kernel of its own (no entry
// point).
bool kernel_is_include(std::string_view name);

}  // namespace wgtrain::detail
