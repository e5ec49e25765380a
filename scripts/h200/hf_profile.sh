#!/usr/bin/env bash
# On the GPU machine (after `WITH_TESTS=0 scripts/h200/prepare.sh` here): is `transformers`' bf16 autocast step bound
# by the GPU or by the host feeding it? wgtrain's steps for reference, then the usual transformers rows
# (bench/torch_hf_llama.py) and bench/torch_hf_profile.py (wall, host, profiled kernels, CUDA graph) on the same
# dump, the usual rows once more at the end. Into $OUT/hfp/.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/hfp && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv,noheader
  grep -m1 "model name" /proc/cpuinfo; nproc; uptime; } | tee "$d/gpu.txt"
: > "$d/wgtrain_steps.txt"
for p in mixed fp32; do
  timeout 60 .carry/wgtrain bench --precision "$p" --only train_step 2>&1 | quiet > "/tmp/wgtrain_$p.log"
  { echo "== wgtrain $p"; grep -hE "^train_step  " "/tmp/wgtrain_$p.log" | cut -c1-150; } | tee -a "$d/wgtrain_steps.txt"
done
dump=/tmp/train-dump && rm -rf "$dump" && mkdir -p "$dump"
timeout 60 .carry/wgtrain bench --only train_step --dump "$dump" 2>&1 | quiet > "$d/dump.log"
cd bench
PYTHONUNBUFFERED=1 timeout 180 python3 torch_hf_llama.py --dump "$dump" --json "$d/hf_train.json" 2>&1 |
  tee "$d/hf_train.log" | grep -iE "eager|sdpa|autocast" | cut -c1-150
PYTHONUNBUFFERED=1 timeout 240 python3 torch_hf_profile.py --dump "$dump" --json "$d/hf_profile.json" \
  --trace-dir /tmp 2>&1 | tee "$d/hf_profile.log" | grep -v "^Warning"
PYTHONUNBUFFERED=1 timeout 180 python3 torch_hf_llama.py --dump "$dump" --json "$d/hf_train2.json" 2>&1 |
  tee "$d/hf_train2.log" | grep -iE "autocast" | cut -c1-150
uptime | tee -a "$d/gpu.txt"
