#!/usr/bin/env bash
# On the GPU machine (staged by build.sh): subgroup-matrix GEMM variants through Dawn (npm webgpu@0.4.0), beside
# cuBLAS (CUBLAS=1). Prints one line a kernel: time, TFLOP/s, and the exactness check.
cd "$(dirname "$0")"
(for f in ../deb/*.deb; do dpkg -x "$f" /; done; ldconfig) >/dev/null 2>&1
[ -f dawn4.node ] || xz -dk dawn4.node.xz
./probe ./dawn4.node 6 4096 2 8 20 2>&1 | grep -v "^Warning" | grep -v "^    at" | head -30
while read -r f gx gy f32in; do
  if [ "$f32in" = 1 ]; then export F32IN=1; else unset F32IN; fi
  r=$(KERNEL=$f GX=$gx GY=$gy ./probe ./dawn4.node 6 4096 1 1 20 2>&1 | grep -E "timed|check|rror" | grep -v "previous error" | grep -v "^    at" | tr '\n' ' ')
  echo "$f | $r"
done < k/list.txt
[ -n "$CUBLAS" ] && python3 - <<'PY'
import torch, time
torch.backends.cuda.matmul.allow_tf32 = False
for dt in (torch.float16, torch.bfloat16, torch.float32):
    a = torch.randn(4096, 4096, device='cuda', dtype=dt); b = torch.randn(4096, 4096, device='cuda', dtype=dt)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(50): a @ b
    torch.cuda.synchronize(); s = (time.perf_counter() - t) / 50
    print(f"cuBLAS {dt} 4096^3: {s*1e3:.3f} ms, {2*4096**3/s/1e12:.1f} TFLOP/s")
PY
