#!/usr/bin/env bash
# LLM speed on the H200 through the CUDA backend (after tools/cuda_device_run.sh built /tmp/bcuda with
# EXTRA_TARGETS including "llm_speed candle-make-random-llama"):
#   source .devdeps/devenv.sh && TYPES="q4_0 f16" [LLM_ARGS="--decode graph"] tools/llm_cuda_run.sh
# writes random TinyLlama-shape GGUFs (candle-make-random-llama) and runs llm_speed --device cuda
# (pp PP, tg TG), printing tokens/s and the CPU round-trips each run took. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=/tmp/bcuda/bin
M=/tmp/models
mkdir -p $M
for t in ${TYPES:-q4_0 q8_0 q4_k_m f16}; do
  f=$M/${SHAPE:-tinyllama}-$t.gguf
  [ -f $f ] || timeout 120 $B/candle-make-random-llama $f --shape ${SHAPE:-tinyllama} --type $t > /dev/null 2>&1
  ls -la $f | awk '{printf "%s %.0f MB\n", $9, $5 / 1e6}'
  timeout ${LLM_TIMEOUT:-120} $B/llm_speed $f --device cuda --pp ${PP:-512} --tg ${TG:-128} --reps ${REPS:-2} ${LLM_ARGS:-} \
    > $OUT/llm_$t.log 2>&1
  echo "rc=$?"; grep -E "BENCH|round-trip|error|memory" $OUT/llm_$t.log | head -12
done
