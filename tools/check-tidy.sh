#!/usr/bin/env bash
# clang-tidy (the root .clang-tidy; every warning is an error) over the C++ sources of every library:
# the core, ops, nn, models, image, io, datasets, tokenizers and generation, and the backends' host code
# (src/cpu, src/vulkan, src/cuda; the .cu kernels are not C++ that clang-tidy parses here) and the
# quantized tensors (src/quantized, with the two checks its block codecs trip by design turned off in
# src/quantized/.clang-tidy), with the compile commands of a configured build (default build-release).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-release}
command -v run-clang-tidy >/dev/null || { echo "check-tidy: run-clang-tidy is not installed (apt-get install clang-tidy)"; exit 1; }
[ -f "$B/compile_commands.json" ] || { echo "check-tidy: $B/compile_commands.json missing (configure first)"; exit 1; }
if ! run-clang-tidy -p "$B" -j "$(nproc)" -quiet 'src/(core|ops|nn|models|io|datasets|image|tokenizers|generation|cpu|vulkan|cuda|quantized)/[^/]*\.cpp$' > "$B/clang-tidy.log" 2>&1; then
  grep -E 'warning:|error:' "$B/clang-tidy.log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u | head -50
  echo "check-tidy: clang-tidy found problems (full log: $B/clang-tidy.log)"
  exit 1
fi
echo "check-tidy: ok"
