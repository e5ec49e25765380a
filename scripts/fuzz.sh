#!/usr/bin/env bash
# Fuzzes the safetensors reader with libFuzzer (clang, with AddressSanitizer and UBSan) for a bounded time, growing
# the corpus in tests/corpus/safetensors, which the unit tests replay in CI.
#   scripts/fuzz.sh [seconds]      (default 120)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secs=${1:-120}
command -v clang++ >/dev/null || { echo "fuzz.sh needs clang++ and libclang-rt-14-dev (Debian)" >&2; exit 1; }
cmake -S "$repo" -B "$repo/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DWGTRAIN_FUZZ=ON -DWGTRAIN_BUILD_TESTS=OFF >/dev/null
cmake --build "$repo/build-fuzz" --target wgtrain_fuzz_safetensors
corpus="$repo/tests/corpus/safetensors"
mkdir -p "$corpus"
work=$(mktemp -d)
cp "$corpus"/* "$work"/ 2>/dev/null || true
"$repo/build-fuzz/wgtrain_fuzz_safetensors" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -dict="$repo/fuzz/safetensors.dict" "$work"
# Keep only inputs that add coverage, so the committed corpus stays small.
minimal=$(mktemp -d)
"$repo/build-fuzz/wgtrain_fuzz_safetensors" -merge=1 "$minimal" "$work" 2>&1 | tail -1
rm -rf "$corpus" && mv "$minimal" "$corpus" && rm -rf "$work"
echo "fuzz.sh: corpus now $(ls "$corpus" | wc -l) files in ${corpus#$repo/}"
