#!/usr/bin/env bash
# On the GPU machine (after `BEFORE=<older build> scripts/h200/prepare.sh` here): a change measured against the
# build before it and beside `transformers`, in one call short enough for what is left of a session's device time,
# each result printed as it comes (a call cut short still reports what it finished). In order: 1. TESTS (a gtest
# filter) on this GPU, poisoned outputs; 2. both builds' steps in each precision, alternated; 3. the dump and the
# `transformers` rows (bench/torch_hf_llama.py: fp32 eager, fp32 SDPA, bf16 autocast), the same batch and FLOP
# formula; 4. both builds' mixed steps profiled per op; 5. more rounds of 2. (ROUNDS in all, default 2). WITH_ENV
# adds the after-build's mixed step under those variables after the first round. Into
# $OUT/tab/, then $OUT/tab.tar.gz. (No 300-step runs: scripts/h200/step_n.sh has them.)
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/tab && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
bin_of() { if [ "$1" = before ]; then echo .carry/wgtrain_before; else echo .carry/wgtrain; fi; }
step_line() { grep -hE "^train_step  |GPU memory|losses of" "$1" | tail -3 | cut -c1-170; }
# The card, its clocks now and at most, and the PyTorch stack (run (v)'s autocast row was 1.76x run (t)'s, unexplained).
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv,noheader |
  tee "$d/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" 2>&1 | tee -a "$d/gpu.txt"
if [ -n "${TESTS:-}" ]; then
  WGTRAIN_POISON=1 timeout "${TESTS_TIMEOUT:-60}" .carry/wgtrain_tests --gtest_filter="$TESTS:-Cli.*" 2>&1 | quiet \
    > "$d/tests.log"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" "$d/tests.log" | head -12
fi
ab_round() {
  for p in mixed fp32; do
    for which in before after; do
      log="$d/ab_${p}_$which-$1.log"
      timeout 60 "$(bin_of $which)" bench --precision "$p" --only train_step --json "$d/ab_${p}_$which-$1.json" 2>&1 |
        quiet > "$log"
      echo "== $p $which $1" && step_line "$log"
    done
  done
}
ab_round 1
# WITH_ENV="NAME=value ...": the after-build's mixed step once more under those variables (WGTRAIN_SPLIT_K=-1: no
# GEMM split along k), profiled, beside the rounds.
if [ -n "${WITH_ENV:-}" ]; then
  env $WITH_ENV timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet > "$d/with_env.log"
  echo "== mixed after, $WITH_ENV" && step_line "$d/with_env.log"
  env $WITH_ENV WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet \
    > "$d/profile_with_env.log"
  grep -E "^linear|^mm |^mixed" "$d/profile_with_env.log"
fi
dump=/tmp/train-dump && rm -rf "$dump" && mkdir -p "$dump"
timeout 60 .carry/wgtrain bench --only train_step --json "$d/webgpu_dump.json" --dump "$dump" 2>&1 | quiet \
  > "$d/webgpu_dump.log"
PYTHONUNBUFFERED=1 timeout 180 python3 bench/torch_hf_llama.py --dump "$dump" --json "$d/hf_train.json" 2>&1 |
  tee "$d/hf_train.log" | grep -iE "eager|sdpa|autocast" | cut -c1-170
for which in after before; do
  WGTRAIN_PROFILE=1 timeout 60 "$(bin_of $which)" bench --precision mixed --only train_step 2>&1 | quiet \
    > "$d/profile_mixed_$which.log"
  echo "== profile mixed $which" &&
    grep -E "^attention|^rms_norm|^sum|^add|^swiglu|^linear|^mm |^mixed" "$d/profile_mixed_$which.log"
done
for r in $(seq 2 "${ROUNDS:-2}"); do ab_round "$r"; done
tar czf "$out/tab.tar.gz" -C "$out" tab
