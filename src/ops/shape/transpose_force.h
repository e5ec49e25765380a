// The tile of the transposing copy (shape/transpose.wgsl). Internal: for the tests and the benchmark, which times
// the tiles side by side (WGTRAIN_FORCE_COPY).
#pragma once

namespace wgtrain::ops::detail {

// kTransposeChoice (the default): 32 x 32-word tiles (AH = 1; the wider ones were slower on the H200, run n); 1, 2
// or 4 forces AH (tiles of 32 AH x 32 words; an UnsupportedError where the device's workgroup memory cannot hold
// it); kTransposeVec4 forces transpose_vec4.wgsl's 64 x 64-word tiles of 16-byte words where every extent, stride
// and offset is a multiple of 4 words (the 32 x 32 tile elsewhere).
constexpr int kTransposeChoice = 0;
constexpr int kTransposeVec4 = 8;
extern int transpose_force;
// The order its tiles are taken in: 1, the grid's (the tiles along the destination's rows first); 2, diagonal
// (transpose.wgsl says why). kTransposeChoice takes kTransposeOrder; 1 or 2 forces it.
constexpr int kTransposeOrder = 1;
extern int transpose_order;

}  // namespace wgtrain::ops::detail
