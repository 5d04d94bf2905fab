#!/usr/bin/env bash
# On the GPU machine (carry .devdeps): builds the CUDA backend, test_cuda and llm_speed in /tmp/bcuda,
# runs test_cuda's attention / decode / quantized tests (TF: the filter; then the attention and decode
# tests again with CANDLE_CUDA_ATTN_DECODE=$ALT_FORM, default tile; TESTS=0 skips them), writes random
# GGUFs (SPECS="shape:type ...") and gives for each file and each variant (VARIANTS: environment
# settings, one a run) pp512 / tg128 of a recorded decode graph and the recorded step replayed back to
# back after QUEUED tokens (default 2 200 1000). Session 30's A/B:
#   SPECS="tinyllama:q4_0 llama7b:q4_0 tinyllama:q4_k_m" VARIANTS='X=0 CANDLE_CUDA_FUSE_QUANT=0' bash tools/cuda_decode_ab.sh
source .devdeps/devenv.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
b=/tmp/bcuda
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  s0=$(date +%s)
  export PKG_CONFIG_LIBDIR=/opt/devdeps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/devdeps
  zl=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zl="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
  { cmake -S . -B $b -G Ninja $zl -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_BENCH=ON \
      -DCANDLE_BUILD_EXAMPLES=ON && timeout 400 cmake --build $b -j16 --target candle_cuda llm_speed \
      candle-make-random-llama test_cuda; } > $OUT/build.log 2>&1 ||
    { echo "build failed"; grep -E "error" $OUT/build.log | head; tail -5 $OUT/build.log; exit 1; }
  echo "built in $(( $(date +%s) - s0 )) s"
fi
M=/tmp/models; mkdir -p $M
for s in ${SPECS:-tinyllama:q4_0 llama7b:q4_0}; do
  f=$M/${s%%:*}-${s##*:}.gguf
  [ -f $f ] || timeout 200 $b/bin/candle-make-random-llama $f --shape ${s%%:*} --type ${s##*:} > /dev/null 2>&1 &
done
if [ "${TESTS:-1}" = 1 ]; then
  timeout 200 $b/bin/test_cuda --gtest_filter="${TF:-*Attention*:CudaDecode*:CudaQuantized*}" > $OUT/tc.log 2>&1
  echo "test_cuda rc=$? $(grep -cE '^\[       OK' $OUT/tc.log) ok"; grep -E "^\[  FAILED|Failure" $OUT/tc.log | cut -c1-250 | head -12
  CANDLE_CUDA_ATTN_DECODE=${ALT_FORM:-tile} timeout 150 $b/bin/test_cuda --gtest_filter='*Attention*:CudaDecode*' > $OUT/tc_rows.log 2>&1
  echo "test_cuda (${ALT_FORM:-tile}) rc=$? $(grep -cE '^\[       OK' $OUT/tc_rows.log) ok"; grep -E "^\[  FAILED|Failure" $OUT/tc_rows.log | cut -c1-250 | head -12
fi
wait
for s in ${SPECS:-tinyllama:q4_0 llama7b:q4_0}; do
  f=$M/${s%%:*}-${s##*:}.gguf
  for e in ${VARIANTS:-"X=0" "CANDLE_CUDA_FUSE_QUANT=0" "CANDLE_CUDA_ATTN_DECODE=rows" "CANDLE_CUDA_ATTN_DECODE=0"}; do
    r=$(env $e timeout 100 $b/bin/llm_speed $f --device cuda --pp ${PP:-512} --tg 128 --reps 2 --decode graph 2>&1 | grep -E 'BENCH|error' | tr '\n' ' ')
    q=""
    for n in ${QUEUED:-2 200 1000}; do
      q="$q $n:$(env $e timeout 60 $b/bin/llm_speed $f --device cuda --pp 0 --tg $n --reps 1 --decode graph --host-profile 1 2>&1 | grep -oE '[0-9.]+ us a step' | cut -d' ' -f1)"
    done
    echo "$s $e: ${r//BENCH test=/} | queued us:$q"
  done
done
