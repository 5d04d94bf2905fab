#!/usr/bin/python3
"""Times candle-cpp's ops_bench and the same ops in PyTorch in one run, on the same machine,
with the same thread count; prints a markdown table of times and ratios.

  /usr/bin/python3 tools/bench_ops_vs_torch.py --bench build-release/bin/ops_bench --threads 2
"""
import argparse
import json
import os
import subprocess
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--bench", default="build-release/bin/ops_bench")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--repeats", type=int, default=10)
args = p.parse_args()

env = dict(os.environ, CANDLE_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
out = subprocess.run([args.bench, "--benchmark_format=json", "--benchmark_min_time=0.5"],
                     env=env, check=True, capture_output=True, text=True).stdout
ours = {}
for b in json.loads(out)["benchmarks"]:
    name = b["name"].split("/")[0].replace("run/", "").replace("BM_", "")
    ours[b["name"].split("/")[1] if b["name"].startswith("run/") else name] = b["real_time"]  # ms

torch.set_num_threads(args.threads)
a = torch.randn(4096, 4096)
b = torch.randn(4096, 4096)
row = torch.randn(1, 4096)


def softmax_last():
    e = (a - a.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


torch_ops = {
    "exp": lambda: a.exp(), "gelu": lambda: torch.nn.functional.gelu(a, approximate="tanh"),
    "silu": lambda: torch.nn.functional.silu(a), "add": lambda: a + b, "broadcast_mul": lambda: a * row,
    "sum_last": lambda: a.sum(-1, keepdim=True), "max_last": lambda: a.max(-1, keepdim=True).values,
    "sum_all": lambda: a.sum(), "softmax_last": softmax_last,
    "transpose_contiguous": lambda: a.t().contiguous(),
}
theirs = {}
for name, fn in torch_ops.items():
    fn()
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    theirs[name] = best * 1e3

nbytes = 4096 * 4096 * 4
moved = {"exp": 2, "gelu": 2, "silu": 2, "add": 3, "broadcast_mul": 2, "sum_last": 1, "max_last": 1,
         "sum_all": 1, "softmax_last": 6, "transpose_contiguous": 2}
print(f"threads: {args.threads}; PyTorch {torch.__version__}; memcpy of 64 MiB: {ours.get('memcpy', float('nan')):.2f} ms "
      f"({2 * nbytes / ours.get('memcpy', float('nan')) / 1e6:.1f} GB/s)")
print("| op (16M f32) | candle-cpp ms | GB/s | PyTorch ms (best of %d) | speed vs PyTorch |" % args.repeats)
print("| --- | ---: | ---: | ---: | ---: |")
for name in torch_ops:
    o, t = ours.get(name, float("nan")), theirs[name]
    print(f"| {name} | {o:.2f} | {moved[name] * nbytes / o / 1e6:.1f} | {t:.2f} | {t / o:.2f}x |")
