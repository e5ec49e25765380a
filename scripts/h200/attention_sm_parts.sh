#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): where the subgroup-matrix attention's time goes. Each
# kernel's text with one part taken out (its global loads replaced by constants, its exps, one or all of its
# matrix products), swapped in through WGTRAIN_KERNEL_OVERRIDES and timed by bench --only attention with the
# kernels forced (WGTRAIN_FORCE_ATTENTION=-3). The results are wrong by design; only the times count.
# Logs into $OUT/parts/, a table last.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/parts && rm -rf "$d" && mkdir -p "$d"
ov=/tmp/parts-overrides && rm -rf "$ov"
python3 - "$ov" <<'PY'
import os, re, sys
root = sys.argv[1]
src = {k: open(f"src/ops/attention/{k}.wgsl").read() for k in ("forward_sm", "backward_dq_sm", "backward_dkv_sm")}
mma = re.compile(r"subgroupMatrixMultiplyAccumulate\(([^,]+), ([^,]+), ([^)]+)\)")
def no_loads(s):
    s = re.sub(r"load_[kvq]\([^()]*\)( \* p\.scale)?", "vec4<f32>(f32(i) * 1e-3)", s)
    return re.sub(r"gbuf\[[^\]]*\] \* down", "vec4<f32>(f32(i) * 1e-9)", s)
variants = {
    "base": {k: s for k, s in src.items()},
    "noload": {k: no_loads(s) for k, s in src.items()},
    "nomma": {k: mma.sub(r"\3", s) for k, s in src.items()},
    "noexp": {k: re.sub(r"\bexp\(", "(", s) for k, s in src.items()},
    "f_nos": {"forward_sm": src["forward_sm"].replace(
        "acc = subgroupMatrixMultiplyAccumulate(qf[j], kt, acc);", "")},
    "f_nopv": {"forward_sm": src["forward_sm"].replace(
        "acc = subgroupMatrixMultiplyAccumulate(pf[kk], vf, acc);", "")},
}
# Candidate kernels staged by hand (git-ignored, carried): .carry/cand/<kernel>_<name>.wgsl
for f in sorted(os.listdir(".carry/cand")) if os.path.isdir(".carry/cand") else []:
    kernel = next(k for k in src if f.startswith(k + "_"))
    variants[f[len(kernel) + 1:-5]] = {kernel: open(f".carry/cand/{f}").read()}
for name, files in variants.items():
    os.makedirs(f"{root}/{name}")
    for k, s in files.items():
        open(f"{root}/{name}/attention.{k}.wgsl", "w").write(s)
PY
names=$(ls "$ov")
for v in $names; do
  WGTRAIN_KERNEL_OVERRIDES="$ov/$v" WGTRAIN_FORCE_ATTENTION=-3 timeout 60 .carry/wgtrain bench --precision mixed \
    --only attention 2>&1 | grep -v "^Warning\|^    at" > "$d/$v.log"
done
tar czf "$out/parts.tar.gz" -C "$out" parts
for v in $names; do
  printf "%-8s" "$v"; grep -E "^attention (fwd|bwd dq|bwd dkv) \(sub" "$d/$v.log" | awk '{printf "  %s %s", $3, $(NF-3)}'
  grep -m1 -iE "error|failed" "$d/$v.log"; echo
done
