// The tile of the transposing copy (shape/transpose.wgsl). Internal: for the tests and the benchmark, which times
// the tiles side by side (WGTRAIN_FORCE_COPY).
#pragma once

namespace wgtrain::ops::detail {

// kTransposeChoice (the default): transpose_vec4.wgsl's 64 x 64-word tiles of 16-byte words where every extent,
// stride and offset is a multiple of 4 words (93% of the copy rate on the H100, run z5), else transpose.wgsl's 32 x
// 32-word tiles (AH = 1; the wider ones were slower on the H200, run n). kTransposeVec4 forces the former where it
// can run (the latter elsewhere); 1, 2 or 4 force the latter's AH (tiles of 32 AH x 32 words; an UnsupportedError
// where the device's workgroup memory cannot hold it).
constexpr int kTransposeChoice = 0;
constexpr int kTransposeVec4 = 8;
extern int transpose_force;

}  // namespace wgtrain::ops::detail
