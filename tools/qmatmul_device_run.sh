#!/bin/bash
# The quantized matmul on the GPU machine's 16-core AVX-512 (VNNI) CPU (see /work/shared/device/README.md;
# carry .devdeps, with llama.cpp's libggml-base.so and libggml-cpu-*.so copied into .devdeps/ggml):
#   source .devdeps/devenv.sh && bash tools/qmatmul_device_run.sh
# builds test_quantized and the llama.cpp peer runner, runs the quantized tests at the machine's ISA
# (AVX-512 VNNI kernels against the scalar reference, bit for bit) and forced to AVX2, then the
# benchmark against llama.cpp at 16 threads. Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
grep -m1 'model name' /proc/cpuinfo; grep -o -m1 'avx512_vnni' /proc/cpuinfo
B=build-dev-q
{ cmake -S . -B $B $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF && \
  timeout 300 cmake --build $B -j16 --target test_quantized qmatmul_vs_ggml qmatmul_bench; } > $OUT/build.log 2>&1
echo "build rc $? at $((SECONDS-T0)) s"; grep -E "error|FAILED" $OUT/build.log | head -5
$B/bin/test_quantized --gtest_brief=1 > $OUT/test_native.log 2>&1; echo "test_quantized native rc $?"; tail -3 $OUT/test_native.log
CANDLE_QMATMUL_ISA=avx2 $B/bin/test_quantized --gtest_brief=1 --gtest_filter='*QMatMul*' > $OUT/test_avx2.log 2>&1
echo "test_quantized QMatMul forced avx2 rc $?"; tail -2 $OUT/test_avx2.log
GGML_LIB_DIR=${GGML_LIB_DIR:-$PWD/.devdeps/ggml} BUILD_DIR=$B timeout ${BENCH_TIMEOUT:-300} bash tools/bench_qmatmul_vs_llamacpp.sh --threads ${THREADS:-16} --rounds ${ROUNDS:-3} \
  > $OUT/bench.log 2>&1
echo "bench rc $?"; cat $OUT/bench.log | tail -40
echo "done at $((SECONDS-T0)) s"
