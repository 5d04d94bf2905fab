#!/usr/bin/env python3
"""Issue 2's benchmark: candle-cpp's ops_bench and matmul_bench beside the same ops in PyTorch,
in one run on the same machine, at each requested thread count. Prints markdown tables.

  /usr/bin/python3 tools/bench_core_vs_torch.py --bin build-release/bin --threads 2
  python3 tools/bench_core_vs_torch.py --bin /tmp/b/bin --threads 1,16      # scaling run
Ratios are PyTorch time / candle-cpp time: above 1 means candle-cpp is faster.
"""
import argparse
import json
import os
import subprocess
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--bin", default="build-release/bin")
p.add_argument("--threads", default="2")
p.add_argument("--repeats", type=int, default=10)
p.add_argument("--min-time", default="0.3")
args = p.parse_args()
threads = [int(t) for t in args.threads.split(",")]


def run_ours(binary, n):
    env = dict(os.environ, CANDLE_NUM_THREADS=str(n))
    out = subprocess.run([os.path.join(args.bin, binary), "--benchmark_format=json",
                          f"--benchmark_min_time={args.min_time}", "--benchmark_repetitions=5"],
                         env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    doc = json.loads(out)
    if "blas" in doc["context"]:
        print(f"<!-- {binary} at {n} threads: blas {doc['context']['blas']} -->")
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        parts = b["name"].split("/")
        if parts[0] == "run":
            key = parts[1]
        elif parts[0] == "BM_matmul":
            key = f"matmul_{parts[1]}_{parts[2]}"
        else:
            key = "_".join(x for x in parts if x != "real_time").replace("BM_", "")
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b.get("time_unit", "ns")]
        res[key] = min(res.get(key, float("inf")), b["real_time"] * scale)  # best of the repetitions
    return res


def best_ms(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


a = torch.randn(4096, 4096)
b = torch.randn(4096, 4096)
row = torch.randn(1, 4096)


def softmax_last():
    e = (a - a.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


TORCH_OPS = {
    "exp": lambda: a.exp(), "gelu": lambda: torch.nn.functional.gelu(a, approximate="tanh"),
    "silu": lambda: torch.nn.functional.silu(a), "add": lambda: a + b, "broadcast_mul": lambda: a * row,
    "sum_last": lambda: a.sum(-1, keepdim=True), "max_last": lambda: a.max(-1, keepdim=True).values,
    "sum_all": lambda: a.sum(), "softmax_last": softmax_last,
    "transpose_contiguous": lambda: a.t().contiguous(),
}
MOVED = {"exp": 2, "gelu": 2, "silu": 2, "add": 3, "broadcast_mul": 2, "sum_last": 1, "max_last": 1,
         "sum_all": 1, "softmax_last": 6, "transpose_contiguous": 2}
NBYTES = 4096 * 4096 * 4
mats = {n: (torch.randn(n, n), torch.randn(n, n)) for n in (1024, 2048, 4096)}

results = {}
for n in threads:
    torch.set_num_threads(n)
    ours = run_ours("ops_bench", n)
    ours.update(run_ours("matmul_bench", n))
    theirs = {k: best_ms(f, args.repeats) for k, f in TORCH_OPS.items()}
    for s, (x, y) in mats.items():
        theirs[f"matmul_f32_{s}"] = best_ms(lambda: x @ y, max(3, args.repeats // 3))
    results[n] = (ours, theirs)
    memcpy = ours.get("memcpy", float("nan"))
    print(f"\n### {n} thread(s), PyTorch {torch.__version__}\n")
    print(f"memcpy of 64 MiB: {memcpy:.2f} ms ({2 * NBYTES / memcpy / 1e6:.1f} GB/s read+write)\n")
    print("| op (4096x4096 f32) | candle-cpp ms | GB/s | % of memcpy GB/s | PyTorch ms | PyTorch/candle-cpp |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k in TORCH_OPS:
        o, t = ours.get(k, float("nan")), theirs[k]
        gbs = MOVED[k] * NBYTES / o / 1e6
        print(f"| {k} | {o:.2f} | {gbs:.1f} | {100 * gbs / (2 * NBYTES / memcpy / 1e6):.0f}% | {t:.2f} | {t / o:.2f}x |")
    print("\n| matmul | candle-cpp ms | GFLOP/s | PyTorch f32 ms | PyTorch/candle-cpp | vs our f32 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for s in (1024, 2048, 4096):
        f32 = ours.get(f"matmul_f32_{s}", float("nan"))
        for dt in ("f32", "f16", "bf16"):
            o = ours.get(f"matmul_{dt}_{s}", float("nan"))
            t = theirs[f"matmul_f32_{s}"]
            print(f"| {dt} {s}² | {o:.2f} | {2 * s ** 3 / o / 1e6:.1f} | {t:.2f} | {t / o:.2f}x | {f32 / o:.2f}x |")

if len(threads) > 1:
    lo, hi = threads[0], threads[-1]
    print(f"\n### scaling {lo} -> {hi} threads (time at {lo} / time at {hi})\n")
    print("| op | candle-cpp | PyTorch |")
    print("| --- | ---: | ---: |")
    for k in list(TORCH_OPS) + ["matmul_f32_4096"]:
        o1, t1 = results[lo][0].get(k, float("nan")), results[lo][1][k]
        o2, t2 = results[hi][0].get(k, float("nan")), results[hi][1][k]
        print(f"| {k} | {o1 / o2:.1f}x | {t1 / t2:.1f}x |")
