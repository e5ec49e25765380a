#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here, with BEFORE_KERNELS staged, see below): run (p), the
# software-pipelined gemm_sm.wgsl and the prefetching backward_dkv_sm.wgsl against their texts before (HEAD's,
# handed in through WGTRAIN_KERNEL_OVERRIDES from .carry/before/, the same binary otherwise), in one call:
# 1. the mixed GEMM and attention tests on the matrix units (poisoned outputs); 2. mm at 4096^3, the step's GEMMs,
# the subgroup-matrix attention rows and the mixed step, before and after; 3. the step's per-op profile, after.
# Everything into $OUT/p/ as it comes, then $OUT/p.tar.gz; a short table last.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/p && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
WGTRAIN_POISON=1 timeout 150 .carry/wgtrain_tests \
  --gtest_filter='*Mixed*:*GemmSm*:AttentionSm*:Attention*:*Q4Gemms*:-Cli.*' 2>&1 | quiet > "$d/tests.log"
for v in before after; do
  ov=""; [ "$v" = before ] && ov="$PWD/.carry/before"
  export WGTRAIN_FORCE_ATTENTION=-3
  WGTRAIN_KERNEL_OVERRIDES=$ov timeout 60 .carry/wgtrain bench --precision mixed --only mm \
    --json "$d/mm_$v.json" 2>&1 | quiet > "$d/mm_$v.log"
  WGTRAIN_KERNEL_OVERRIDES=$ov timeout 60 .carry/wgtrain bench --precision mixed --only step_gemm \
    --json "$d/step_gemm_$v.json" 2>&1 | quiet > "$d/step_gemm_$v.log"
  WGTRAIN_KERNEL_OVERRIDES=$ov timeout 60 .carry/wgtrain bench --precision mixed --only attention \
    --json "$d/attention_$v.json" 2>&1 | quiet > "$d/attention_$v.log"
  unset WGTRAIN_FORCE_ATTENTION
  WGTRAIN_KERNEL_OVERRIDES=$ov timeout 60 .carry/wgtrain bench --precision mixed --only train_step \
    --json "$d/train_$v.json" 2>&1 | quiet > "$d/train_$v.log"
done
WGTRAIN_PROFILE=1 timeout 90 .carry/wgtrain bench --precision mixed --only train_step 2>&1 | quiet \
  > "$d/profile_after.log"
tar czf "$out/p.tar.gz" -C "$out" p
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure" "$d/tests.log" | head -12
python3 - "$d" <<'PY'
import re, sys
def rows(path):
    out = {}
    try:
        for line in open(path):
            m = re.match(r'^((?:mm|step|attention|train_step) .*?\S)\s+([\d.]+) ms', line)
            if m: out[' '.join(m.group(1).split())] = float(m.group(2))
    except OSError:
        pass
    return out
for f in ('mm', 'step_gemm', 'attention', 'train'):
    b, a = rows(f'{sys.argv[1]}/{f}_before.log'), rows(f'{sys.argv[1]}/{f}_after.log')
    for k in a:
        if k in b: print(f"{k[:64]:<64} {b[k]:8.3f} -> {a[k]:8.3f} ms  x{b[k] / a[k]:.2f}")
PY
grep -E "^train_step .*tokens|losses" "$d/train_after.log" | cut -c1-150
grep -E "^(linear|attention|mixed)" "$d/profile_after.log" | head -12
