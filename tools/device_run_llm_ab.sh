#!/usr/bin/env bash
# One device call: build the CUDA backend (no Vulkan) on the GPU machine, optionally run the CUDA LLM
# tests, then llm_speed on random GGUFs of each SHAPE x TYPE once per value of an environment switch,
# so that a change and its switch are measured in the same run (docs/performance.md's A/B tables).
#   AB_VAR=CANDLE_CUDA_ATTN_GEMM AB_VALUES="0 1" SHAPES="tinyllama llama7b" TYPES="q4_0 f16" \
#     [TESTS=1] [PP=512] [TG=128] [REPS=2] tools/device_run_llm_ab.sh
# Needs .devdeps from ../shared/device/prepare + tools/devdeps-tokenizers.sh; carry .devdeps.
set -uo pipefail
source .devdeps/devenv.sh
export PKG_CONFIG_LIBDIR=/opt/devdeps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/devdeps
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
b=/tmp/bcuda
zl=""
[ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
start=$(date +%s)
{ cmake -S . -B $b -G Ninja $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_BENCH=ON \
    -DCANDLE_BUILD_EXAMPLES=ON &&
  timeout 420 cmake --build $b -j16 --target candle_cuda test_cuda test_quantized llm_speed \
    candle-make-random-llama ${EXTRA_TARGETS:-}; } > $OUT/build.log 2>&1 ||
  { echo "build failed"; grep -E "error" $OUT/build.log | head; tail -5 $OUT/build.log; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
if [ -n "${TESTS:-}" ]; then
  $b/bin/test_cuda > $OUT/tc.log 2>&1
  echo "test_cuda rc=$? $(grep -cE '^\[       OK' $OUT/tc.log) ok"
  grep -E "^\[  FAILED|Failure|CUDA vs CPU" $OUT/tc.log | cut -c1-200 | head -12
  $b/bin/test_quantized --gtest_filter='QMatMulDevice*:*/cuda:LlmDevice*' > $OUT/tq.log 2>&1
  echo "test_quantized rc=$? $(grep -cE '^\[       OK' $OUT/tq.log) ok"
  grep -E "^\[  FAILED|Failure" $OUT/tq.log | head
fi
M=/tmp/models
mkdir -p $M
for shape in ${SHAPES:-tinyllama}; do
  for t in ${TYPES:-q4_0}; do
    f=$M/$shape-$t.gguf
    [ -f $f ] || timeout 200 $b/bin/candle-make-random-llama $f --shape $shape --type $t > /dev/null 2>&1
    for v in ${AB_VALUES:-default}; do
      env_set=""
      [ "$v" != default ] && env_set="${AB_VAR:?AB_VAR names the switch}=$v"
      r=$(env $env_set timeout ${LLM_TIMEOUT:-100} $b/bin/llm_speed $f --device cuda --pp ${PP:-512} \
            --tg ${TG:-128} --reps ${REPS:-2} --decode graph 2>&1 | grep -E 'BENCH|error' | tr '\n' ' ')
      echo "$shape $t ${env_set:-(default)}: ${r//BENCH test=/}"
    done
  done
done
echo "end $(( $(date +%s) - start )) s"
