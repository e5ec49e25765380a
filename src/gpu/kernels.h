// The kernels embedded at build time: WGSL sources (cmake/embed_wgsl.cmake) rendered into variants here, and the
// SPIR-V modules of the native Vulkan backend (cmake/embed_spirv.cmake), listed; and the dump of every WGSL variant
// compiled.
#pragma once

#include <cstddef>
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
// The source of one kernel; throws Error if there is none of that name. Where the environment names a directory in
// WGTRAIN_KERNEL_OVERRIDES holding <name, '/' as '.'>.wgsl, that file's text instead (said on stderr): a developer's
// way to time a changed kernel without a rebuild. Only kernels that exist can be replaced.
inline constexpr const char* kKernelOverridesEnv = "WGTRAIN_KERNEL_OVERRIDES";
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

// A SPIR-V module of the native Vulkan backend, as embedded (the table comes from cmake/spirv_listing.cmake).
struct EmbeddedSpirv {
  const char* name;       // e.g. "matmul/gemm_tm8_b0": the .comp's path under src/ops, and the variant's suffix
  const char* source;     // the GLSL file it was compiled from, e.g. "matmul/gemm.comp"
  const char* defines;    // glslc's -D options for this variant (its line of the .variants file), or ""
  const char* spec;       // specialization constants the pipeline sets, "NAME:TYPE=default" separated by spaces
  size_t words;           // module size in 32-bit words
};
std::vector<EmbeddedSpirv> embedded_spirv();

// ---- the kernel dump ------------------------------------------------------------------------------------------
// Every kernel variant a process compiles can be written to a directory, one file per variant, exactly as handed
// to the GPU compiler: WGTRAIN_DUMP_KERNELS=DIR in the environment (read at the first compile), or
// set_kernel_dump_dir. `wgtrain kernels --dump DIR` fills one with a representative workload.

// The environment variable naming the dump directory.
inline constexpr const char* kDumpKernelsEnv = "WGTRAIN_DUMP_KERNELS";
// Sends the dump to `dir` (created if missing, with its parents), or turns it off ("") for this process, the
// environment notwithstanding. Throws Error, one line, if the directory cannot be made or written.
void set_kernel_dump_dir(const std::string& dir);
// Takes WGTRAIN_DUMP_KERNELS, if set, now rather than at the first compile, so that a bad directory is reported
// before any work starts. Throws Error naming the variable.
void init_kernel_dump_from_env();
// The directory compiled kernels go to ("" when off).
std::string kernel_dump_dir();
// Called where a pipeline is built, with the kernel, its variant (sorted by key) and the text handed to the
// compiler: writes that text to the dump directory, if there is one, once per variant and process. Throws Error if
// the file cannot be written.
void note_compiled_kernel(std::string_view kernel, const KernelDefs& defs, std::string_view source);
// The files this process has written to the dump directory since it was set, sorted.
std::vector<std::string> dumped_kernel_files();
// The dump's file name for a variant: the kernel's path with '.' for '/', then ".KEY-value" for each field (in the
// order given), then ".wgsl". Type names lose their brackets (vec4<f32>: vec4_f32); in a value with other
// characters outside [A-Za-z0-9_.-] (an expression) operators become words (x0 < x1: x0ltx1) and ".h<hash of the
// variant>" comes before ".wgsl" to keep names distinct, as it does where a name would pass 200 characters.
std::string kernel_dump_file_name(std::string_view kernel, const KernelDefs& defs);

}  // namespace wgtrain::detail
