#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): issue #14's rows of run (n) from one call. 1. train.sh:
# the base model's step through wgtrain fp32, the same math in PyTorch and transformers in three modes (one FLOP
# formula, peak memory each), a 300-step Brown run; 2. the same step with --precision mixed, then both steps
# profiled per op; 3. the GEMM rows in both precisions; 4. a 300-step mixed run beside the fp32 one; 5. the
# mixed-precision, fp32 tiling and model tests on this GPU. (The memory-bound rows: scripts/h200/membw.sh.)
# Everything into $OUT/step/ as it comes, then $OUT/step.tar.gz. GEMM_ROWS=0 leaves out 3.; TESTS (a gtest filter)
# replaces 5.'s. Where prepare.sh staged a BEFORE build, first the two builds' steps, alternated twice a precision,
# and the earlier build's profile (a short scripts/h200/ab.sh).
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/step && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
if [ -x .carry/wgtrain_before ]; then
  for r in 1 2; do
    for p in mixed fp32; do
      for which in before after; do
        bin=.carry/wgtrain && [ "$which" = before ] && bin=.carry/wgtrain_before
        timeout 60 "$bin" bench --precision "$p" --only train_step --json "$d/ab_${p}_$which-$r.json" 2>&1 | quiet \
          >> "$d/ab_${p}_$which.log"
      done
    done
  done
  WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain_before bench --precision mixed --only train_step 2>&1 | quiet \
    > "$d/profile_mixed_before.log"
fi
OUT="$d" TRAIN_STEPS=300 timeout 300 bash scripts/h200/train.sh > "$d/train_all.log" 2>&1
timeout 60 .carry/wgtrain bench --precision mixed --only train_step --json "$d/webgpu_train_mixed.json" 2>&1 | quiet \
  > "$d/webgpu_train_mixed.log"
for p in fp32 mixed; do
  WGTRAIN_PROFILE=1 timeout 90 .carry/wgtrain bench --precision "$p" --only train_step 2>&1 | quiet > "$d/profile_$p.log"
  [ "${GEMM_ROWS:-1}" = 1 ] || continue
  timeout 60 .carry/wgtrain bench --precision "$p" --only mm --json "$d/bench_mm_$p.json" 2>&1 | quiet > "$d/bench_mm_$p.log"
  timeout 60 .carry/wgtrain bench --precision "$p" --only step_gemm --json "$d/bench_step_$p.json" 2>&1 | quiet \
    > "$d/bench_step_$p.log"
done
# The mixed run beside train.sh's fp32 one: same preset, data, seed and steps.
timeout 100 .carry/wgtrain train --config base --data brown --steps 300 --eval-every 100 --precision mixed \
  --out /tmp/run-base-mixed --overwrite > "$d/train_base_mixed.log" 2>&1
cp /tmp/run-base-mixed/loss.csv "$d/train_base_mixed_loss.csv"
# (The forced GEMM tilings alone took past 90 s in run (t).)
WGTRAIN_POISON=1 timeout "${TESTS_TIMEOUT:-240}" .carry/wgtrain_tests \
  --gtest_filter="${TESTS:-Llama.*:*Mixed*:Features.*:*GemmTilings*}:-Cli.*" 2>&1 | quiet > "$d/tests.log"
tar czf "$out/step.tar.gz" --exclude="*.safetensors" -C "$out" step
grep -E "^train_step|GPU memory" "$d/webgpu_train.log" "$d/webgpu_train_mixed.log" | cut -c1-160
grep -iE "eager|sdpa|autocast" "$d/hf_train.log" | tail -4
grep -h "4096x4096x4096" "$d"/bench_mm_*.log 2>/dev/null
grep -h "^done" "$d/train_base.log" "$d/train_base_mixed.log"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" | head -12
for f in "$d"/ab_*.log; do [ -f "$f" ] && echo "$(basename "$f"): $(grep -h '^train_step  ' "$f" | awk '{print $(NF-3)}' | tr '\n' ' ')"; done
