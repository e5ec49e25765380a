// Which rows kernel fused_ce runs (rows.wgsl / rows.comp). Internal: for the tests and the benchmark, which times
// the forms side by side (WGTRAIN_FORCE_FUSED_CE, WGTRAIN_FORCE_FUSED_CE_WG).
#pragma once

namespace wgtrain::ops::detail {

// kFusedCeChoice (the default): a row of at most 8 elements (of T) a thread held in registers (read once); a
// longer one holds its first 8 a thread on WebGPU, 4 on native Vulkan, and streams the rest, 4 loads at once, pass 2
// backwards.
// kFusedCeOld: the kernel before that (held where it fits, else streamed with one load a thread, forwards).
// kFusedCeStream: always streamed, 4 loads at once, forwards; kFusedCeStreamReverse: the same, pass 2 backwards.
// kFusedCeHold8: hold 8 a thread where the row is longer (else the choice), 4 loads at once, backwards;
// kFusedCeHold8Unroll2: the same with 2 loads at once (fewer registers beside the 8 held).
constexpr int kFusedCeChoice = -1, kFusedCeOld = 0, kFusedCeStream = 1, kFusedCeStreamReverse = 2;
constexpr int kFusedCeHold8 = 3, kFusedCeHold8Unroll2 = 4;
extern int fused_ce_force;
// Threads a row: 0 (the default) as the device allows (1024 or 256), else 256 or 1024 (an error if not allowed).
extern int fused_ce_force_wg;

}  // namespace wgtrain::ops::detail
