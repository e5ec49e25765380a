#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the mixed GEMMs' block rows, the choice (64 rows for
# products of fewer than 512 blocks of 128 that are not split, gemm_sm.cpp's gemm_sm_rows) against 128 rows
# everywhere (WGTRAIN_GEMM_SM_ROWS=128, the kernel before), alternately, twice each (ROUNDS): the step's products
# and the training step, with its first losses. Then the mixed tests on the matrix units, and fused_ce's forms at
# 1024 and 256 threads a row on WebGPU at V = 32000 and 128256 (run z5 measured the choice at 33% of the copy rate
# at 128256), and q4gsw_requant's one-pass form with its latent loaded directly (f1) and through workgroup memory
# (f2, STAGED), each also as it was before (overrides from prepare.sh: the eight weights in an array indexed in a loop,
# with quantize's guess and without it), and the requant tests on this GPU. Into $OUT/r.tgz; the rows printed last.
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
WGTRAIN_FORCE_FUSED_CE=-1,0,1,2,3,4 WGTRAIN_FORCE_FUSED_CE_WG=1024,256 WGTRAIN_FORCE_Q4GSW_REQUANT=1,2 \
  timeout 150 .carry/wgtrain bench --only "copy,requant$([ "${FUSED:-1}" = 1 ] && echo ,fused_ce)" \
  --json "$out/fused_ce.json" 2>&1 | quiet > "$out/fused_ce.log"
# The same requant rows with the earlier kernels (prepare.sh takes them from git): the eight weights in an array
# indexed in a loop, with quantize's guess and without it (the exact test for every weight).
for form in loop_guess loop_exact; do
  WGTRAIN_KERNEL_OVERRIDES=.carry/overrides/requant_$form WGTRAIN_FORCE_Q4GSW_REQUANT=1,2 timeout 60 .carry/wgtrain \
    bench --only copy,requant --json "$out/requant_$form.json" 2>&1 | quiet > "$out/requant_$form.log"
done
WGTRAIN_POISON=1 timeout 60 .carry/wgtrain_tests --gtest_filter='*Q4Requant*' 2>&1 | quiet > "$out/requant_tests.log"
grep -E "^\[  (PASSED|FAILED) " "$out/requant_tests.log"
[ -f "$out/mixed_tests.log" ] && grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/mixed_tests.log" | head
grep -E "^fused_ce|^copy \(dense|^q4gsw" "$out/fused_ce.log"
for form in loop_guess loop_exact; do
  echo "requant, $form:"; grep -E "^copy \(dense|^q4gsw" "$out/requant_$form.log"
done
for f in "$out"/rows_*.log; do echo "$(basename "$f"):"; grep -E "^step|^train_step .*ms|losses" "$f"; done
cd "$out" && tar czf r.tgz gpu.txt rows_* fused_ce.* requant_* $(ls mixed_tests.log 2>/dev/null) &&
  rm -rf gpu.txt rows_* mixed_tests.log fused_ce.* requant_*
