#!/usr/bin/env bash
# Regenerates third_party/dawn/webgpu.h from a Dawn git checkout with Dawn's own generator, at the pinned commit,
# and checks it equals the committed copy (exit 1 and a diff if not). --write replaces the copy instead.
# Usage: scripts/dawn_header.sh DAWN_GIT_DIR [--write]    (needs python3 with jinja2: Debian python3-jinja2)
set -euo pipefail
commit=c5d549e250b9225744929ae860b369cb4304a767   # npm webgpu@0.4.0's Dawn
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dawn=${1:?usage: $0 DAWN_GIT_DIR [--write]}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git -C "$dawn" archive "$commit" generator src/dawn/dawn.json | tar -x -C "$tmp"
(cd "$tmp" && python3 generator/dawn_json_generator.py --dawn-json src/dawn/dawn.json \
   --template-dir generator/templates --targets headers --output-dir out >/dev/null)
got="$tmp/out/include/dawn/webgpu.h"
if [ "${2:-}" = --write ]; then
  cp "$got" "$repo/third_party/dawn/webgpu.h"; echo "dawn_header: wrote third_party/dawn/webgpu.h"
elif cmp -s "$got" "$repo/third_party/dawn/webgpu.h"; then
  echo "dawn_header: third_party/dawn/webgpu.h is Dawn ${commit:0:7}'s generated header"
else
  diff -u "$repo/third_party/dawn/webgpu.h" "$got" | head -40; exit 1
fi
