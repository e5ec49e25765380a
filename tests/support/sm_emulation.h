// The subgroup-matrix kernels (gemm_sm.wgsl, the attention *_sm.wgsl) emulated in plain WGSL, so that their
// indexing, staging, masking, scaling and barriers are tested on llvmpipe, which has no subgroup matrices: each
// builtin written out (a fragment spread over its subgroup's 32 lanes as on the hardware, lane l holding row l / 2,
// columns 8 (l % 2) .. + 7; products through workgroup memory, 128 floats a subgroup; f16 taken as f32 and rounded
// to f16 wherever the kernels convert to it). Only the builtins' own behaviour is the emulation's; the tests on the
// H200 check that. (A whole fragment in every lane, with its dynamically indexed arrays, took llvmpipe minutes to
// compile: do not go back to it.)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace wgtrain::test {

// A kernel's text (or an include's) with the subgroup-matrix builtins written out. Workgroup arrays of f16 become
// f32, or with pack_f16 stay 16 bits a value, two to an atomic<u32> (for kernels whose tiles as f32 would not fit
// llvmpipe's 32 KiB: gemm_sm's): the kernel may then only store single elements of them and read them through
// subgroupMatrixLoad. Throws where the text uses them otherwise or a builtin is left in place.
std::string sm_emulated(std::string text, bool pack_f16 = false);

struct EmulatedKernel {
  const char* name;  // as kernel_source takes it: "matmul/gemm_sm"
  bool pack_f16 = false;
};

// For its scope, the kernels' emulated texts in a directory of their own, handed to the runtime through
// WGTRAIN_KERNEL_OVERRIDES (a pipeline made in the scope keeps its text after it). One at a time.
class SmEmulation {
 public:
  explicit SmEmulation(const std::vector<EmulatedKernel>& kernels);
  ~SmEmulation();
  SmEmulation(const SmEmulation&) = delete;
  SmEmulation& operator=(const SmEmulation&) = delete;

 private:
  std::filesystem::path dir_;
};

}  // namespace wgtrain::test
