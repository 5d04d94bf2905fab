#!/usr/bin/env bash
# The CPU test binaries with the built-in GEMM forced to its AVX2 kernels and OpenBLAS to its
# Haswell ones: an AVX-512 CI machine then also checks the paths an AVX2-only CPU takes
# (tiled == untiled, bits independent of the thread count). Non-zero exit on any failure.
#   tools/ci-isa-check.sh [build dir, default build-release]
# CANDLE_CPU_ISA / OPENBLAS_CORETYPE already set in the environment are kept (e.g. sse).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-release}
export CANDLE_CPU_ISA=${CANDLE_CPU_ISA:-avx2}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
fail=0
for t in test_core test_models test_conv; do
  bin=$B/bin/$t
  if [ ! -x "$bin" ]; then
    echo "ci-isa-check: $bin is not built"
    fail=1
    continue
  fi
  echo "== $t (CANDLE_CPU_ISA=$CANDLE_CPU_ISA OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)"
  if ! "$bin" --gtest_brief=1; then
    echo "ci-isa-check: $t failed"
    fail=1
  fi
done
exit $fail
