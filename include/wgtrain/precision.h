// The arithmetic of the GEMMs (mm, bmm, linear, the q4gsw linears and their gradients).
//   fp32   f32 operands and products (the default).
//   mixed  f16 products with f32 accumulation on the GPU's matrix units, through Dawn's experimental subgroup-matrix
//          feature (WGSL chromium_experimental_subgroup_matrix): each f32 row of A and column of B is scaled by a
//          power of two into f16's range first, and the scale is undone in f32 (src/ops/matmul/README.md).
// A device runs its GEMMs in mixed precision exactly when it was opened for it (precision_options) and has the
// features; asking for mixed on a device without them is an error, never a silent fallback.
#pragma once

#include <string>

#include "wgtrain/device.h"

namespace wgtrain {

enum class Precision { Fp32, Mixed };

// "fp32", "mixed".
const char* precision_name(Precision p);
// Parses those names; throws ArgumentError listing them.
Precision parse_precision(const std::string& name);

// Sets what opening a device for `p` needs (mixed: DeviceOptions::subgroup_matrix and the toggles it brings).
void precision_options(DeviceOptions& options, Precision p);
// The precision this device's GEMMs run in.
Precision gemm_precision(const Device& device);
// Throws Error, naming what the device lacks, when `wanted` is mixed and the device cannot run it (no WebGPU
// backend, no shader-f16, no subgroup matrices, no f16 x f16 -> f32 16x16x16 shape, or not opened for it).
void require_precision(const Device& device, Precision wanted);

}  // namespace wgtrain
