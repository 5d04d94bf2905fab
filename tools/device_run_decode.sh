#!/usr/bin/env bash
# One device call for CUDA decode work (../shared/device/README.md; pass .devdeps as carry):
# builds /tmp/bcuda, runs test_cuda, test_core and test_quantized on /cuda, llm_speed with graph
# decoding on random TinyLlama GGUFs (TYPES, tg128) and q4_0 at tg32 / tg512, then the kernel
# profile of a q4_0 decode step (tools/cuda_profile_decode.sh), and candle-llm on the q4_0 file
# (--decode graph against cache: what a user waits for). Logs under $OUT.
#   tools/device_run_decode.sh
set -uo pipefail
source .devdeps/devenv.sh
OUT=${OUT:-/tmp/out}
# candle::tokenizers (candle-llm) finds PCRE2 through the carried pkgconf and .pc files
export PKG_CONFIG_LIBDIR=/opt/devdeps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/devdeps
EXTRA_TARGETS="llm_speed candle-make-random-llama test_quantized ${LLM_TARGETS-candle-llm}" timeout 300 tools/cuda_device_run.sh 'none' | head -12
/tmp/bcuda/bin/test_cuda --gtest_filter='CudaDecode*:CudaAttention*' 2>&1 | grep -E "largest|Failure|OK \]|FAILED|Which|actual" | head -30
/tmp/bcuda/bin/test_quantized --gtest_filter='*/cuda' > $OUT/test_quantized.txt 2>&1; echo "test_quantized rc=$?"; grep -E "FAILED|Failure" $OUT/test_quantized.txt | head
/tmp/bcuda/bin/test_core --gtest_filter='*/cuda' > $OUT/test_core.log 2>&1; echo "test_core rc=$?"; tail -1 $OUT/test_core.log
TYPES="${TYPES:-q4_0 f16 q4_k_m}" TG=128 REPS=2 LLM_ARGS="--decode graph" LLM_TIMEOUT=60 tools/llm_cuda_run.sh 2>&1 | grep -v "^rc=0"
for tg in 32 512; do
  timeout 60 /tmp/bcuda/bin/llm_speed /tmp/models/tinyllama-q4_0.gguf --device cuda --pp 0 --tg $tg --reps 1 --decode graph 2>&1 | grep -E "BENCH|nodes"
done
if [ -x /tmp/bcuda/bin/candle-llm ]; then
  for d in graph cache; do
    timeout 60 /tmp/bcuda/bin/candle-llm --model /tmp/models/tinyllama-q4_0.gguf --device cuda --decode $d \
      --temperature 0 --max-tokens 256 --ignore-eos --prompt "Once upon a time" > /dev/null 2> $OUT/candle_llm_$d.err
    echo "candle-llm --decode $d rc=$?: $(grep -E "prompt:|error" $OUT/candle_llm_$d.err | tail -1)"
  done
else
  echo "candle-llm not built (candle::tokenizers off?)"; grep -i "tokenizers" $OUT/build.log | head -3
fi
TYPES="q4_0" tools/cuda_profile_decode.sh 2>&1 | head -${PROFILE_LINES:-60}
