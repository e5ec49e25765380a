#!/usr/bin/env bash
# Stages the subgroup-matrix GEMM probe into .carry/probe for the GPU machine (run there: bash .carry/probe/run.sh,
# CUBLAS=1 for the cuBLAS rows). Needs: the standard webgpu.h (github.com/webgpu-native/webgpu-headers; path in
# $WEBGPU_H), npm webgpu@0.4.0's dist/linux-x64.dawn.node (path in $DAWN_NODE), gcc, xz.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
out="$repo/.carry/probe"; rm -rf "$out" && mkdir -p "$out/k" && tmp=$(mktemp -d)
cp "$WEBGPU_H" "$tmp/webgpu.h"
gcc -O1 -w -I"$tmp" -o "$out/probe" "$here/probe.c" -ldl -lm
# dawn.node imports Node's napi_* functions (some by address): a library of trapping stand-ins satisfies the loader.
nm -D --undefined-only "$DAWN_NODE" | awk '$2 ~ /^napi_/ {printf "void %s(void){__builtin_trap();}\n", $2}' > "$tmp/stub.c"
gcc -shared -fPIC -o "$out/libnapi_stub.so" "$tmp/stub.c"
xz -T2 -c "$DAWN_NODE" > "$out/dawn4.node.xz"
(cd "$out" && python3 "$here/gen.py" > k/list.txt)
cp "$here/run.sh" "$out/run.sh"
