#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): issue #14's rows from one run. 1. the attention kernels
# (every table entry forced, the composite path); 2. train.sh: the base model's step through wgtrain fp32, the same
# math in PyTorch and transformers in three modes (one FLOP formula, peak memory each), and a 300-step Brown run;
# 3. the same step with --precision mixed; 4. the GEMM rows in both precisions, and a 300-step mixed run; 5. the attention, mixed-precision,
# model and feature tests on this GPU. Everything into $OUT/step/ as it comes, then $OUT/step.tar.gz.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/step && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
timeout 90 .carry/wgtrain bench --only attention --json "$d/attention.json" 2>&1 | quiet > "$d/attention.log"
grep -E "choice|composite" "$d/attention.log"
OUT="$d" TRAIN_STEPS=300 timeout 300 bash scripts/h200/train.sh > "$d/train_all.log" 2>&1
grep -E "^train_step|GPU memory|ms|tokens/s" "$d/webgpu_train.log" | head -6
grep -iE "eager|sdpa|autocast" "$d/hf_train.log" | tail -4
timeout 60 .carry/wgtrain bench --precision mixed --only train_step --json "$d/webgpu_train_mixed.json" 2>&1 | quiet \
  > "$d/webgpu_train_mixed.log"
grep -E "^train_step|GPU memory" "$d/webgpu_train_mixed.log" | head -4
for p in fp32 mixed; do
  timeout 60 .carry/wgtrain bench --precision "$p" --only mm --json "$d/bench_mm_$p.json" 2>&1 | quiet > "$d/bench_mm_$p.log"
  timeout 60 .carry/wgtrain bench --precision "$p" --only step_gemm --json "$d/bench_step_$p.json" 2>&1 | quiet \
    > "$d/bench_step_$p.log"
done
grep -h "4096x4096x4096" "$d"/bench_mm_*.log
# The mixed run beside train.sh's fp32 one: same preset, data, seed and steps.
timeout 100 .carry/wgtrain train --config base --data brown --steps 300 --eval-every 100 --precision mixed \
  --out /tmp/run-base-mixed --overwrite > "$d/train_base_mixed.log" 2>&1
cp /tmp/run-base-mixed/loss.csv "$d/train_base_mixed_loss.csv"
grep -h "^done" "$d/train_base.log" "$d/train_base_mixed.log"
WGTRAIN_POISON=1 timeout 120 .carry/wgtrain_tests \
  --gtest_filter='*Attention*:Llama.*:*Mixed*:Features.*:Abi.*:-Cli.*' 2>&1 | quiet > "$d/tests.log"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" | head -12
tar czf "$out/step.tar.gz" --exclude="*.safetensors" -C "$out" step
