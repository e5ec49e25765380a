#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): every row #14 asks for, from one build on one machine, in
# two calls of under 10 minutes each, one straight after the other so that the machine stays the same:
#   PART=2, the step: the `base` step in both precisions (two rounds, alternating; each with its pool high-water mark
#     by category), `transformers` on the same weights and batch (fp32 eager, fp32 SDPA, bf16 autocast), both steps
#     profiled per op, 300 Brown steps in each precision (train_pair.sh), requant as it is.
#   PART=1, the kernels: requant's forms with inplace_requant.sh (one round; it runs the fused_ce and requant GPU
#     tests too) and fused_ce's at 1024 and 256 threads a row; the mixed GEMM and attention tests on the GPU
#     (poisoned outputs); the whole kernel table on WebGPU and native Vulkan beside PyTorch (bench.sh's three runs
#     and report.py's table); the GEMMs at 4096^3 and the step's shapes in fp32 and mixed beside cuBLAS fp32 (TF32
#     off) and bf16 (gemm_shapes.sh with a one-shape occupancy probe).
# Each part into $OUT/final<PART>/ as it comes (a call cut short keeps what it finished); the short tables last.
set -uo pipefail
part=${PART:?PART=1 or PART=2}
out=${OUT:?OUT}
d=$out/final$part && rm -rf "$d" && mkdir -p "$d"
quiet() { grep -v "^Warning\|^    at"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv,noheader |
  tee "$d/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'transformers', transformers.__version__)" 2>&1 | tee -a "$d/gpu.txt"
git log -1 --format='build of %h %s' 2>/dev/null | cut -c1-120 | tee -a "$d/gpu.txt"
source scripts/h200/env.sh

if [ "$part" = 1 ]; then
  OUT=$d ROUNDS=1 timeout 240 bash scripts/h200/inplace_requant.sh > "$d/inplace_requant.txt" 2>&1
  echo "inplace_requant: exit $?"
  # fused_ce's split kernel at 256 threads a row too (more workgroups an SM to overlap one's reads with another's
  # wait and writes; inplace_requant.sh's rows are at 1024).
  for b in webgpu native-vulkan; do
    WGTRAIN_BACKEND=$b WGTRAIN_FORCE_FUSED_CE=-1,3 WGTRAIN_FORCE_FUSED_CE_WG=256 timeout 100 .carry/wgtrain bench \
      --only copy,fused_ce --json "$d/fused_ce256_$b.json" 2>&1 | quiet > "$d/fused_ce256_$b.log"
  done
  WGTRAIN_POISON=1 timeout 120 .carry/wgtrain_tests --gtest_filter='*Mixed*:AttentionSm.*:-Cli.*' 2>&1 | quiet \
    > "$d/tests_mixed.log"
  grep -hE "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$d/tests.log" "$d/tests_mixed.log" | head -12
  timeout 200 .carry/wgtrain bench --json "$d/webgpu.json" 2>&1 | quiet > "$d/webgpu.log"
  echo "bench webgpu: exit $?"
  timeout 120 .carry/wgtrain bench --backend native-vulkan --json "$d/vulkan.json" 2>&1 | quiet > "$d/vulkan.log"
  echo "bench native-vulkan: exit $?"
  PYTHONUNBUFFERED=1 timeout 90 python3 bench/torch_bench.py --json "$d/torch.json" > "$d/torch.log" 2>&1
  echo "torch_bench: exit $?"
  python3 bench/report.py "$d/webgpu.json" "$d/torch.json" "$d/vulkan.json" > "$d/results.md" 2>&1
  OUT=$d PROBE=4096x128x4096 SHAPES=4096x4096x4096,8192x640x640,8192x1728x640,8192x640x1728,8192x8192x640 \
    timeout 150 bash scripts/h200/gemm_shapes.sh > "$d/gemm_shapes.txt" 2>&1
  echo "gemm_shapes: exit $?"
  echo "== requant and fused_ce"
  sed -n '/^requant_/,$p' "$d/inplace_requant.txt"
  for b in webgpu native-vulkan; do
    echo "== fused_ce, 256 threads a row, $b"; grep -E "^fused_ce|^copy \(dense|^copy \(buffer" "$d/fused_ce256_$b.log"
  done
  echo "== kernel table (of ceiling: PyTorch's copy / fp32 matmul)"
  grep -E "^Ceilings|^\| (copy|fused_ce|adamw|q4gsw|mm fp32|linear)" "$d/results.md" | cut -d'|' -f2-6,10-12
  echo "== GEMMs (TFLOP/s)"
  sed -n '/^M x N x K/,/^TFLOP/p' "$d/gemm_shapes/tables.txt"
else
  step_line() { grep -hE "^train_step  |GPU memory|losses of" "$1" | tail -3 | cut -c1-170; }
  for r in 1 2; do
    for p in mixed fp32; do
      timeout 60 .carry/wgtrain bench --precision "$p" --only train_step --json "$d/step_${p}_$r.json" 2>&1 | quiet \
        > "$d/step_${p}_$r.log"
      echo "== $p $r" && step_line "$d/step_${p}_$r.log"
    done
  done
  dump=/tmp/train-dump && rm -rf "$dump" && mkdir -p "$dump"
  timeout 60 .carry/wgtrain bench --only train_step --json "$d/webgpu_dump.json" --dump "$dump" 2>&1 | quiet \
    > "$d/webgpu_dump.log"
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_hf_llama.py --dump "$dump" --json "$d/hf_train.json" 2>&1 |
    tee "$d/hf_train.log" | grep -iE "eager|sdpa|autocast" | cut -c1-170
  for p in mixed fp32; do
    WGTRAIN_PROFILE=1 timeout 60 .carry/wgtrain bench --precision "$p" --only train_step 2>&1 | quiet \
      > "$d/profile_$p.log"
  done
  OUT=$d timeout 270 bash scripts/h200/train_pair.sh
  # requant as it is, one and two code words a thread (part 1 times its forms apart).
  WGTRAIN_FORCE_Q4GSW_REQUANT=1,2 timeout 60 .carry/wgtrain bench --only copy,requant 2>&1 | quiet > "$d/requant.log"
  grep -E "^q4gsw|^copy \(dense" "$d/requant.log"
fi
tar czf "$out/final$part.tar.gz" -C "$out" "final$part"
