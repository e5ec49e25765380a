#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here; run z8): fused_ce's split kernel in place and out of place
# beside rows.wgsl holding 8 (f3), both backends, 1024 threads a row; the fused_ce and requant tests on this GPU;
# requant's one-pass kernel with one and two code words a thread (f1, f2), and taken apart by leaving stages out,
# through kernel overrides made here from the sources (bench-only, their codes are wrong): "noround" quantize4
# replaced by a cheap function of its inputs (the memory side alone), "guess" quantize4's guess alone (no exact
# test, even where a lane needs it), "noscale" one scale word for all (plain form) and no scales written (+scales).
# If .carry/ov5665 exists (quantize.wgsl at 5665a1a, before the exact test's scaling), it runs too. Two rounds of
# the requant forms, alternating (ROUNDS=1: one). The raw logs stay in $OUT; the rows printed last.
set -uo pipefail
out=${OUT:?OUT}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
source scripts/h200/env.sh
quiet() { grep -v "^Warning\|^    at"; }
mkdir -p /tmp/ov/noround /tmp/ov/noscale /tmp/ov/guess
python3 - <<'PY'
q = open("src/ops/q4gsw/quantize.wgsl").read()
q = q[:q.index("fn quantize4(")] + """fn quantize4(x: vec4<f32>, s: f32) -> u32 {
  return (bitcast<u32>(x.x) ^ bitcast<u32>(x.y) ^ bitcast<u32>(x.z) ^ bitcast<u32>(x.w) ^ bitcast<u32>(s)) & 0xffffu;
}
"""
open("/tmp/ov/noround/q4gsw.quantize.wgsl", "w").write(q)
g = open("src/ops/q4gsw/quantize.wgsl").read()
a = "if (a >= 0x1p-100f && a <= 0x1p100f && all(guessed)) {"
assert a in g, a
open("/tmp/ov/guess/q4gsw.quantize.wgsl", "w").write(g.replace(a, "if (true) {"))
r = open("src/ops/q4gsw/requant_groups.wgsl").read()
for a, b in [("if (x.live && lane == 0u) {", "if (x.live && lane == 0u && s == 12345.0) {"),
             ("s = scales[x.g * p.rows + x.n];", "s = scales[0];")]:
    assert a in r, a
    r = r.replace(a, b)
open("/tmp/ov/noscale/q4gsw.requant_groups.wgsl", "w").write(r)
PY
WGTRAIN_POISON=1 timeout 200 .carry/wgtrain_tests --gtest_filter='*FusedCe*:*Q4Requant*' 2>&1 | quiet > "$out/tests.log"
forms="head noround guess noscale $([ -d .carry/ov5665 ] && echo 5665)"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for f in $forms; do
    ov=""
    case $f in noround|guess|noscale) ov=/tmp/ov/$f ;; 5665) ov=.carry/ov5665 ;; esac
    env WGTRAIN_FORCE_Q4GSW_REQUANT=1,2 ${ov:+WGTRAIN_KERNEL_OVERRIDES=$ov} timeout 60 .carry/wgtrain bench \
      --only copy,requant 2>&1 | quiet > "$out/requant_${f}_$round.log"
  done
done
for b in webgpu native-vulkan; do
  WGTRAIN_BACKEND=$b WGTRAIN_FORCE_FUSED_CE=-1,3,-1 WGTRAIN_FORCE_FUSED_CE_WG=1024 timeout 150 .carry/wgtrain bench \
    --only copy,fused_ce --json "$out/fused_ce_$b.json" 2>&1 | quiet > "$out/fused_ce_$b.log"
done
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/tests.log" | head
for f in "$out"/requant_*.log; do echo "$(basename "$f"):"; grep -E "^q4gsw|^copy \(dense" "$f"; done
for b in webgpu native-vulkan; do
  echo "== $b"
  grep -E "^fused_ce|^copy \(dense|^copy \(buffer" "$out/fused_ce_$b.log"
done
