#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the transposing copy (shape/transpose.wgsl) at 1024 x
# 65536 words with its tiles taken in bands of 1 (the order before), 4, 8, 16 and 32 tiles, for 32 x 32 and 64 x 32
# tiles (WGTRAIN_FORCE_COPY_BAND, WGTRAIN_FORCE_COPY), beside the dense copy whose rate the rows are a share of.
# Into $OUT/copy_bands.{log,json}; the rows printed last.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
mkdir -p "$out"
WGTRAIN_FORCE_COPY=1,2 WGTRAIN_FORCE_COPY_BAND=1,4,8,16,32 timeout 120 .carry/wgtrain bench --only copy \
  --json "$out/copy_bands.json" 2>&1 | grep -v "^Warning\|^    at" > "$out/copy_bands.log"
grep "^copy" "$out/copy_bands.log"
