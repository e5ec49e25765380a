// The tile of the transposing copy (shape/transpose.wgsl). Internal: for the tests and the benchmark, which times
// the tiles side by side (WGTRAIN_FORCE_COPY).
#pragma once

namespace wgtrain::ops::detail {

// kTransposeChoice (the default): 32 x 32-word tiles (AH = 1; the wider ones were slower on the H200, run n); 1, 2
// or 4 forces AH (tiles of 32 AH x 32 words; an UnsupportedError where the device's workgroup memory cannot hold
// it).
constexpr int kTransposeChoice = 0;
extern int transpose_force;
// The order its tiles are taken in: 1, the grid's (the tiles along the destination's rows first); 2, diagonal
// (transpose.wgsl says why). kTransposeChoice takes kTransposeOrder; 1 or 2 forces it.
constexpr int kTransposeOrder = 1;
extern int transpose_order;

}  // namespace wgtrain::ops::detail
