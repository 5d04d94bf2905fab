#!/usr/bin/env python3
"""Writes tests/data/llm/kjv_greedy.json: llama.cpp's greedy continuation (32 tokens) of the
bundled default model (models/llama2-c-kjv/model-q8_0.gguf) after "In the beginning", tokenized
by llama.cpp from the GGUF's own tokenizer; tests/models/llama_test.cpp checks that candle-cpp
gives the same tokens on the same file.

  python3 tools/gen_kjv_greedy.py [models/llama2-c-kjv/model-q8_0.gguf]

Runs tools/llama_run.py (llama.cpp's prebuilt libraries from tools/peers) with --greedy 32
--kv-f32 (an f32 KV cache, no flash attention) on one thread.
"""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPT = "In the beginning"


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "llama2-c-kjv", "model-q8_0.gguf")
    out = subprocess.run([sys.executable, os.path.join(HERE, "llama_run.py"), model, "--prompt", PROMPT,
                          "--greedy", "32", "--kv-f32", "--threads", "1"],
                         check=True, capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("GREEDY "))
    g = json.loads(line[len("GREEDY "):])
    with open(model, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    res = {"model": "models/llama2-c-kjv/model-q8_0.gguf", "sha256": digest, "prompt_text": PROMPT,
           "prompt": g["prompt"], "greedy": g["greedy"], "min_gap": min(g["gaps"])}
    path = os.path.join(ROOT, "tests", "data", "llm", "kjv_greedy.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(g['greedy'])} tokens, smallest top-1/top-2 gap {res['min_gap']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
