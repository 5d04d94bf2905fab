#!/usr/bin/env bash
# On the GPU machine (see ../shared/device/README.md): builds the CUDA backend and test_cuda, runs
# the collectives' tests (candle::Comm through NCCL: tests/cuda/nccl_test.cpp) and writes the logs
# to $OUT. The NcclTwoGpus.* tests need two GPUs (nvidia-h100-x2); with one they skip.
#   source .devdeps/devenv.sh && tools/nccl_device_run.sh [gtest filter, default Nccl*:*Comm*]
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/device_build.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=/tmp/build
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
echo "NCCL: $(ldconfig -p | grep -o 'libnccl.so.2 .*' | head -1)"
env | grep '^NCCL_' | sort
start=$(date +%s)
{ cmake -S . -B "$b" $(device_cmake_args) -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF && \
  timeout 480 cmake --build "$b" -j16 --target candle_cuda test_cuda; } \
  > "$OUT/build.log" 2>&1 || { echo "build failed"; grep -E "error|Error" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
grep -E "warning:" "$OUT/build.log" | grep -E "src/cuda/|tests/cuda/" | sort -u | head -10
log="$OUT/test_cuda_nccl.log"
NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 300 "$b/bin/test_cuda" --gtest_filter="${1:-Nccl*:*Comm*}" > "$log" 2>&1
rc=$?
echo "test_cuda rc=$rc"
echo "passed $(grep -c '^\[       OK \]' "$log"), failed $(grep -c '^\[  FAILED  \] .*(' "$log"), skipped $(grep -c '^\[  SKIPPED \] .*(' "$log")"
grep -E '^\[  SKIPPED \] .*\(' -B2 "$log" | grep -vE '^\[ RUN|^--$' | grep -v 'Skipped$' | sort -u | head -10
grep -E '^\[  FAILED  \] .*\(' "$log" | head -20
grep -E 'Failure|error:|Expected|Which is|WARN' "$log" | head -40
[ $rc -eq 124 ] && { echo "TIMED OUT (a collective waiting for a rank that never came?): last lines"; tail -20 "$log"; }
exit $rc
