#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): every entry of the fp32 GEMM's tiling table
# (src/ops/matmul/gemm_tiling.h) forced in turn through WGTRAIN_FORCE_GEMM: `bench --only mm` (4096^3, A and B as
# views, and step_gemm: the train_step model's GEMMs), then the GEMM tests with every entry forced
# (GemmTilings.*) and the matmul / q4gsw suites at the table's choice, then those suites under each entry. Last, a
# table: one line per bench row, one column per entry (mm rows in TFLOP/s, step rows in ms), the best entry of each
# row. Into $OUT/gemm/. Under 4 minutes: what is still to run after the times below is skipped, and said so.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/gemm && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
# The table's size, from the bench's header line ("entry 0 of N").
count=$(WGTRAIN_FORCE_GEMM=0 timeout 30 .carry/wgtrain bench --only no-such-row 2>&1 | grep -o "entry 0 of [0-9]*" | grep -o "[0-9]*$")
echo "tiling entries: ${count:?the bench printed no tiling count}"
# `--only mm` runs the mm rows and step_gemm (its name holds "mm" too). Entries left after 170 s are
# skipped (said so), so that the tests and the table still come within the call.
for n in $(seq 0 $((count - 1))); do
  if [ "$SECONDS" -gt 170 ]; then echo "entry $n and later skipped: out of time"; break; fi
  WGTRAIN_FORCE_GEMM=$n timeout 40 .carry/wgtrain bench --only mm --json "$d/mm_$n.json" 2>&1 | quiet > "$d/mm_$n.log"
  grep -ho "tiling forced.*" "$d/mm_$n.log"
  grep -h "failed" "$d/mm_$n.log" | head -2
done
WGTRAIN_POISON=1 timeout 100 .carry/wgtrain_tests \
  --gtest_filter='*GemmTilings*:*MmSizes*:Mm.*:*BmmSizes*:Bmm.*:*LinearCases*:Linear.*:*Q4Gemms*' 2>&1 | quiet \
  > "$d/tests.log"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" | head -20
# The matmul and q4gsw suites themselves with each entry forced (the test binary takes WGTRAIN_FORCE_GEMM too),
# while time is left: one line per entry.
for n in $(seq 0 $((count - 1))); do
  if [ "$SECONDS" -gt 225 ]; then echo "suites: entry $n and later not run: out of time"; break; fi
  WGTRAIN_FORCE_GEMM=$n WGTRAIN_POISON=1 timeout 30 .carry/wgtrain_tests \
    --gtest_filter='*MmSizes*:Mm.*:*BmmSizes*:Bmm.*:*LinearCases*:Linear.*:*Q4Gemms*' 2>&1 | quiet > "$d/suites_$n.log"
  echo "suites, entry $n: $(grep -E "^\[  (PASSED|FAILED) " "$d/suites_$n.log" | tr '\n' ' ')"
done
# Optionally, the whole training step with given entries forced: STEP_ENTRIES="0 6" (one train_step bench each).
for n in ${STEP_ENTRIES:-}; do
  WGTRAIN_FORCE_GEMM=$n timeout 60 .carry/wgtrain bench --only train_step --json "$d/train_step_$n.json" 2>&1 | quiet \
    > "$d/train_step_$n.log"
  echo "entry $n:"; grep -hE "^train_step.*(tokens/s|losses)" "$d/train_step_$n.log"
done
python3 - "$d" "$count" <<'PY'
import json, sys, os
d, count = sys.argv[1], int(sys.argv[2])
names, rows = {}, {}
for n in range(count):
    log = os.path.join(d, f"mm_{n}.log")
    if os.path.exists(log):
        head = [l for l in open(log) if "tiling forced" in l]
        names[n] = head[0].split("tiling forced: ")[1].strip() if head else "?"
    p = os.path.join(d, f"mm_{n}.json")
    if not os.path.exists(p): continue
    for line in open(p):
        x = json.loads(line)
        rows.setdefault((x["name"], x["shape"]), {})[n] = x
print("entries:")
for n in range(count): print("  %d: %s" % (n, names.get(n, "?")))
print("%-44s" % "row (mm: TFLOP/s; step: ms)" + "".join("%8d" % n for n in range(count)) + "   best")
total = {}
for (name, shape), by in rows.items():
    tflops = name.startswith("mm ")
    vals = {n: (x["flops"] / x["seconds"] * 1e-12 if tflops else x["seconds"] * 1e3) for n, x in by.items()}
    if not tflops:
        for n, v in vals.items(): total.setdefault(n, []).append(v)
    best = (max if tflops else min)(vals, key=vals.get)
    label = (name.replace(" fp32", "").replace("step ", "") + " " + shape)[:44]
    print("%-44s" % label + "".join(("%8.2f" if tflops else "%8.3f") % vals[n] if n in vals else "%8s" % "-"
                                     for n in range(count)) + "   %d" % best)
nrows = max((len(v) for v in total.values()), default=0)
full = {n: sum(v) for n, v in total.items() if len(v) == nrows}
if full:
    print("%-44s" % "step GEMMs, sum (ms)" + "".join("%8.3f" % full[n] if n in full else "%8s" % "-"
                                                      for n in range(count)) + "   %d" % min(full, key=full.get))
PY
