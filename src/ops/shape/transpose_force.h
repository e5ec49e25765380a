// The tile of the transposing copy (shape/transpose.wgsl). Internal: for the tests and the benchmark, which times
// the tiles side by side (WGTRAIN_FORCE_COPY).
#pragma once

namespace wgtrain::ops::detail {

// kTransposeChoice (the default): 64 x 32-word tiles (AH = 2), 32 x 32 where the strided dim is short or the
// workgroup memory small; 1, 2 or 4 forces AH (tiles of 32 AH x 32 words; an UnsupportedError where the device's
// workgroup memory cannot hold it). AH = 1 is the kernel before the choice.
constexpr int kTransposeChoice = 0;
extern int transpose_force;

}  // namespace wgtrain::ops::detail
