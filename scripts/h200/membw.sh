#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): issue #14's memory-bound rows, each kernel's forms
# forced side by side in one bench call per backend (WGTRAIN_FORCE_*; the forms are listed in
# src/ops/fused_ce/fused_ce_force.h, src/ops/q4gsw/q4gsw_force.h, src/ops/shape/transpose_force.h):
#   copy (WebGPU): the transposing copy with tiles of 32, 64 and 128 x 32 words (f1, f2, f4) and the dense copy,
#     whose GB/s is the ceiling every row below is a share of;
#   fused_ce 8192 x 32000 and 8192 x 128256 (both backends): forms f0 (the kernel before), f-1 (the new choice), f1
#     and f2 (streamed, 4 loads at once, forwards / pass 2 backwards), f3 and f4 (8 held a thread, 4 or 2 loads at
#     once), f5 (a long row over several workgroups, read once: split.wgsl), at 1024 and 256 threads a row;
#   q4gsw_requant 4096^2 g32 (both backends): f0 (requant.wgsl after scales.wgsl) against f1 (one pass);
#   adamw_step alone (both backends), then after the fused_ce rows in the same process (native Vulkan: run (e)'s
#     41%), with the GPU's clocks sampled meanwhile, and after the requant rows only;
# then the tests of these kernels on this GPU, and a table of every row last. Everything into $OUT/membw/.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/membw && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
bench() {  # bench NAME BACKEND ARGS...: one call, its log and JSON under $d
  local name=$1 backend=$2
  shift 2
  timeout 100 .carry/wgtrain bench --backend "$backend" --json "$d/$name.json" "$@" 2>&1 | quiet > "$d/$name.log"
}
WGTRAIN_FORCE_COPY=1,2,4 bench copy webgpu --only copy
for b in webgpu native-vulkan; do
  WGTRAIN_FORCE_FUSED_CE=0,-1,1,2,3,4,5 WGTRAIN_FORCE_FUSED_CE_WG=1024,256 bench "fused_ce_$b" "$b" --only fused_ce
  WGTRAIN_FORCE_Q4GSW_REQUANT=0,1 bench "requant_$b" "$b" --only q4gsw_requant
  bench "adamw_$b" "$b" --only adamw
done
# AdamW after the fused_ce rows (the order of run (e)), clocks sampled every 200 ms.
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 200 > "$d/clocks.csv" 2>&1 &
  smi=$!
fi
bench adamw_after_fused_ce native-vulkan --only fused_ce,adamw
[ -n "${smi:-}" ] && kill "$smi"
# After a small row only (64 MiB of latent): is it any row before, or the multi-GB ones?
bench adamw_after_requant native-vulkan --only q4gsw_requant,adamw
WGTRAIN_POISON=1 timeout 120 .carry/wgtrain_tests \
  --gtest_filter='*FusedCe*:*Q4Requant*:Contiguous.*:*AdamW*:KernelTemplate.*:KernelDump.*' 2>&1 | quiet > "$d/tests.log"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" | head -12
[ -s "$d/clocks.csv" ] && echo "clocks during adamw_after_fused_ce (sm, mem MHz; min / max):" &&
  awk -F', ' 'NR > 1 && $2 + 0 > 0 { s = $2 + 0; m = $3 + 0; if (!n++ || s < s0) s0 = s; if (s > s1) s1 = s;
    if (n == 1 || m < m0) m0 = m; if (m > m1) m1 = m } END { print "  sm", s0, "/", s1, " mem", m0, "/", m1 }' \
    "$d/clocks.csv"
python3 - "$d" <<'EOF'
import json, sys, glob, os
d = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(d, "*.json")), key=os.path.getmtime):  # in the order they ran
    for line in open(f):
        line = line.strip()
        if line:
            r = json.loads(line)
            r["file"] = os.path.basename(f)[:-5]
            rows.append(r)
copy = [r for r in rows if r["name"] == "copy (dense, add 0)"]
ceiling = copy[0]["bytes"] / copy[0]["seconds"] if copy else 0
print(f"ceiling: dense copy {ceiling * 1e-9:.0f} GB/s (WebGPU, this run; the % of every row, native ones too)")
print(f"| {'call':<22} | {'row':<30} | {'shape':<15} | {'ms':>8} | {'GB/s':>6} | {'% copy':>6} |")
for r in rows:
    if not r["bytes"]:
        continue
    gbs = r["bytes"] / r["seconds"]
    pct = f"{100 * gbs / ceiling:.0f}" if ceiling else "n/a"
    print(f"| {r['file']:<22} | {r['name']:<30} | {r['shape']:<15} | {r['seconds'] * 1e3:8.3f} | "
          f"{gbs * 1e-9:6.0f} | {pct:>6} |")
EOF
