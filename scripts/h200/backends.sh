#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here, with BEFORE=<a build of the previous commit>): the bench
# rows before and after a runtime change, both backends, in one run, beside PyTorch; then the two-backend kernel
# tests on the GPU (the cooperative-matrix ones run only where the device offers them). Into $OUT.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
clean() { grep -v "^Warning\|^    at"; }
if [ -x .carry/wgtrain_before ]; then
  .carry/wgtrain_before bench --json "$out/before-webgpu.json" 2>&1 | clean > "$out/before-webgpu.log"
  .carry/wgtrain_before bench --backend vulkan --json "$out/before-vulkan.json" 2>&1 | clean > "$out/before-vulkan.log"
fi
.carry/wgtrain bench --json "$out/webgpu.json" 2>&1 | clean | tee "$out/webgpu.log"
.carry/wgtrain bench --backend native-vulkan --json "$out/native.json" 2>&1 | clean | tee "$out/native.log"
.carry/wgtrain bench --backend native-vulkan --coopmat --only linear --json "$out/native-coopmat.json" 2>&1 | clean \
  > "$out/native-coopmat.log"
PYTHONUNBUFFERED=1 python3 bench/torch_bench.py --json "$out/torch.json" > "$out/torch.log" 2>&1
python3 bench/report.py "$out/webgpu.json" "$out/torch.json" "$out/native.json" > "$out/results.md" 2>&1
if [ -x .carry/wgtrain_tests ]; then
  WGTRAIN_POISON=1 .carry/wgtrain_tests --gtest_filter='*AdamWOn*:*FusedCeOn*:*Q4*:*FillOn*:Registry*:Recording*' \
    > "$out/tests.log" 2>&1
  tail -3 "$out/tests.log"
fi
# The table: each row before and after, per backend (ms).
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    rows = {}
    if os.path.exists(p):
        for line in open(p):
            r = json.loads(line); rows[(r["name"], r["shape"])] = r["seconds"] * 1e3
    return rows
bw, aw, bv, av = load("before-webgpu.json"), load("webgpu.json"), load("before-vulkan.json"), load("native.json")
keys = list(dict.fromkeys(list(bw) + list(aw) + list(bv) + list(av)))
print("%-34s %-22s %10s %10s %10s %10s" % ("row", "shape", "webgpu<", "webgpu>", "vulkan<", "native>"))
f = lambda d, k: ("%.3f" % d[k]) if k in d else "-"
for k in keys:
    print("%-34s %-22s %10s %10s %10s %10s" % (k[0][:34], k[1][:22], f(bw, k), f(aw, k), f(bv, k), f(av, k)))
PY
