#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the training step of a ~50M-parameter model through
# wgtrain, through PyTorch from the same weights and batch (bench/torch_llama.py: the same math) and through
# Hugging Face transformers (bench/torch_hf_llama.py: LlamaForCausalLM, three modes), one FLOP count for all (from
# the dump), each row with its peak GPU memory; then a short real run on the Brown corpus. Logs and JSON into $OUT; the dumped weights stay in /tmp (too large to bring back).
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
dump=/tmp/train-dump
rm -rf "$dump" && mkdir -p "$dump"
.carry/wgtrain bench --only train_step --json "$out/webgpu_train.json" --dump "$dump" 2>&1 | tee "$out/webgpu_train.log"
PYTHONUNBUFFERED=1 python3 bench/torch_llama.py --dump "$dump" --json "$out/torch_train.json" 2>&1 |
  tee "$out/torch_train.log"
# The same step as a transformers user runs it (LlamaForCausalLM: fp32 eager, fp32 SDPA, bf16 autocast SDPA), with
# torch.cuda.max_memory_allocated beside wgtrain's pool high-water mark (the "memory" of webgpu_train.json).
PYTHONUNBUFFERED=1 python3 bench/torch_hf_llama.py --dump "$dump" --json "$out/hf_train.json" 2>&1 |
  tee "$out/hf_train.log"
steps=${TRAIN_STEPS:-300}
.carry/wgtrain train --config base --data brown --steps "$steps" --eval-every 100 --out /tmp/run-base --overwrite 2>&1 |
  tee "$out/train_base.log" | tail -12
cp /tmp/run-base/loss.csv "$out/train_base_loss.csv"
cp /tmp/run-base/loss.png "$out/train_base_loss.png"
