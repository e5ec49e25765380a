// The tile of the transposing copy (shape/transpose.wgsl). Internal: for the tests and the benchmark, which times
// the tiles side by side (WGTRAIN_FORCE_COPY).
#pragma once

namespace wgtrain::ops::detail {

// kTransposeChoice (the default): 32 x 32-word tiles (AH = 1; the wider ones were slower on the H200, run n); 1, 2
// or 4 forces AH (tiles of 32 AH x 32 words; an UnsupportedError where the device's workgroup memory cannot hold
// it).
constexpr int kTransposeChoice = 0;
extern int transpose_force;

}  // namespace wgtrain::ops::detail
