#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the mixed GEMMs' block rows, the choice (64 rows for
# products of fewer than 512 blocks of 128 that are not split, gemm_sm.cpp's gemm_sm_rows) against 128 rows
# everywhere (WGTRAIN_GEMM_SM_ROWS=128, the kernel before), alternately, twice each (ROUNDS): the step's products
# and the training step, with its first losses. Then the mixed tests on the matrix units, and fused_ce's forms at
# 1024 and 256 threads a row on WebGPU at V = 32000 and 128256, the choice (f-1) first and again last (run z6: the
# first form timed at each size ran at half the rate of the same kernel timed later), q4gsw_requant's one-pass form
# (f1), and the requant tests on this GPU. Into $OUT/r.tgz; the rows printed last. (Run z6 ran it at 5665a1a, with
# a staged requant form, f2, and the earlier requant kernels through overrides, all since removed.)
# Shorter calls: ROUNDS=1 one round of the A/B; TESTS=0 leaves the mixed tests out (run z5 ran them with 64-row
# blocks forced); FUSED=0 leaves fused_ce's forms out.
set -uo pipefail
out=${OUT:?OUT}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
source scripts/h200/env.sh
quiet() { grep -v "^Warning\|^    at"; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  for r in 128 choice; do
    env $([ $r = 128 ] && echo WGTRAIN_GEMM_SM_ROWS=128) timeout 100 .carry/wgtrain bench --precision mixed \
      --only step_gemm,train_step --json "$out/rows_${r}_$round.json" 2>&1 | quiet > "$out/rows_${r}_$round.log"
  done
done
[ "${TESTS:-1}" = 1 ] && WGTRAIN_POISON=1 timeout 150 .carry/wgtrain_tests \
  --gtest_filter='*Mixed*OnTheMatrixUnits*:MixedVariants.*' 2>&1 | quiet > "$out/mixed_tests.log"
WGTRAIN_FORCE_FUSED_CE=-1,0,1,2,3,4,5,-1 WGTRAIN_FORCE_FUSED_CE_WG=1024,256 WGTRAIN_FORCE_Q4GSW_REQUANT=1 \
  timeout 150 .carry/wgtrain bench --only "copy,requant$([ "${FUSED:-1}" = 1 ] && echo ,fused_ce)" \
  --json "$out/fused_ce.json" 2>&1 | quiet > "$out/fused_ce.log"
WGTRAIN_POISON=1 timeout 60 .carry/wgtrain_tests --gtest_filter='*Q4Requant*' 2>&1 | quiet > "$out/requant_tests.log"
grep -E "^\[  (PASSED|FAILED) " "$out/requant_tests.log"
[ -f "$out/mixed_tests.log" ] && grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/mixed_tests.log" | head
grep -E "^fused_ce|^copy \(dense|^q4gsw" "$out/fused_ce.log"
for f in "$out"/rows_*.log; do echo "$(basename "$f"):"; grep -E "^step|^train_step .*ms|losses" "$f"; done
cd "$out" && tar czf r.tgz gpu.txt rows_* fused_ce.* requant_* $(ls mixed_tests.log 2>/dev/null) &&
  rm -rf gpu.txt rows_* mixed_tests.log fused_ce.* requant_*
