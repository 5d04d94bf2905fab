#!/usr/bin/env python3
"""candle-cpp (bench/llm_speed.cpp) against llama.cpp on the same GGUF files, in the same run: pp<N> (one batch of N random
tokens from an empty cache) and tg<N> (N single-token steps), llama-bench's tests, tokens/s over
--reps runs after a warm-up, and each process's peak resident memory (wait4's ru_maxrss). llama.cpp
is the prebuilt v0.5.0 peer of tools/peers through tools/llama_run.py (a python3 process: its
peak memory includes the interpreter, ~10 MB). The two run alternately, file by file.

  python3 tools/bench_llm_vs_llamacpp.py --llm-speed build-release/bin/llm_speed MODEL.gguf...
          [--threads 2] [--pp 128,512] [--tg 128] [--reps 3] [--depth D] [--json OUT.json]

--depth D (llama-bench's -d): every run first fills the KV cache with D random tokens (not timed), so
the tests are timed from position D (named pp512_dD, tg128_dD).

Prints one row per (file, threads, test): candle tok/s, llama.cpp tok/s, their ratio, peak MiB of
each. Exit status 1 when either side fails on a file (its output is printed).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = re.compile(r"BENCH test=(\w+) t=(\d+) tok_per_s=([\d.]+) std=([\d.]+)")


def run(cmd, env=None):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    rows = {m.group(1): (float(m.group(3)), float(m.group(4))) for m in BENCH.finditer(out)}
    return p.returncode, out, rows, ru.ru_maxrss / 1024.0, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--llm-speed", required=True, help="bench/llm_speed.cpp's binary")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--pp", default="128,512")
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    pps = [int(p) for p in a.pp.split(",") if p]
    results, rc = [], 0
    print(f"{'model':<28} {'t':>3} {'test':>11} {'candle':>9} {'llama.cpp':>9} {'ratio':>6} "
          f"{'MiB':>6} {'MiB l.c':>7} {'wall s':>6} {'wall l.c':>8}", flush=True)
    for path in a.models:
        for t in threads:
            tests = [("pp", n, 0) for n in pps] + ([("tg", 0, a.tg)] if a.tg > 0 else [])
            for kind, pp, tg in tests:
                name = (f"pp{pp}" if kind == "pp" else f"tg{tg}") + (f"_d{a.depth}" if a.depth > 0 else "")
                depth = ["--depth", str(a.depth)] if a.depth > 0 else []
                ours = [a.llm_speed, path, "--pp", str(pp), "--tg", str(tg),
                        "--reps", str(a.reps), "--threads", str(t)] + depth
                theirs = [sys.executable, os.path.join(HERE, "llama_run.py"), path, "--bench", "--pp", str(pp),
                          "--tg", str(tg), "--reps", str(a.reps), "--threads", str(t)] + depth
                r1 = run(ours)
                r2 = run(theirs)
                for label, r in (("llm_speed", r1), ("llama.cpp", r2)):
                    if r[0] != 0 or name not in r[2]:
                        print(f"{label} failed on {path} ({name}, rc {r[0]}):\n{r[1][-3000:]}", file=sys.stderr)
                        rc = 1
                if r1[0] != 0 or r2[0] != 0 or name not in r1[2] or name not in r2[2]:
                    continue
                c, l = r1[2][name][0], r2[2][name][0]
                print(f"{os.path.basename(path)[:28]:<28} {t:>3} {name:>11} {c:>9.1f} {l:>9.1f} {c / l:>6.2f} "
                      f"{r1[3]:>6.0f} {r2[3]:>7.0f} {r1[4]:>6.1f} {r2[4]:>8.1f}", flush=True)
                results.append({"model": path, "threads": t, "test": name, "candle_tok_s": c,
                                "candle_std": r1[2][name][1], "llamacpp_tok_s": l, "llamacpp_std": r2[2][name][1],
                                "ratio": c / l, "candle_peak_mib": r1[3], "llamacpp_peak_mib": r2[3],
                                "candle_wall_s": r1[4], "llamacpp_wall_s": r2[4]})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
