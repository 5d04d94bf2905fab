#!/usr/bin/env bash
# On the GPU machine (see ../shared/device/README.md): builds the CUDA backend and the test binaries,
# runs the CUDA tests and every device-parametrized test on /cuda, and writes the logs to $OUT.
#   source .devdeps/devenv.sh && tools/cuda_device_run.sh [gtest filter for test_core, default */cuda]
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=/tmp/bcuda
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
zl=""
[ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
start=$(date +%s)
{ cmake -S . -B "$b" $gen $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_BENCH=ON \
    -DCANDLE_BUILD_EXAMPLES=ON && \
  timeout 420 cmake --build "$b" -j16 --target candle_cuda test_cuda test_core ${EXTRA_TARGETS:-}; } \
  > "$OUT/build.log" 2>&1 || { echo "build failed"; grep -E "error|Error" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
"$b/bin/test_cuda" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (FAILED|  OK|SKIPPED) " "$OUT/test_cuda.log" | sed 's/ (.*//' | sort | uniq -c | sort -rn | head -5
grep -E "Failure|error|FAILED" "$OUT/test_cuda.log" | head -20
"$b/bin/test_core" --gtest_filter="${1:-*/cuda}" > "$OUT/test_core.log" 2>&1; echo "test_core rc=$?"
tail -3 "$OUT/test_core.log"
grep -E "^\[  FAILED  \]" "$OUT/test_core.log" | sort -u | head -60
