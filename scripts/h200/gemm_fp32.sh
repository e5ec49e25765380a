#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): every entry of the fp32 GEMM's tiling table
# (src/ops/matmul/gemm_tiling.h) forced in turn through WGTRAIN_FORCE_GEMM: `bench --only mm` (4096^3, A and B as
# views, and step_gemm: the train_step model's GEMMs), then the GEMM tests with every entry forced
# (GemmTilings.*) and the matmul / q4gsw suites at the table's choice, then those suites under each entry. Last, a
# table: one line per bench row, one column per entry (mm rows in TFLOP/s, step rows in ms), the best entry of each
# row. Into $OUT/gemm/. Under 4 minutes: what is still to run after the times below is skipped, and said so.
# ONLY=step_gemm times the step's products alone (shorter); TESTS=0 leaves the tests and suites out; BENCH_S=<s>
# moves the time after which entries are skipped (160 s).
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
d=$out/gemm && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
# The table's size, from the bench's header line ("entry 0 of N").
count=$(WGTRAIN_FORCE_GEMM=0 timeout 30 .carry/wgtrain bench --only no-such-row 2>&1 | grep -o "entry 0 of [0-9]*" | grep -o "[0-9]*$")
echo "tiling entries: ${count:?the bench printed no tiling count}"
# `--only mm` runs the mm rows and step_gemm (its name holds "mm" too). Entries left after BENCH_S seconds are
# skipped (said so), so that the tests and the table still come within the call.
for n in $(seq 0 $((count - 1))); do
  if [ "$SECONDS" -gt "${BENCH_S:-160}" ]; then echo "entry $n and later skipped: out of time"; break; fi
  WGTRAIN_FORCE_GEMM=$n timeout 40 .carry/wgtrain bench --only "${ONLY:-mm}" --json "$d/mm_$n.json" 2>&1 | quiet > "$d/mm_$n.log"
  grep -ho "tiling forced.*" "$d/mm_$n.log"
  grep -h "failed" "$d/mm_$n.log" | head -2
done
[ "${TESTS:-1}" = 1 ] && WGTRAIN_POISON=1 timeout 100 .carry/wgtrain_tests \
  --gtest_filter='*GemmTilings*:*MmSizes*:Mm.*:*BmmSizes*:Bmm.*:*LinearCases*:Linear.*:*Q4Gemms*' 2>&1 | quiet \
  > "$d/tests.log"
[ -f "$d/tests.log" ] && grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" | head -20
# The matmul and q4gsw suites themselves with each entry forced (the test binary takes WGTRAIN_FORCE_GEMM too),
# while time is left: one line per entry.
for n in $( [ "${TESTS:-1}" = 1 ] && seq 0 $((count - 1)) ); do
  if [ "$SECONDS" -gt 200 ]; then echo "suites: entry $n and later not run: out of time"; break; fi
  WGTRAIN_FORCE_GEMM=$n WGTRAIN_POISON=1 timeout 30 .carry/wgtrain_tests \
    --gtest_filter='*MmSizes*:Mm.*:*BmmSizes*:Bmm.*:*LinearCases*:Linear.*:*Q4Gemms*' 2>&1 | quiet > "$d/suites_$n.log"
  echo "suites, entry $n: $(grep -E "^\[  (PASSED|FAILED) " "$d/suites_$n.log" | tr '\n' ' ')"
done
# Optionally, the whole training step with given entries forced: STEP_ENTRIES="0 6" (one train_step bench each).
for n in ${STEP_ENTRIES:-}; do
  WGTRAIN_FORCE_GEMM=$n timeout 60 .carry/wgtrain bench --only train_step --json "$d/train_step_$n.json" 2>&1 | quiet \
    > "$d/train_step_$n.log"
  echo "entry $n:"; grep -hE "^train_step.*(tokens/s|losses)" "$d/train_step_$n.log"
done
python3 - "$d" "$count" <<'PY'
# The table. Beside it, the same products through PyTorch's cuBLAS in fp32 (TF32 off; CUDA events, 20 runs after 3),
# and the best entry's speed as a fraction of it: the issue's goal is 0.85.
import json, sys, os
d, count = sys.argv[1], int(sys.argv[2])
names, rows = {}, {}
for n in range(count):
    log = os.path.join(d, f"mm_{n}.log")
    if os.path.exists(log):
        head = [l for l in open(log) if "tiling forced" in l]
        names[n] = head[0].split("tiling forced: ")[1].strip() if head else "?"
    p = os.path.join(d, f"mm_{n}.json")
    if not os.path.exists(p): continue
    for line in open(p):
        x = json.loads(line)
        rows.setdefault((x["name"], x["shape"]), {})[n] = x

def cublas_seconds(keys):
    try:
        import torch
        assert torch.cuda.is_available(), "no CUDA device"
    except Exception as e:
        print("no cuBLAS column:", e)
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    res = {}
    def timed(fn):
        for _ in range(3): fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20): fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 20 * 1e-3
    rnd = lambda *s: torch.rand(*s, device="cuda") * 2 - 1
    for name, shape in keys:
        M, N, K = (int(v) for v in shape.split()[0].split("x"))  # mm rows: s x s x s; step rows: M x N x K
        if name.startswith("mm "):
            a, b = rnd(M, K), rnd(K, N)
            if "A as a view" in name: a = a.t().contiguous().t()
            if "B as a view" in name: b = b.t().contiguous().t()
            res[(name, shape)] = timed(lambda: torch.mm(a, b))
        elif "linear_q4gsw_backward" in name:  # dx = dy W (W dequantised: f32 here)
            dy, w = rnd(M, N), rnd(N, K)
            res[(name, shape)] = timed(lambda: torch.mm(dy, w))
        elif "linear_q4gsw" in name:  # y = x W^T
            x, w = rnd(M, K), rnd(N, K)
            res[(name, shape)] = timed(lambda: torch.mm(x, w.t()))
        elif "linear_dW" in name:  # grad += dy^T x
            dy, x, g = rnd(M, N), rnd(M, K), rnd(N, K)
            res[(name, shape)] = timed(lambda: g.addmm_(dy.t(), x))
        elif "mm (head)" in name:  # logits = h E^T
            h, e = rnd(M, K), rnd(N, K)
            res[(name, shape)] = timed(lambda: torch.mm(h, e.t()))
        torch.cuda.empty_cache()
    return res

try:
    cub = cublas_seconds(list(rows))
except Exception as e:  # the table matters more than its reference column
    print("no cuBLAS column:", repr(e))
    cub = {}
print("entries:")
for n in range(count): print("  %d: %s" % (n, names.get(n, "?")))
print("%-44s" % "row (mm: TFLOP/s; step: ms)" + "".join("%8d" % n for n in range(count)) + "   best  cuBLAS  best/cuBLAS")
total = {}
for (name, shape), by in rows.items():
    tflops = name.startswith("mm ")
    conv = lambda x_flops, sec: x_flops / sec * 1e-12 if tflops else sec * 1e3
    vals = {n: conv(x["flops"], x["seconds"]) for n, x in by.items()}
    if not tflops:
        for n, v in vals.items(): total.setdefault(n, []).append(v)
    best = (max if tflops else min)(vals, key=vals.get)
    ref = ""
    if (name, shape) in cub:
        c = conv(next(iter(by.values()))["flops"], cub[(name, shape)])
        ref = ("%8.2f" if tflops else "%8.3f") % c + "  %5.2fx" % (vals[best] / c if tflops else c / vals[best])
    label = (name.replace(" fp32", "").replace("step ", "") + " " + shape)[:44]
    print("%-44s" % label + "".join(("%8.2f" if tflops else "%8.3f") % vals[n] if n in vals else "%8s" % "-"
                                     for n in range(count)) + "   %4d" % best + ref)
nrows = max((len(v) for v in total.values()), default=0)
full = {n: sum(v) for n, v in total.items() if len(v) == nrows}
if full:
    print("%-44s" % "step GEMMs, sum (ms)" + "".join("%8.3f" % full[n] if n in full else "%8s" % "-"
                                                      for n in range(count)) + "   %4d" % min(full, key=full.get))
PY
