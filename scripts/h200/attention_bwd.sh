#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the attention backward's table entries side by side
# (bench --only attention: per forced entry fwd, bwd, "bwd dq" and "bwd dkv" alone, f+b; the composite path last),
# then the attention tests on the GPU, where the 48 KiB entries (128x32x32d, 64x32x32r8d, 32x32x32r8d,
# 128x32x32s, 64x32x32r8ds, ...) run at hd 64 (llvmpipe's 32 KiB runs them at hd 6 only).
# Into $OUT: attention.log, attention.json, tests.log.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
quiet() { grep -v "^Warning\|^    at"; }
.carry/wgtrain bench --only attention --json "$out/attention.json" 2>&1 | quiet | tee "$out/attention.log"
[ -x .carry/wgtrain_tests ] && WGTRAIN_POISON=1 .carry/wgtrain_tests --gtest_filter='*Attention*' 2>&1 | quiet \
  > "$out/tests.log"
grep -E "FAILED|skipped|PASSED" "$out/tests.log" | sort | uniq -c | head -20
