#!/usr/bin/env python3
"""llama.cpp's ids on the GGUF tokenizers candle-cpp writes: for each real tokenizer.json of the
tokenizer tests, candle-make-random-llama --tokenizer writes a tiny random llama GGUF carrying it
(candle::tokenizers::gguf_tokenizer_metadata), llama.cpp's libllama (the prebuilt v0.5.0 libraries of
tools/peers, through ctypes as in tools/llama_run.py) loads it and tokenizes tests/data/tokenizers/
corpus.json with and without special tokens (llama_tokenize(vocab, text, len, tokens, n_max,
add_special, parse_special=true): special tokens in the text are parsed, as Hugging Face does), and
the ids are written to tests/data/tokenizers/expected_llamacpp_<family>.json, with the list of the
encodings where llama.cpp's ids differ from Hugging Face's (expected_<family>.json).

  python3 tools/gguf_tokenizer_reference.py [--bin build-release/bin] [FAMILY ...]
"""
import argparse
import ctypes as C
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "tests", "data", "tokenizers")
sys.path.insert(0, HERE)
import llama_run  # noqa: E402

FAMILIES = ["gpt2", "llama2", "llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3", "gptoss"]


def tokenize(L, vocab, text, add_special):
    raw = text.encode()
    n_max = len(raw) + 16
    buf = (C.c_int32 * n_max)()
    n = L.lib.llama_tokenize(vocab, raw, len(raw), buf, n_max, add_special, True)
    if n < 0:
        raise RuntimeError(f"llama_tokenize needs {-n} tokens")
    return list(buf[:n])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("families", nargs="*", default=FAMILIES)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-release", "bin"))
    args = ap.parse_args()
    corpus = json.load(open(os.path.join(DATA, "corpus.json"), encoding="utf-8"))
    L = llama_run.Llama()
    with tempfile.TemporaryDirectory() as tmp:
        for fam in args.families:
            hf = json.load(open(os.path.join(DATA, f"expected_{fam}.json"), encoding="utf-8"))
            tok_path = os.path.join(ROOT, hf["tokenizer"])
            if not os.path.exists(tok_path):
                print(f"{fam}: {tok_path} missing (tools/install-deps.sh), skipped")
                continue
            gguf = os.path.join(tmp, fam + ".gguf")
            subprocess.run([os.path.join(args.bin, "candle-make-random-llama"), gguf, "--shape", "custom",
                            "--layers", "1", "--dim", "32", "--ffn", "32", "--heads", "2", "--kv-heads", "1",
                            "--type", "f16", "--tokenizer", tok_path, "--force"],
                           check=True, stderr=subprocess.DEVNULL)
            L.load(gguf)
            lines, differs = [], []
            for i, text in enumerate(corpus):
                row = {"ids": tokenize(L, L.vocab, text, True), "ids_plain": tokenize(L, L.vocab, text, False)}
                for key in ("ids", "ids_plain"):
                    if row[key] != hf["lines"][i][key]:
                        differs.append({"line": i, "key": key})
                lines.append(row)
            L.close()
            out = {
                "generator": "tools/gguf_tokenizer_reference.py (llama.cpp libllama v0.5.0 on the GGUF "
                             "written by candle-make-random-llama --tokenizer)",
                "tokenizer": hf["tokenizer"],
                "differs_from_hf": differs,
                "lines": lines,
            }
            path = os.path.join(DATA, f"expected_llamacpp_{fam}.json")
            with open(path, "w", encoding="utf-8") as f:
                # one line per corpus line: small and diffable
                f.write("{\n")
                for k in ("generator", "tokenizer", "differs_from_hf"):
                    f.write(f"  {json.dumps(k)}: {json.dumps(out[k], ensure_ascii=False)},\n")
                f.write('  "lines": [\n')
                f.write(",\n".join("    " + json.dumps(r) for r in lines))
                f.write("\n  ]\n}\n")
            print(f"{fam}: {len(differs)} of {2 * len(corpus)} encodings differ from HF: "
                  + ", ".join(f"{d['line']}/{d['key']}" for d in differs))


if __name__ == "__main__":
    main()
