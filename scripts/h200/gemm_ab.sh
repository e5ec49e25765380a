#!/usr/bin/env bash
# On the GPU machine (after `BEFORE=<older build> scripts/h200/prepare.sh` here): the GEMM rows and the training
# step of two builds, alternated ROUNDS times so that drift of the GPU's clocks falls on both alike; the medians per
# row side by side. Into $OUT.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
rounds=${ROUNDS:-3}
clean() { grep -v "^Warning\|^    at"; }
for r in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=.carry/wgtrain; [ "$which" = before ] && bin=.carry/wgtrain_before
    for only in linear mm train_step; do
      "$bin" bench --only "$only" --json "$out/$which-$r.json" 2>&1 | clean >> "$out/$which.log"
    done
  done
done
.carry/wgtrain devices > "$out/devices.log" 2>&1
python3 - "$out" "$rounds" <<'PY'
import json, sys, os, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
def load(which):
    rows = {}
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"{which}-{r}.json")
        if not os.path.exists(p): continue
        for line in open(p):
            x = json.loads(line); rows.setdefault((x["name"], x["shape"]), []).append(x["seconds"] * 1e3)
    return rows
b, a = load("before"), load("after")
print("%-36s %-24s %10s %10s %8s" % ("row (median of %d, ms)" % rounds, "shape", "before", "after", "after/before"))
for k in dict.fromkeys(list(b) + list(a)):
    mb = statistics.median(b[k]) if k in b else None
    ma = statistics.median(a[k]) if k in a else None
    ratio = "%.3f" % (ma / mb) if mb and ma else "-"
    f = lambda v: "%.3f" % v if v else "-"
    print("%-36s %-24s %10s %10s %8s" % (k[0][:36], k[1][:24], f(mb), f(ma), ratio))
PY
