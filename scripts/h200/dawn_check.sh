#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): wgtrain on npm webgpu@0.4.0's Dawn. Prints what
# `wgtrain devices` sees without and with --subgroup-matrix (features enabled, subgroup-matrix shapes), then runs the
# ABI, device and feature tests there, and a few kernel tests as a smoke test of the device. Logs into $OUT.
# Expect: shader-f16 and subgroups "enabled" in both listings; with --subgroup-matrix, subgroup-matrix "enabled" and
# its shapes (f16 x f16 -> f32, ...); every test passed.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
quiet() { grep -v "^Warning\|^    at"; }
echo "== wgtrain devices"; .carry/wgtrain devices 2>&1 | quiet | tee "$out/devices.log"
echo "== wgtrain devices --subgroup-matrix"
.carry/wgtrain devices --subgroup-matrix 2>&1 | quiet | tee "$out/devices-sm.log"
if [ -x .carry/wgtrain_tests ]; then
  WGTRAIN_POISON=1 .carry/wgtrain_tests --gtest_filter='Abi.*:Device.*:Features.*:*FillOn*:*AdamWOn*' \
    2>&1 | quiet > "$out/tests.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" "$out/tests.log" | tail -20
fi
# What the subgroup-matrix toggles cost or save the existing kernels (should subgroup matrices become the default?):
# the training step, without and with --subgroup-matrix.
for flag in "" --subgroup-matrix; do
  echo "== bench train_step ${flag:-(default)}"
  timeout 200 .carry/wgtrain bench $flag --only train_step --json "$out/bench${flag:+-sm}.json" 2>&1 | quiet |
    tee "$out/bench${flag:+-sm}.log" | tail -4
done
