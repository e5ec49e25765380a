#!/usr/bin/env bash
# On the GPU machine (after `BEFORE=<older build> scripts/h200/prepare.sh` here): one change measured against the
# build before it. 1. TESTS (a gtest filter) on this GPU, poisoned outputs; 2. the training step of both builds in
# each of PRECISIONS (default "mixed fp32"), alternated ROUNDS times (default 3) so that drift of the clocks falls on
# both alike; medians; 3. each build's step profiled per op, and its memory report. Into $OUT/$NAME/ (NAME default
# "ab"), then $OUT/$NAME.tar.gz; a short table last. (Earlier one-off forms of this: absmax_q.sh, gemm_ab.sh.)
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
name=${NAME:-ab}
rounds=${ROUNDS:-3}
precisions=${PRECISIONS:-mixed fp32}
d=$out/$name && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
bin_of() { if [ "$1" = before ]; then echo .carry/wgtrain_before; else echo .carry/wgtrain; fi; }
if [ -n "${TESTS:-}" ]; then
  WGTRAIN_POISON=1 timeout 200 .carry/wgtrain_tests --gtest_filter="$TESTS:-Cli.*" 2>&1 | quiet > "$d/tests.log"
fi
for r in $(seq 1 "$rounds"); do
  for p in $precisions; do
    for which in before after; do
      timeout 90 "$(bin_of $which)" bench --precision "$p" --only train_step --json "$d/train_${p}_$which-$r.json" \
        2>&1 | quiet >> "$d/train_${p}_$which.log"
    done
  done
done
for p in $precisions; do
  for which in before after; do
    WGTRAIN_PROFILE=1 timeout 90 "$(bin_of $which)" bench --precision "$p" --only train_step 2>&1 | quiet \
      > "$d/profile_${p}_$which.log"
  done
done
tar czf "$out/$name.tar.gz" -C "$out" "$name"
[ -f "$d/tests.log" ] && grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" "$d/tests.log" | head -12
python3 - "$d" "$rounds" $precisions <<'PY'
import json, os, statistics, sys
d, rounds, precisions = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def ms(p, which):
    v = []
    for r in range(1, rounds + 1):
        f = os.path.join(d, f"train_{p}_{which}-{r}.json")
        if os.path.exists(f):
            v += [json.loads(l)["seconds"] * 1e3 for l in open(f) if '"train_step"' in l]
    return v
print("| precision | before ms | after ms | before/after | all before | all after |")
for p in precisions:
    b, a = ms(p, "before"), ms(p, "after")
    if b and a:
        print("| %s | %.2f | %.2f | %.3f | %s | %s |" % (p, statistics.median(b), statistics.median(a),
              statistics.median(b) / statistics.median(a), " ".join("%.2f" % x for x in b),
              " ".join("%.2f" % x for x in a)))
PY
for p in $precisions; do
  for which in before after; do
    echo "-- $p $which"
    grep -hE "dispatches a step" "$d/train_${p}_$which.log" | head -1
    grep -hE "GPU memory" "$d/profile_${p}_$which.log" | cut -c1-150
    grep -E "^profile" "$d/profile_${p}_$which.log"
  done
done
