#!/usr/bin/env bash
# One render of qwen3's real chat template (21 messages) by candle::generation (bench/generation_bench,
# BM_RenderQwen3) and by @huggingface/jinja under node (tools/jinja_render_speed.mjs), one thread
# each, in the same run; then the sampling steps at a 151,936-token vocabulary.
#   tools/bench_chat_template.sh [build-dir]     (default build-release; needs tools/peers/node_modules)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-release}
cmake --build "$B" --target generation_bench -j2 >/dev/null
node tools/jinja_render_speed.mjs
"$B/bin/generation_bench" --benchmark_min_time=1 --benchmark_filter=Render | grep BM_
"$B/bin/generation_bench" --benchmark_min_time=0.5 --benchmark_filter=Sample | grep BM_
