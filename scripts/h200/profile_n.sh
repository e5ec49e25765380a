#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): where the step's time goes, per op (GPU timestamps), in
# both precisions; the mixed GEMM at 4096^3 with its passes apart; and the memory-bound rows of issue #14 on both
# backends beside the copy bandwidth. Everything into $OUT/prof/ as it comes, then $OUT/prof.tar.gz.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/prof && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
for p in fp32 mixed; do
  WGTRAIN_PROFILE=1 timeout 90 .carry/wgtrain bench --precision "$p" --only train_step 2>&1 | quiet > "$d/step_$p.log"
  WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision "$p" --only 'mm' 2>&1 | quiet > "$d/mm_$p.log"
done
for b in webgpu native-vulkan; do
  for r in fused_ce adamw q4gsw_requant copy; do
    timeout 60 .carry/wgtrain bench --backend "$b" --only "$r" 2>&1 | quiet >> "$d/membw_$b.log"
  done
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw --format=csv > "$d/clocks.txt" 2>&1
tar czf "$out/prof.tar.gz" -C "$out" prof
grep -hE "^train_step  |^op |^linear|^mm |^attention|mixed absmax|^fused_ce|^adamw|^fill|^add|^mul|^rms|^rope|^silu" "$d"/step_*.log | head -70
grep -hE "4096x4096x4096|mixed absmax|^fill" "$d"/mm_mixed.log | head -12
grep -hE "fused_ce|adamw|requant|copy" "$d"/membw_*.log
