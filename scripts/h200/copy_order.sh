#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the transposing copy's tiles side by side: 32 x 32 and
# 64 x 32 tiles of 4-byte words (f1, f2: shape/transpose.wgsl) and 64 x 64 tiles of 16-byte words (f8:
# transpose_vec4.wgsl; the odd shape, unaligned, takes f1 there), at 1024 x 65536 words (power-of-two strides) and
# 1023 x 65521 (odd ones), beside the dense copy whose rate the rows are a share of; then the copy tests on this
# GPU. Into $OUT/copy_order.{log,json} and $OUT/copy_tests.log; rows printed last. (Run z5 also timed the tiles
# taken diagonally, with the commit before the order was removed: no faster.)
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
mkdir -p "$out"
WGTRAIN_FORCE_COPY=1,2,8 timeout 120 .carry/wgtrain bench --only copy \
  --json "$out/copy_order.json" 2>&1 | grep -v "^Warning\|^    at" > "$out/copy_order.log"
WGTRAIN_POISON=1 timeout 60 .carry/wgtrain_tests --gtest_filter='Contiguous.*:Permute*:Transpose*' 2>&1 |
  grep -v "^Warning\|^    at" > "$out/copy_tests.log"
grep -E "^\[  (PASSED|FAILED) " "$out/copy_tests.log"
grep "^copy" "$out/copy_order.log"
