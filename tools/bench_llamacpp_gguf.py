#!/usr/bin/env python3
"""llama.cpp's speed on GGUF files, as llama-bench measures it: pp<N> (a prompt of N random
tokens decoded in one batch, n_ubatch 512) and tg<N> (N single-token decodes), both from an empty
context after a warm-up run, in tokens/s (mean and standard deviation over --reps runs), for each
file and thread count. llama.cpp is the prebuilt v0.5.0 peer of tools/peers, driven through
tools/llama_run.py (ctypes over libllama). Meant for comparing with candle-cpp's own runs of the
same files (candle-make-random-llama writes them).

  python3 tools/bench_llamacpp_gguf.py MODEL.gguf... [--threads 1,4,16] [--pp 512] [--tg 128]
                                       [--reps 3] [--json OUT.json]

Prints one table row per (file, test, threads), and with --json writes the rows as a list of
{"model", "type", "params", "size_bytes", "test", "threads", "tok_per_s", "std"}.
"""
import argparse
import ctypes as C
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", default=str(os.cpu_count() or 1), help="comma-separated thread counts")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--verbose", action="store_true", help="print llama.cpp's log")
    a = ap.parse_args()
    llama_run.VERBOSE = a.verbose
    try:
        threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        print("bench_llamacpp_gguf: --threads: expected comma-separated integers", file=sys.stderr)
        return 2
    if not threads or min(threads) < 1 or a.reps < 1 or a.pp < 0 or a.tg < 0:
        print("bench_llamacpp_gguf: bad --threads / --reps / --pp / --tg", file=sys.stderr)
        return 2
    ll = llama_run.Llama()
    rows = []
    print(f"{'model':<40} {'type':<16} {'test':>7} {'t':>3} {'tok/s':>10} {'std':>8}")
    rc = 0
    for path in a.models:
        try:
            ll.load(path)
            buf = C.create_string_buffer(256)
            ll.lib.llama_model_desc(ll.model, buf, len(buf))
            desc = buf.value.decode(errors="replace")
            params = ll.lib.llama_model_n_params(ll.model)
            size = ll.lib.llama_model_size(ll.model)
            for t in threads:
                for test, nt, mean, std in llama_run.bench(ll, a.pp, a.tg, a.reps, t):
                    print(f"{os.path.basename(path)[:40]:<40} {desc[:16]:<16} {test:>7} {nt:>3} {mean:>10.2f} "
                          f"{std:>8.2f}", flush=True)
                    rows.append({"model": path, "type": desc, "params": params, "size_bytes": size, "test": test,
                                 "threads": nt, "tok_per_s": mean, "std": std})
        except llama_run.Refused as e:
            print(f"bench_llamacpp_gguf: llama.cpp refused {path}: {e}\n" + "".join(llama_run.LOG[-20:]),
                  file=sys.stderr)
            rc = 1
        finally:
            ll.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
