#!/usr/bin/env bash
# On the GPU machine (after scripts/h200/prepare.sh here): the kernel benchmarks through WebGPU and through the
# native Vulkan backend, the same work through PyTorch, and the joined table, into $OUT.
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
.carry/wgtrain bench --json "$out/webgpu.json" 2>&1 | grep -v "^Warning\|^    at" | tee "$out/webgpu.log"
.carry/wgtrain bench --backend native-vulkan --json "$out/vulkan.json" 2>&1 | tee "$out/vulkan.log"
PYTHONUNBUFFERED=1 python3 bench/torch_bench.py --json "$out/torch.json" 2>&1 | tee "$out/torch.log"
python3 bench/report.py "$out/webgpu.json" "$out/torch.json" "$out/vulkan.json" | tee "$out/results.md"
