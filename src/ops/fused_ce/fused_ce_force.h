// Which rows kernel fused_ce runs (rows.wgsl / split.wgsl and their .comp twins). Internal: for the tests and the
// benchmark, which times the forms side by side (WGTRAIN_FORCE_FUSED_CE, WGTRAIN_FORCE_FUSED_CE_WG).
#pragma once

#include <cstdint>

namespace wgtrain::ops::detail {

// kFusedCeChoice (the default): a row of at most 8 elements (of T) a thread held in registers (read once); a
// longer one as kFusedCeSplit out of place, as kFusedCeHold8 in place and past split.wgsl's 64 parts.
// kFusedCeOld: the kernel before that (held where it fits, else streamed with one load a thread, forwards).
// kFusedCeStream: always streamed, 4 loads at once, forwards; kFusedCeStreamReverse: the same, pass 2 backwards.
// kFusedCeHold8: hold 8 a thread where the row is longer (else the choice), 4 loads at once, backwards;
// kFusedCeHold8Unroll2: the same with 2 loads at once (fewer registers beside the 8 held).
// kFusedCeSplit: a longer row cut over several workgroups (split.wgsl), each holding 8 a thread, read once, out of
// place or in place; kFusedCeSplit2: the same holding 2 a thread wherever a row is longer than 2 a thread (many
// parts at test sizes).
constexpr int kFusedCeChoice = -1, kFusedCeOld = 0, kFusedCeStream = 1, kFusedCeStreamReverse = 2;
constexpr int kFusedCeHold8 = 3, kFusedCeHold8Unroll2 = 4, kFusedCeSplit = 5, kFusedCeSplit2 = 6;
extern int fused_ce_force;
// split.wgsl's polls of a part not yet published before the workgroup that needs it reads it from memory itself
// (p.spin). On a GPU a part's workgroup starts beside the others of its row and publishes within one workgroup's
// run; 0 reads every part not already published. Kept well under llvmpipe's 65535 loop iterations an invocation.
constexpr uint32_t kFusedCeSpin = 4096;
extern uint32_t fused_ce_spin;
// For the tests: split.wgsl defers parts to split_deferred.wgsl as if their waits had run out: 1 every part, 2 the
// parts of odd tickets; 0 (the default) only where a wait runs out.
extern uint32_t fused_ce_defer;

// Threads a row: 0 (the default) as the device allows (1024 or 256), else 256 or 1024 (an error if not allowed).
extern int fused_ce_force_wg;

}  // namespace wgtrain::ops::detail
