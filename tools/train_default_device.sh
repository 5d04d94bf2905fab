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
source tools/device_build.sh
B=/tmp/build-train
device_build $B candle-llama2-c-training
echo "built at $((SECONDS-T0)) s"
LEFT=$(( ${BUDGET:-570} - (SECONDS-T0) - 15 ))
$B/bin/candle-llama2-c-training --prepared .devdata/kjv --out /tmp/kjv-model --force --threads 16 \
  --time-budget $LEFT --lr ${LR:-8e-4} --batch ${BATCH:-32} --seq ${SEQ:-256} --warmup ${WARMUP:-30} \
  --eval-every ${EVAL_EVERY:-25} --log-every 10 2>&1 | tee $OUT/train.log
cp /tmp/kjv-model/model-q8_0.gguf /tmp/kjv-model/loss.csv /tmp/kjv-model/config.json $OUT/ 2>/dev/null
echo "done at $((SECONDS-T0)) s"; ls -la $OUT
