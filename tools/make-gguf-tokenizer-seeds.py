#!/usr/bin/env python3
"""The seeds of fuzz_gguf_tokenizer (tests/fuzz/corpus/gguf_tokenizer/): GGUF files of no tensors whose
tokenizer.ggml.* metadata is a tiny SentencePiece ("llama") vocabulary, or a tiny byte-level ("gpt2") one
for each tokenizer.ggml.pre name Tokenizer::from_gguf knows, plus a few that break one rule.

  python3 tools/make-gguf-tokenizer-seeds.py
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests/fuzz/corpus/gguf_tokenizer")
spec = importlib.util.spec_from_file_location("hostile_gguf", os.path.join(HERE, "make-hostile-gguf.py"))
hg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hg)
U8, U32, I32, F32, BOOL, STR, ARR = hg.U8, hg.U32, hg.I32, hg.F32, hg.BOOL, hg.STR, hg.ARR

SP = "\u2581"


def gguf(kvs):
    w = hg.W(3).header(0, len(kvs))
    for k in kvs:
        w.kv(*k)
    return w.bytes()


def spm(extra=()):
    toks = ["<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", SP, "a", "b", SP + "a", "ab", SP + "ab", "ba"]
    scores = [0, 0, 0, 0, 0, 0, -100, -100, -100, -3, -1, -2, -0.5]
    types = [2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1]
    kvs = [("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
           ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
           ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_bos_token", BOOL, 1)]
    return gguf(kvs + list(extra))


def bpe(pre, extra=()):
    G = "\u0120"
    toks = ["a", "b", G, "ab", G + "a", G + "ab", "<|end|>", "<|user|>"]
    kvs = [("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, pre),
           ("tokenizer.ggml.tokens", ARR, (STR, toks)), ("tokenizer.ggml.token_type", ARR, (I32, [1] * 6 + [3, 4])),
           ("tokenizer.ggml.merges", ARR, (STR, ["a b", G + " a", G + " ab"])),
           ("tokenizer.ggml.eos_token_id", U32, 6)]
    return gguf(kvs + list(extra))


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {"valid-spm": spm(), "valid-spm-no-prefix": spm([("tokenizer.ggml.add_space_prefix", BOOL, 0),
                                                              ("tokenizer.ggml.add_eos_token", BOOL, 1)])}
    for pre in ["gpt-2", "llama-bpe", "qwen2", "deepseek-v3", "gpt-4o"]:
        files["valid-bpe-" + pre] = bpe(pre)
    files["hostile-spm-bos-out-of-range"] = spm([("tokenizer.ggml.padding_token_id", U32, 13)])
    files["hostile-spm-bool-as-u8"] = spm([("tokenizer.ggml.add_space_prefix", U8, 1)])
    files["hostile-bpe-unknown-pre"] = bpe("starcoder")
    files["hostile-bpe-bad-merge"] = gguf([("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "gpt-2"),
                                           ("tokenizer.ggml.tokens", ARR, (STR, ["a"])),
                                           ("tokenizer.ggml.merges", ARR, (STR, ["a b", "ab"]))])
    for name, data in files.items():
        with open(os.path.join(OUT, name + ".gguf"), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
