#!/bin/bash
# LLM speed on the GPU machine's 16-core CPU against llama.cpp, same files, same run (see
# /work/shared/device/README.md; carry .devdeps with llama.cpp's libraries in .devdeps/ggml):
#   source .devdeps/devenv.sh && bash tools/llm_device_run.sh
# builds llm_speed, candle-make-random-llama and qmatmul_vs_ggml; writes random TinyLlama-shape
# GGUFs (Q4_0, Q8_0, Q4_K_M, F16), runs tools/bench_llm_vs_llamacpp.py at THREADS (16), then the
# decode matmuls against ggml. Logs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source tools/device_build.sh
B=build-dev-llm
device_build $B llm_speed candle-make-random-llama qmatmul_vs_ggml
echo "built at $((SECONDS-T0)) s"
M=/tmp/models; mkdir -p $M
for t in ${TYPES:-q4_0 q8_0 q4_k_m f16}; do
  [ -f $M/tinyllama-$t.gguf ] || $B/bin/candle-make-random-llama $M/tinyllama-$t.gguf --shape tinyllama --type $t > /dev/null
done
echo "models at $((SECONDS-T0)) s"; ls -la $M
export CANDLE_LLAMA_LIB_DIR=${CANDLE_LLAMA_LIB_DIR:-$PWD/.devdeps/ggml}
timeout ${BENCH_TIMEOUT:-360} python3 tools/bench_llm_vs_llamacpp.py --llm-speed $B/bin/llm_speed $M/tinyllama-*.gguf \
  --threads ${THREADS:-16} --pp ${PP:-128,512} --tg ${TG:-128} --reps ${REPS:-2} --json $OUT/llm_bench.json 2>&1 | tee $OUT/llm_bench.log
echo "bench at $((SECONDS-T0)) s"
timeout 60 $B/bin/qmatmul_vs_ggml --lib-dir $CANDLE_LLAMA_LIB_DIR --threads ${THREADS:-16} --rounds 3 \
  --types ${QTYPES:-q4_0,q8_0,q4_k,q6_k} --shapes 2048x2048,256x2048,5632x2048,2048x5632 --m ${QM:-1} 2>&1 | tail -n +2
echo "done at $((SECONDS-T0)) s"
