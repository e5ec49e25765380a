#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here), one call: the measurements behind #14's unexplained gaps.
# 1. copy_order.sh: the transposing copy's tile orders, tiles and 16-byte form, at power-of-two and odd strides;
# 2. gemm_shapes.sh: the GEMMs from the step's shapes growing in M, K and N beside cuBLAS, and the occupancy probe;
# 3. the memory-bound rows: the dense copy, fused_ce (V = 32000 and 128256) and q4gsw_requant's one-pass form (f1)
#    at two sizes (run z5 also timed a form with up to 8 rows a workgroup, f2, since removed).
# 4. The mixed GEMMs in blocks of 128 and of 64 rows (WGTRAIN_GEMM_SM_ROWS): the step's products and the training
#    step in each, and the mixed tests on the matrix units with 64-row blocks included.
# Everything into $OUT/r.tgz (the device returns few files); the rows printed last.
set -uo pipefail
out=${OUT:?OUT}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
OUT=$out bash scripts/h200/copy_order.sh
OUT=$out bash scripts/h200/gemm_shapes.sh
source scripts/h200/env.sh
WGTRAIN_FORCE_Q4GSW_REQUANT=1 timeout 120 .carry/wgtrain bench --only copy,fused_ce,requant --json "$out/mem.json" 2>&1 |
  grep -v "^Warning\|^    at" > "$out/mem.log"
for r in 128 64 128 64; do
  WGTRAIN_GEMM_SM_ROWS=$r timeout 100 .carry/wgtrain bench --precision mixed --only step_gemm,train_step \
    --json "$out/rows_$r.json" 2>&1 | grep -v "^Warning\|^    at" >> "$out/rows_$r.log"
done
WGTRAIN_POISON=1 timeout 150 .carry/wgtrain_tests --gtest_filter='*Mixed*OnTheMatrixUnits*:MixedVariants.*' 2>&1 |
  grep -v "^Warning\|^    at" > "$out/mixed_tests.log"
grep -E "^fused_ce|^copy \(dense|^q4gsw" "$out/mem.log"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/mixed_tests.log" | head
for r in 128 64; do echo "rows $r:"; grep -E "^step|^train_step .*ms" "$out/rows_$r.log"; done
cd "$out" && tar czf r.tgz gpu.txt copy_order.* copy_tests.log gemm_shapes mem.* rows_* mixed_tests.log &&
  rm -rf gemm_shapes copy_order.* copy_tests.log mem.* gpu.txt rows_* mixed_tests.log
