#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): mixed precision (--precision mixed: f16 GEMMs on Dawn's
# subgroup matrices, gemm_sm.wgsl) beside fp32. 1. what the adapter offers; 2. the matmul and q4gsw tests (the Mixed*
# ones run only where the device has subgroup matrices: a skip names what is missing); 3. bench rows in both
# precisions: mm at 4096^3 and the base model's step GEMMs (the three q4gsw products of each linear shape and the
# head), beside run m2's (before issue #14's kernel changes), and a profiled mixed mm; 4. two short Brown runs of
# `base`, fp32 and mixed, same seed, and their final losses side by side.
# Everything into $OUT/mixed/ as it comes (what a timeout leaves comes back too), then $OUT/mixed.tar.gz; the summary
# on stdout. TRAIN_STEPS (default 300) shortens the runs. Typical: ~4 minutes; the timeouts bound it near 10.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/mixed && rm -rf "$d" && mkdir -p "$d"
steps=${TRAIN_STEPS:-300}
.carry/wgtrain devices --subgroup-matrix > "$d/devices.log" 2>&1
grep -iE "adapter|subgroup|shader-f16|f16" "$d/devices.log" | head -20
# 2. Tests (poisoned buffers, as in CI).
WGTRAIN_POISON=1 timeout 120 .carry/wgtrain_tests \
  --gtest_filter='*Mixed*:*MmSizes*:Mm.*:*Q4Gemms*:-Cli.*' > "$d/tests.log" 2>&1
echo "tests: exit $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|no mixed precision here" "$d/tests.log" | sort | uniq -c | head -30
# 3. Bench rows, fp32 then mixed.
for p in fp32 mixed; do
  timeout 80 .carry/wgtrain bench --precision "$p" --only mm --json "$d/bench_mm_$p.json" > "$d/bench_mm_$p.log" 2>&1
  echo "bench mm $p: exit $?"; grep -E "^mm|step|GEMMs|failed|error" "$d/bench_mm_$p.log" | head -20
  timeout 80 .carry/wgtrain bench --precision "$p" --only step_gemm --json "$d/bench_step_$p.json" \
    > "$d/bench_step_$p.log" 2>&1
  echo "bench step_gemm $p: exit $?"; grep -E "step|failed|error" "$d/bench_step_$p.log" | head -20
done
# 3b. The rows beside run m2's (gemm_sm before issue #14's changes), and where the mixed mm's time goes (the absmax
# pass is its own profile rows, "mixed absmax (rows)" and "(tiles)").
python3 - "$d" bench/runs/2026-12-04-h200-m2 <<'PY' | tee -a "$d/summary.txt"
import re, sys
def rows(path):
    out = {}
    try:
        for line in open(path):
            m = re.match(r'^((?:mm|step) .*?\S)\s+([\d.]+) ms', line)
            if m: out[' '.join(m.group(1).split())] = float(m.group(2))
    except OSError:
        pass
    return out
for f in ('bench_mm_mixed', 'bench_step_mixed', 'bench_mm_fp32', 'bench_step_fp32'):
    now, before = rows(f'{sys.argv[1]}/{f}.log'), rows(f'{sys.argv[2]}/{f}.log')
    for k, v in now.items():
        b = before.get(k)
        print(f"{k:<62} {v:8.3f} ms" + (f"  (m2 {b:.3f} ms, x{b / v:.2f})" if b else "  (no m2 row)"))
PY
WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision mixed --only mm > "$d/profile_mm_mixed.log" 2>&1
echo "profiled mm mixed: exit $?"; grep -A8 "^profile" "$d/profile_mm_mixed.log"
# 4. Two short training runs.
for p in fp32 mixed; do
  timeout 130 .carry/wgtrain train --config base --data brown --steps "$steps" --eval-every 100 --precision "$p" \
    --out "/tmp/run-base-$p" --overwrite > "$d/train_$p.log" 2>&1
  echo "train $p: exit $?"; tail -4 "$d/train_$p.log"
  cp "/tmp/run-base-$p/loss.csv" "$d/train_${p}_loss.csv" 2>/dev/null
  # Final training loss (mean of the last 10 steps) and the last validation loss, from loss.csv.
  python3 - "$d/train_${p}_loss.csv" "$p" <<'PY' 2>/dev/null | tee -a "$d/summary.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
li, vi = head.index('train_loss'), head.index('val_loss')  # step,tokens,lr,train_loss,val_loss,seconds
losses = [float(r[li]) for r in body if len(r) > li and r[li]]
vals = [(r[0], float(r[vi])) for r in body if len(r) > vi and r[vi]]
print(f"{sys.argv[2]}: steps {len(losses)}, train loss (mean of last 10) {sum(losses[-10:]) / len(losses[-10:]):.4f}, "
      f"last validation {vals[-1] if vals else None}")
PY
done
tar czf "$out/mixed.tar.gz" -C "$out" mixed
ls -la "$out/mixed.tar.gz"
