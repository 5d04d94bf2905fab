#!/usr/bin/env bash
# Tensor parallelism on a machine with 2+ GPUs (issue 18's benchmark; see ../shared/device/README.md):
# builds llm_speed and candle-make-random-llama with CUDA, writes random LLaMA-7B-shape GGUFs (f16 and
# Q4_0), runs pp512 and tg128 on one GPU and tensor-parallel over 2 (llm_speed --tp 2: one thread per
# GPU, NCCL between them), the same --decode cache on both sides (the recorded CUDA graph of one GPU
# too, for reference), then the 2-GPU tests (test_cuda NcclTwoGpus.*). Logs under $OUT.
#   source .devdeps/devenv.sh && tools/tp_device_run.sh        (TYPES="q4_0 f16", SHAPE=llama7b)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$SECONDS
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
n=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$n" -ge 2 ] || { echo "tp_device_run: $n GPU(s): tensor parallelism needs 2"; exit 1; }
source tools/device_build.sh
b=/tmp/btp
{ cmake -S . -B "$b" $(device_cmake_args) -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_BENCH=ON \
    -DCANDLE_BUILD_EXAMPLES=ON && \
  timeout 480 cmake --build "$b" -j"$(nproc)" --target llm_speed candle-make-random-llama test_cuda; } \
  > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
echo "built at $((SECONDS - T0)) s"
NCCL_DEBUG=WARN timeout 300 "$b/bin/test_cuda" --gtest_filter='NcclTwoGpus.*' > "$OUT/test_tp.log" 2>&1
echo "NcclTwoGpus: rc=$? passed $(grep -c '^\[       OK \]' "$OUT/test_tp.log") failed $(grep -c '^\[  FAILED  \] .*(' "$OUT/test_tp.log")"
M=/tmp/models
mkdir -p $M
printf "%-22s %-22s %10s %10s\n" model run pp512 tg128
for t in ${TYPES:-q4_0 f16}; do
  f=$M/${SHAPE:-llama7b}-$t.gguf
  [ -f "$f" ] || "$b/bin/candle-make-random-llama" "$f" --shape "${SHAPE:-llama7b}" --type "$t" > /dev/null
  for run in "--tp 1 --decode graph" "--tp 1 --decode cache" "--tp 2 --decode cache"; do
    log="$OUT/speed-$t-$(echo "$run" | tr -d ' -').log"
    timeout 300 "$b/bin/llm_speed" "$f" --device cuda --pp 512 --tg 128 --reps 3 $run > "$log" 2>&1
    pp=$(grep -o 'test=pp512.*tok_per_s=[0-9.]*' "$log" | grep -o '[0-9.]*$')
    tg=$(grep -o 'test=tg128.*tok_per_s=[0-9.]*' "$log" | grep -o '[0-9.]*$')
    printf "%-22s %-22s %10s %10s\n" "$(basename "$f")" "$run" "${pp:-fail}" "${tg:-fail}"
  done
done
echo "done at $((SECONDS - T0)) s"
