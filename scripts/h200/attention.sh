#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the fused attention beside the composite path it
# replaced (bench --only attention: forward, backward and both for the tiled kernels the op picks, the row kernels,
# and each entry of attention.cpp's tables forced, with TFLOP/s), the training step with it (wgtrain, the same math in PyTorch, transformers in three modes, each with its
# peak memory), a short real run, and the attention/model/memory tests on the GPU. Everything into $OUT/all.tgz
# (the tool brings back at most 8 files).
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
work=/tmp/attention-run && rm -rf "$work" && mkdir -p "$work"
quiet() { grep -v "^Warning\|^    at"; }
.carry/wgtrain bench --only attention --json "$work/attention.json" 2>&1 | quiet | tee "$work/attention.log"
OUT="$work" TRAIN_STEPS=${TRAIN_STEPS:-200} bash scripts/h200/train.sh > "$work/train_all.log" 2>&1
grep -v "^Warning\|^    at" "$work/train_all.log" | grep -i "train_step\|memory\|tokens/s\|row\|eager\|sdpa\|autocast\|step 200\|val" |
  head -40
[ -x .carry/wgtrain_tests ] && WGTRAIN_POISON=1 .carry/wgtrain_tests \
  --gtest_filter='*Attention*:Llama.*:Memory.*:Autograd.*:Contiguous.*' 2>&1 | quiet > "$work/tests.log"
tail -4 "$work/tests.log"
tar czf "$out/all.tgz" -C "$work" --exclude='*.safetensors' .
