#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the subgroup-matrix attention of --precision mixed on the
# matrix units, in one short call before step_n.sh's full rows: its tests (the kernels against the float64
# reference at hd 16 to 128, poisoned outputs) and the mixed tests, bench --only attention in mixed precision (the
# kernels beside every fp32 tiled entry forced and the composite path), and the mixed step with its per-op profile.
# Everything into $OUT/sm/ as it comes, then $OUT/sm.tar.gz.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/sm && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
WGTRAIN_POISON=1 timeout 120 .carry/wgtrain_tests --gtest_filter='AttentionSm*:*Mixed*:Attention*:-Cli.*' 2>&1 | quiet \
  > "$d/tests.log"
timeout 120 .carry/wgtrain bench --precision mixed --only attention --json "$d/attention_mixed.json" 2>&1 | quiet \
  > "$d/attention_mixed.log"
timeout 60 .carry/wgtrain bench --precision mixed --only train_step --json "$d/train_mixed.json" 2>&1 | quiet \
  > "$d/train_mixed.log"
WGTRAIN_PROFILE=1 timeout 90 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet \
  > "$d/profile_mixed.log"
tar czf "$out/sm.tar.gz" -C "$out" sm
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Actual" "$d/tests.log" | head -20
grep -E "^attention (fwd|bwd|f\+b) \((choice|rows|entry 0)|composite" "$d/attention_mixed.log" | cut -c1-150
grep -E "^train_step" "$d/train_mixed.log" | cut -c1-160
grep -hE "^attention" "$d/profile_mixed.log" | head -12
