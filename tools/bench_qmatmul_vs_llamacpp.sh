#!/usr/bin/env bash
# candle's CPU quantized matmul against llama.cpp's (its prebuilt CPU libraries from tools/peers,
# the variant that scores best on this CPU), in one process on the same weights and activations,
# with the same thread count: LLaMA-7B's shapes, decode (m = 1) and prefill (m = 128, 512).
# ratio = ours / llama.cpp throughput (>= 1: we are faster). Each figure is the median of
# --rounds rounds of about 0.15 s, the two taken alternately.
#   tools/bench_qmatmul_vs_llamacpp.sh [--threads N] [--rounds R] [--types ..] [--shapes ..] [--m ..]
# Env: BUILD_DIR (default build-release; built if the binary is missing), GGML_LIB_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-release}
sub=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [[ -z "${GGML_LIB_DIR:-}" ]]; then
  for d in tools/peers/$sub /work/main/tools/peers/$sub; do
    if [[ -f $d/libggml-base.so ]]; then GGML_LIB_DIR=$d; break; fi
  done
fi
[[ -n "${GGML_LIB_DIR:-}" ]] || { echo "llama.cpp's libraries not found: run tools/install-deps.sh or set GGML_LIB_DIR" >&2; exit 1; }
bin=$BUILD_DIR/bin/qmatmul_vs_ggml
if [[ ! -x $bin ]]; then
  [[ -d $BUILD_DIR ]] || cmake --preset release
  cmake --build "$BUILD_DIR" --target qmatmul_vs_ggml -j"$(nproc)"
fi
threads=2
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores; git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
exec "$bin" --lib-dir "$GGML_LIB_DIR" --threads "$threads" "${args[@]}"
