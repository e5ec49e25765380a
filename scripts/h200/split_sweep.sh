#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the mixed step with its GEMMs' split-K aimed at each of
# TARGETS workgroups (WGTRAIN_SPLIT_TARGET; split_k.h), ROUNDS times in alternation, then the best and the default
# profiled per op. Each line printed as it comes; logs into $OUT/sweep/, then $OUT/sweep.tar.gz.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/sweep && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$d/gpu.txt"
targets=${TARGETS:-"128 256 384 512 768 1024"}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in $targets; do
    log="$d/mixed_t$t-$r.log"
    WGTRAIN_SPLIT_TARGET=$t timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet > "$log"
    printf "target %5s round %s: %s\n" "$t" "$r" "$(grep -hE "^train_step  " "$log" | awk '{print $4, $5}') $(grep -ho "([0-9]* dispatches a step)" "$log")"
  done
done
for t in ${PROFILE_TARGETS:-}; do
  WGTRAIN_SPLIT_TARGET=$t WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision mixed --only train_step 2>&1 |
    quiet > "$d/profile_t$t.log"
  echo "== profile, target $t" && grep -E "^linear|^mm |^mixed|^train_step  " "$d/profile_t$t.log"
done
tar czf "$out/sweep.tar.gz" -C "$out" sweep
