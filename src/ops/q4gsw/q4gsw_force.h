// Which kernels q4gsw_requant runs. Internal: for the tests and the benchmark, which times the two side by side
// (WGTRAIN_FORCE_Q4GSW_REQUANT).
#pragma once

namespace wgtrain::ops::detail {

// kRequantChoice (the default): requant_groups.wgsl (one pass, the scales found in it) where a group fits a
// workgroup (group_size <= 2048); kRequantOld: requant.wgsl, after scales.wgsl when the scales are recomputed;
// kRequantGroups: requant_groups.wgsl (an error where it cannot run); kRequantGroups2: the same with two code words
// a thread (WPT 2).
constexpr int kRequantChoice = -1, kRequantOld = 0, kRequantGroups = 1, kRequantGroups2 = 2;
extern int q4gsw_requant_force;

}  // namespace wgtrain::ops::detail
