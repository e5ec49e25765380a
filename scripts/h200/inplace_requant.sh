#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here; run z8): fused_ce's split kernel in place and out of place
# beside rows.wgsl holding 8 (f3), both backends, 1024 threads a row; the fused_ce and requant tests on this GPU;
# requant's one-pass kernel with one and two code words a thread (f1, f2), and with stages changed or left out
# through kernel overrides made here from the sources (bench-only; all but vec4exact give wrong codes):
# "vec4exact" the exact test for all four lanes of a vec4 with any flagged lane (quantize4's cost before run z8),
# "guess" the guess alone (no exact test), "noround" no rounding at all (a cheap function of the inputs: the
# memory side alone), "noscale" one scale word for all (plain form) and no scales written (+scales). If
# .carry/ov5665 exists (quantize.wgsl at 5665a1a) it runs too, though that file predates quantize8. Two rounds of
# the requant forms, alternating (ROUNDS=1: one). The raw logs stay in $OUT; the rows printed last.
set -uo pipefail
out=${OUT:?OUT}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
source scripts/h200/env.sh
quiet() { grep -v "^Warning\|^    at"; }
mkdir -p /tmp/ov/noround /tmp/ov/noscale /tmp/ov/guess /tmp/ov/vec4exact
python3 - <<'PY'
q = open("src/ops/q4gsw/quantize.wgsl").read()
cheap = """fn quantize8(lo: vec4<f32>, hi: vec4<f32>, s: f32) -> u32 {
  let x = bitcast<vec4<u32>>(lo) ^ bitcast<vec4<u32>>(hi);
  return x.x ^ x.y ^ x.z ^ x.w ^ bitcast<u32>(s);
}
"""
open("/tmp/ov/noround/q4gsw.quantize.wgsl", "w").write(q[:q.index("fn quantize8(")] + cheap)
need = "var need = g0.need | (g1.need << 4u);"
assert need in q, need
open("/tmp/ov/guess/q4gsw.quantize.wgsl", "w").write(q.replace(need, "var need = 0u;"))
open("/tmp/ov/vec4exact/q4gsw.quantize.wgsl", "w").write(
    q.replace(need, "var need = select(0u, 0xfu, g0.need != 0u) | select(0u, 0xf0u, g1.need != 0u);"))
r = open("src/ops/q4gsw/requant_groups.wgsl").read()
for a, b in [("if (x.live && lane == 0u) {", "if (x.live && lane == 0u && s == 12345.0) {"),
             ("s = scales[x.g * p.rows + x.n];", "s = scales[0];")]:
    assert a in r, a
    r = r.replace(a, b)
open("/tmp/ov/noscale/q4gsw.requant_groups.wgsl", "w").write(r)
PY
WGTRAIN_POISON=1 timeout 200 .carry/wgtrain_tests --gtest_filter='*FusedCe*:*Q4Requant*' 2>&1 | quiet > "$out/tests.log"
forms="head vec4exact guess noround noscale $([ -d .carry/ov5665 ] && echo 5665)"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for f in $forms; do
    ov=""
    case $f in noround|guess|vec4exact|noscale) ov=/tmp/ov/$f ;; 5665) ov=.carry/ov5665 ;; esac
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
