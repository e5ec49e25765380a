#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): why the GEMMs fall short of cuBLAS at the step's shapes
# and not at 4096^3. `mm` (f32 [M, K] x [K, N], row-major) at the step's 8192 x 640 x 640 and then growing one
# extent at a time: M (more output tiles, so more waves of workgroups), K (a longer k-loop per tile, so less of a
# tile's time in its start and its stores) and N; each in fp32 (the op's choice of tiling) and mixed, beside
# PyTorch's cuBLAS in fp32 (TF32 off) and bf16 on the same tensors' shapes, in the same call. If the ratio to cuBLAS
# climbs with K and not with M, what the step's shapes lack is k-loop length; if with M, waves. Then an occupancy
# probe: one column of 128 x 128 output tiles (N = 128, K = 4096) with t tiles for t just at and just past
# multiples of the SM count (132 on both cards): the time steps up where t passes the workgroups the GPU runs at
# once, so the step's size says how many of the mixed kernel's workgroups an SM holds. Into $OUT/gemm_shapes/; the
# tables last.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/gemm_shapes && rm -rf "$d" && mkdir -p "$d"
shapes=${SHAPES:-4096x4096x4096,8192x640x640,16384x640x640,32768x640x640,65536x640x640,131072x640x640,8192x640x1280,8192x640x2560,8192x640x5120,8192x640x10240,8192x1280x640,8192x2560x640,8192x5120x640,8192x1728x640,8192x640x1728}
probe=${PROBE:-$(for t in 66 132 133 198 264 265 330 396 397 528 529; do printf "%dx128x4096," $((128 * t)); done)}
shapes="$shapes,${probe%,}"
for p in fp32 mixed; do
  timeout 150 .carry/wgtrain bench --precision "$p" --only no-such-row --mm-shapes "$shapes" --json "$d/$p.json" 2>&1 |
    grep -v "^Warning\|^    at" > "$d/$p.log"
  head -1 "$d/$p.log"
done
python3 - "$d" <<'PY' | tee "$d/tables.txt"
import json, sys, os
d = sys.argv[1]
ours, ms = {}, {}  # (precision, shape): TFLOP/s, ms
for p in ("fp32", "mixed"):
    f = os.path.join(d, p + ".json")
    if os.path.exists(f):
        for line in open(f):
            x = json.loads(line)
            ours[(p, x["shape"])] = x["flops"] / x["seconds"] * 1e-12
            ms[(p, x["shape"])] = x["seconds"] * 1e3
shapes, probe = [], []
for (_, s) in ours:
    if s.endswith("x128x4096"):
        if s not in probe: probe.append(s)
    elif s not in shapes: shapes.append(s)
print("occupancy probe: N = 128, K = 4096, t tiles of 128 x 128 in one column (ms; a step up past t = 132 w says w")
print("workgroups an SM at once)")
print("%6s %9s %9s" % ("t", "fp32", "mixed"))
for s in probe:
    t = int(s.split("x")[0]) // 128
    print("%6d %9s %9s" % (t, *("%.4f" % ms[(p, s)] if (p, s) in ms else "-" for p in ("fp32", "mixed"))))
print()
import torch
def timed(fn):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 20
    s.record()
    for _ in range(n): fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e-3
torch.backends.cuda.matmul.allow_tf32 = False
ref = {}
for sh in shapes:
    M, N, K = (int(v) for v in sh.split("x"))
    for dt, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        a = (torch.rand(M, K, device="cuda") * 2 - 1).to(dt)
        b = (torch.rand(K, N, device="cuda") * 2 - 1).to(dt)
        ref[(name, sh)] = 2.0 * M * N * K / timed(lambda: torch.mm(a, b)) * 1e-12
        del a, b
    torch.cuda.empty_cache()
rows = []
print("%-18s %7s %7s %6s   %7s %7s %6s   %s" % ("M x N x K", "fp32", "cuBLAS", "ratio", "mixed", "bf16", "ratio",
                                              "tiles 128x128"))
for sh in shapes:
    M, N, K = (int(v) for v in sh.split("x"))
    f, c = ours.get(("fp32", sh)), ref[("fp32", sh)]
    m, bf = ours.get(("mixed", sh)), ref[("bf16", sh)]
    tiles = -(-M // 128) * -(-N // 128)
    fmt = lambda v: "%7.1f" % v if v else "%7s" % "-"
    rat = lambda a, b: "%5.2fx" % (a / b) if a else "%6s" % "-"
    line = "%-18s %s %s %s   %s %s %s   %d" % (sh, fmt(f), fmt(c), rat(f, c), fmt(m), fmt(bf), rat(m, bf), tiles)
    print(line)
    rows.append({"shape": sh, "fp32": f, "cublas_fp32": c, "mixed": m, "cublas_bf16": bf})
json.dump(rows, open(os.path.join(d, "table.json"), "w"), indent=1)
print("TFLOP/s; cuBLAS through torch.mm, TF32 off for fp32; tiles: output tiles of 128 x 128 (132 SMs on an H100 SXM, 132 on the H200)")
PY
