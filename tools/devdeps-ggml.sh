#!/usr/bin/env bash
# Packs llama.cpp's prebuilt libraries (the npm peer of tools/peers) that the GPU machine's CPU
# benchmarks run beside ours into .devdeps-ggml/ggml.tar.xz: the base, the loader, libllama and the
# Sapphire Rapids CPU variant only, xz-compressed (1.8 MB: the carry limit is 64 MiB with the
# tracked files and .devdeps, and the whole folder of variants is 28 MB). On the GPU machine:
#   mkdir -p /tmp/ggml && tar -C /tmp/ggml -xJf .devdeps-ggml/ggml.tar.xz
#   CANDLE_LLAMA_LIB_DIR=/tmp/ggml tools/decode_scaling_device_run.sh ...
# Options: VARIANTS (CPU variants to include, default "sapphirerapids").
set -euo pipefail
root=$(git rev-parse --show-toplevel)
src=$root/tools/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -d "$src" ] || { echo "devdeps-ggml: $src is missing (npm install in tools/peers)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src"/libggml-base.so "$src"/libggml.v0.5.0.so "$src"/libllama.v0.5.0.so "$tmp"/
for v in ${VARIANTS:-sapphirerapids}; do cp "$src/libggml-cpu-$v.so" "$tmp"/; done
mkdir -p "$root/.devdeps-ggml"
tar -C "$tmp" -cJf "$root/.devdeps-ggml/ggml.tar.xz" .
ls -l "$root/.devdeps-ggml/ggml.tar.xz"
