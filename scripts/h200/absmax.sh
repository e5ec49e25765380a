#!/usr/bin/env bash
# On the GPU machine (after `scripts/h200/prepare.sh` here): the mixed GEMMs' absmax pass (sm_absmax.wgsl) with 4, 8
# and 16 rows a thread (WGTRAIN_FORCE_ABSMAX) at the step's operand shapes beside the dense copy; its tests on this
# GPU; the mixed step under each, alternated (ROUNDS, default 2), two of them profiled; then
# bench/torch_hf_profile.py (transformers' step: wall, host, kernels by category, CUDA graph). Into $OUT/absmax/.
# Run (z2) ran a build whose sm_absmax.wgsl had a variant K (rows a thread) and bench the variable; neither won in
# the step, so both were removed: later builds ignore WGTRAIN_FORCE_ABSMAX and time the one kernel.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/absmax && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv,noheader
  grep -m1 "model name" /proc/cpuinfo; } | tee "$d/gpu.txt"
WGTRAIN_FORCE_ABSMAX=4,8,16 timeout 120 .carry/wgtrain bench --only "copy,mixed absmax" \
  --json "$d/absmax_rows.json" 2>&1 | quiet > /tmp/absmax_rows.log
grep -E "^copy \(dense|^mixed absmax" /tmp/absmax_rows.log | tee "$d/absmax_rows.txt"
WGTRAIN_POISON=1 timeout 90 .carry/wgtrain_tests --gtest_filter="MixedAbsmax*:Mixed.*:Llama.*:-Cli.*" 2>&1 | quiet \
  > /tmp/tests.log
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" /tmp/tests.log | head -12 | tee "$d/tests.txt"
: > "$d/steps.txt"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for k in 8 16 4; do
    WGTRAIN_FORCE_ABSMAX=$k timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet \
      > /tmp/step.log
    { echo "== mixed K=$k round $r"; grep -hE "^train_step  |GPU memory|losses of" /tmp/step.log | cut -c1-170; } |
      tee -a "$d/steps.txt"
  done
done
for k in 8 16; do
  WGTRAIN_FORCE_ABSMAX=$k WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 |
    quiet > "$d/profile_mixed_k$k.log"
  echo "== profile K=$k" && grep -E "^mixed|^fill" "$d/profile_mixed_k$k.log"
done
dump=/tmp/train-dump && rm -rf "$dump" && mkdir -p "$dump"
timeout 60 .carry/wgtrain bench --only train_step --dump "$dump" 2>&1 | quiet > /tmp/dump.log
(cd bench && PYTHONUNBUFFERED=1 timeout 240 python3 torch_hf_profile.py --dump "$dump" --json "$d/hf_profile.json" \
  --trace-dir /tmp 2>&1 | grep -v "Warning\|_warn_once" | tee "$d/hf_profile.log")
