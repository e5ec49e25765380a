// --precision fp32|mixed: parsing, device options and the check that a device can run mixed precision.
#include "wgtrain/precision.h"

#include "ops/matmul/gemm.h"
#include "wgtrain/error.h"

namespace wgtrain {

const char* precision_name(Precision p) { return p == Precision::Mixed ? "mixed" : "fp32"; }

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "mixed") return Precision::Mixed;
  throw ArgumentError("unknown precision '" + name + "': choose fp32 or mixed");
}

void precision_options(DeviceOptions& options, Precision p) { options.subgroup_matrix = p == Precision::Mixed; }

Precision gemm_precision(const Device& device) {
  return ops::detail::gemm_sm_missing(device.impl()).empty() ? Precision::Mixed : Precision::Fp32;
}

void require_precision(const Device& device, Precision wanted) {
  if (wanted != Precision::Mixed) return;
  const std::string missing = ops::detail::gemm_sm_missing(device.impl());
  if (!missing.empty())
    throw Error("--precision mixed needs f16 products on the GPU's matrix units, and " + device.info().name + " (" +
                backend_name(device.info().backend) + ") " + missing + "; use --precision fp32");
}

}  // namespace wgtrain
