#!/usr/bin/env bash
# On the GPU machine (after `BEFORE=<older build> scripts/h200/prepare.sh` here): run (q), each mixed GEMM operand
# reduced once a step (sm_absmax.wgsl's one read for rows and columns, the device's derived cache) against the build
# before it. 1. the mixed GEMM, absmax and attention tests on the matrix units (poisoned outputs); 2. the mixed step
# of both builds, alternated ROUNDS times (clock drift falls on both alike), medians; 3. the step's GEMM rows and
# its per-op profile, after. Everything into $OUT/q/, then $OUT/q.tar.gz; a short table last.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
rounds=${ROUNDS:-3}
d=$out/q && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
WGTRAIN_POISON=1 timeout 150 .carry/wgtrain_tests \
  --gtest_filter='*Mixed*:*GemmSm*:AttentionSm*:*Q4Gemms*:Recording*:-Cli.*' 2>&1 | quiet > "$d/tests.log"
for r in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=.carry/wgtrain; [ "$which" = before ] && bin=.carry/wgtrain_before
    timeout 60 "$bin" bench --precision mixed --only train_step --json "$d/train_$which-$r.json" 2>&1 | quiet \
      >> "$d/train_$which.log"
  done
done
timeout 60 .carry/wgtrain bench --precision mixed --only step_gemm --json "$d/step_gemm.json" 2>&1 | quiet \
  > "$d/step_gemm.log"
for which in before after; do
  bin=.carry/wgtrain; [ "$which" = before ] && bin=.carry/wgtrain_before
  WGTRAIN_PROFILE=1 timeout 90 "$bin" bench --precision mixed --only train_step 2>&1 | quiet > "$d/profile_$which.log"
done
tar czf "$out/q.tar.gz" -C "$out" q
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" "$d/tests.log" | head -12
python3 - "$d" "$rounds" <<'PY'
import json, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def ms(which):
    v = []
    for r in range(1, rounds + 1):
        p = os.path.join(d, f"train_{which}-{r}.json")
        if os.path.exists(p):
            v += [json.loads(l)["seconds"] * 1e3 for l in open(p) if '"train_step"' in l]
    return v
b, a = ms("before"), ms("after")
if b and a:
    print("train_step mixed, median of %d: before %.2f ms, after %.2f ms (x%.3f); all: %s | %s" % (
        rounds, statistics.median(b), statistics.median(a), statistics.median(b) / statistics.median(a),
        " ".join("%.2f" % x for x in b), " ".join("%.2f" % x for x in a)))
PY
grep -hE "dispatches a step|losses" "$d/train_before.log" | head -1
grep -hE "dispatches a step|losses" "$d/train_after.log" | head -1
grep -hE "GPU memory" "$d/profile_after.log" | cut -c1-120
for which in before after; do echo "-- $which"; grep -E "^(mixed|fill|linear|profile)" "$d/profile_$which.log"; done
