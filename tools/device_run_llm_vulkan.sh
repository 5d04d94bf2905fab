#!/usr/bin/env bash
# One device call: the LLM tests and speed on both GPU backends of the H200 machine, CUDA and Vulkan
# (NVIDIA's ICD). Needs .devdeps from ../shared/device/prepare + tools/devdeps-tokenizers.sh +
# tools/devdeps-vulkan-spv.sh (the carried SPIR-V stands in for glslang-tools); carry .devdeps.
# Builds /tmp/bcuda with Vulkan on, runs test_quantized's device tests (LlmDevice*, QMatMulDevice*,
# */cuda, */vulkan), then llm_speed on random TinyLlama GGUFs (TYPES) on vulkan and cuda.
#   tools/device_run_llm_vulkan.sh
set -uo pipefail
source .devdeps/devenv.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=/tmp/bcuda
zl=""
[ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
export PKG_CONFIG_LIBDIR=/opt/devdeps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/devdeps
start=$(date +%s)
{ cmake -S . -B $b -G Ninja $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=ON \
    -DCANDLE_GLSLANG_VALIDATOR=$PWD/.devdeps/vk/glslangValidator -DCANDLE_BUILD_BENCH=ON -DCANDLE_BUILD_EXAMPLES=ON &&
  timeout 400 cmake --build $b -j16 --target candle_cuda candle_vulkan test_quantized llm_speed \
    candle-make-random-llama ${EXTRA_TARGETS:-}; } > $OUT/build.log 2>&1 ||
  { echo "build failed"; grep -E "error|Error" $OUT/build.log | head -30; tail -20 $OUT/build.log; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
vulkaninfo --summary 2>/dev/null | grep -E "deviceName|driverVersion" | head -2
$b/bin/test_quantized --gtest_filter="${TEST_FILTER:-LlmDevice*:QMatMulDevice*:*/cuda:*/vulkan}" > $OUT/tq.log 2>&1
echo "test_quantized rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|largest|Failure" $OUT/tq.log | head -40
B=$b/bin M=/tmp/models; mkdir -p $M
for t in ${TYPES:-q4_0 q8_0 q4_k_m f16}; do
  f=$M/tinyllama-$t.gguf
  [ -f $f ] || timeout 120 $B/candle-make-random-llama $f --shape tinyllama --type $t > /dev/null 2>&1
  for d in ${DEVICES:-vulkan cuda}; do
    args=""; [ $d = cuda ] && args="--decode graph"
    timeout ${LLM_TIMEOUT:-90} $B/llm_speed $f --device $d --pp ${PP:-512} --tg ${TG:-128} --reps ${REPS:-2} $args \
      > $OUT/llm_${t}_$d.log 2>&1
    echo "$t $d rc=$?: $(grep -E "BENCH|round-trip|error" $OUT/llm_${t}_$d.log | tr '\n' ' ' | cut -c1-400)"
  done
done
