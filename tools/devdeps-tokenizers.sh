#!/usr/bin/env bash
# Adds to .devdeps (../shared/device/prepare) what the GPU machine needs to build candle::tokenizers
# and candle-llm: PCRE2 and pkgconf from Debian, and ICU 72 (the host has only ICU 74's run-time
# libraries, and ICU's symbols carry its version) repacked as one slim package (headers, libicuuc
# and libicudata only: Debian's two ICU packages are 20 MB, over the carry limit beside the tree).
# Drops the Vulkan build tools (the CUDA device runs build with -DCANDLE_VULKAN=OFF).
#   DEVDEPS_EXTRA="..." ../shared/device/prepare && tools/devdeps-tokenizers.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)/.devdeps/debs"
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/devdeps-lists'
apt-get $o download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 pkgconf pkgconf-bin \
  libpkgconf3 2>&1 | grep -v '^Get:' || true
tmp=$(mktemp -d)
(cd "$tmp" && apt-get $o download libicu-dev libicu72 2>&1 | grep -v '^Get:' || true)
mkdir -p "$tmp/x" "$tmp/pkg/DEBIAN" "$tmp/pkg/usr/lib/x86_64-linux-gnu" "$tmp/pkg/usr/include"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/x"; done
cp -a "$tmp/x/usr/include/unicode" "$tmp/pkg/usr/include/"
cp -a "$tmp"/x/usr/lib/x86_64-linux-gnu/libicu{uc,data}.so* "$tmp/pkg/usr/lib/x86_64-linux-gnu/"
printf 'Package: candle-icu72-slim\nVersion: 72.1\nArchitecture: amd64\nMaintainer: candle-cpp\nDescription: ICU 72 uc headers and libraries for the GPU machine\n' \
  > "$tmp/pkg/DEBIAN/control"
dpkg-deb -Zxz -b "$tmp/pkg" candle-icu72-slim_72.1_amd64.deb >/dev/null
rm -rf "$tmp" libicu-dev_*.deb libicu72_*.deb spirv-tools_*.deb glslang-tools_*.deb libvulkan-dev_*.deb
du -sh .. | sed 's/^/.devdeps: /'
