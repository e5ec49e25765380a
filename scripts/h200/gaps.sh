#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here), one call: the measurements behind #14's unexplained gaps.
# 1. copy_order.sh: the transposing copy's tile orders, tiles and 16-byte form, at power-of-two and odd strides;
# 2. gemm_shapes.sh: the GEMMs from the step's shapes growing in M, K and N beside cuBLAS, and the occupancy probe;
# 3. the memory-bound rows: the dense copy, fused_ce (V = 32000 and 128256) and q4gsw_requant in both one-pass
#    forms (f1: a workgroup's groups along a row; f2: up to 8 rows a workgroup) at two sizes.
# Everything into $OUT/r.tgz (the device returns few files); the rows printed last.
set -uo pipefail
out=${OUT:?OUT}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
OUT=$out bash scripts/h200/copy_order.sh
OUT=$out bash scripts/h200/gemm_shapes.sh
source scripts/h200/env.sh
WGTRAIN_FORCE_Q4GSW_REQUANT=1,2 timeout 120 .carry/wgtrain bench --only copy,fused_ce,requant --json "$out/mem.json" 2>&1 |
  grep -v "^Warning\|^    at" > "$out/mem.log"
grep -E "^fused_ce|^copy \(dense|^q4gsw" "$out/mem.log"
cd "$out" && tar czf r.tgz gpu.txt copy_order.* copy_tests.log gemm_shapes mem.* &&
  rm -rf gemm_shapes copy_order.* copy_tests.log mem.* gpu.txt
