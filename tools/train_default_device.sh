#!/bin/bash
# Trains candle-llm's embedded default (examples/llama2-c-training) on the GPU machine's 16-core
# CPU (see /work/shared/device/README.md). The text is tokenized here first, where
# candle::tokenizers builds (the GPU machine has no PCRE2 or ICU):
#   candle-llama2-c-training --text kjv.txt --out .devdata/kjv --prepare-only
# then, carrying .devdeps/debs, .devdeps/devenv.sh and .devdata:
#   source .devdeps/devenv.sh && bash tools/train_default_device.sh
# Env: BUDGET (seconds of the whole call, default 570), LR, BATCH, SEQ. Outputs under $OUT.
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GEN=""; command -v ninja >/dev/null && GEN="-G Ninja"
ZL=""; [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && ZL="-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1"
grep -m1 'model name' /proc/cpuinfo
B=/tmp/build-train
{ cmake -S . -B $B $GEN $ZL -DCMAKE_BUILD_TYPE=Release -DCANDLE_VULKAN=OFF -DCANDLE_BUILD_TESTS=OFF && \
  timeout 300 cmake --build $B -j16 --target candle-llama2-c-training; } > $OUT/build.log 2>&1 \
  || { echo "build failed"; tail -30 $OUT/build.log; exit 1; }
echo "built at $((SECONDS-T0)) s"
LEFT=$(( ${BUDGET:-570} - (SECONDS-T0) - 15 ))
$B/bin/candle-llama2-c-training --prepared .devdata/kjv --out /tmp/kjv-model --force --threads 16 \
  --time-budget $LEFT --lr ${LR:-8e-4} --batch ${BATCH:-32} --seq ${SEQ:-256} --warmup ${WARMUP:-30} \
  --eval-every ${EVAL_EVERY:-25} --log-every 10 2>&1 | tee $OUT/train.log
cp /tmp/kjv-model/model-q8_0.gguf /tmp/kjv-model/loss.csv /tmp/kjv-model/config.json $OUT/ 2>/dev/null
echo "done at $((SECONDS-T0)) s"; ls -la $OUT
