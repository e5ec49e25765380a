#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): #14's loss-curve check alone. 300 Brown steps of the base
# preset in fp32, then in mixed precision (same data, seed and evaluation every 100 steps), each run's loss.csv kept,
# and the validation losses side by side with their gaps, the tolerance being run (m)'s 0.15. Into $OUT/train/.
set -uo pipefail
source scripts/h200/env.sh
d=${OUT:-/tmp}/train && rm -rf "$d" && mkdir -p "$d"
steps=${STEPS:-300}
for p in fp32 mixed; do
  timeout 150 .carry/wgtrain train --config base --data brown --steps "$steps" --eval-every 100 --precision "$p" \
    --out "/tmp/run-base-$p" --overwrite > "$d/train_$p.log" 2>&1
  echo "train $p: exit $?"
  cp "/tmp/run-base-$p/loss.csv" "$d/train_${p}_loss.csv" 2>/dev/null
done
python3 - "$d/train_fp32_loss.csv" "$d/train_mixed_loss.csv" <<'PY' | tee "$d/summary.txt"
import csv, sys
def vals(path):
    rows = list(csv.DictReader(open(path)))
    return {int(r["step"]): float(r["val_loss"]) for r in rows if r.get("val_loss")}
f, m = vals(sys.argv[1]), vals(sys.argv[2])
for s in sorted(set(f) & set(m)):
    print(f"step {s}: validation fp32 {f[s]:.4f}, mixed {m[s]:.4f}, gap {abs(f[s] - m[s]):.4f} (tolerance 0.15)")
PY
