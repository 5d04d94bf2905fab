#!/usr/bin/env python3
"""bench/conv_grad_bench (the backward passes of the mnist CNN's layers at batch 64 and of a
3x3 64->64 conv at 64x64, batch 4) beside the same gradients in PyTorch autograd, in one run on
the same machine, at each requested thread count. Prints a markdown table per thread count.

  /usr/bin/python3 tools/bench_convgrad_vs_torch.py --bin /tmp/build/bin --threads 2
Ratios are PyTorch time / candle-cpp time: above 1 means candle-cpp is faster. Times are the
best of the repetitions (ms), wall clock and CPU time (the CPU column is steadier when other
processes share the cores). PyTorch computes only the gradients asked for (torch.autograd.grad
on a retained graph), so "kernel" is its weight-only backward, "backward" every gradient the
layer needs in training (the first conv has no input gradient).
"""
import argparse
import json
import os
import subprocess
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--bin", default="build-release/bin")
p.add_argument("--threads", default="2")
p.add_argument("--filter", default="", help="regex on the case name")
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--min-time", default="0.3")
args = p.parse_args()

LAYERS = {"mnist_conv1": ((64, 1, 28, 28), (32, 1, 5, 5), 0, True),
          "mnist_conv2": ((64, 32, 12, 12), (64, 32, 5, 5), 0, False),
          "conv3x3_64_b4": ((4, 64, 64, 64), (64, 64, 3, 3), 1, False)}
POOLS = {"mnist_pool1": (64, 32, 24, 24), "mnist_pool2": (64, 64, 8, 8)}


def torch_case(key):
    _, layer, part = key.split("/")
    if layer in POOLS:
        x = torch.randn(POOLS[layer], requires_grad=True)
        y = F.max_pool2d(x, 2)
        gy = torch.randn(y.shape)
        return lambda: torch.autograd.grad(y, [x], gy, retain_graph=True)
    xs, ws, pad, first = LAYERS[layer]
    want = {"kernel": "w", "input": "x", "bias": "b", "backward": "wb" if first else "xwb"}[part]
    x = torch.randn(xs, requires_grad="x" in want)
    w = torch.randn(ws, requires_grad="w" in want)
    b = torch.randn(ws[0], requires_grad="b" in want)
    y = F.conv2d(x, w, b, padding=pad)
    gy = torch.randn(y.shape)
    inputs = [t for n, t in (("x", x), ("w", w), ("b", b)) if n in want]
    return lambda: torch.autograd.grad(y, inputs, gy, retain_graph=True)


def run_ours(n_threads):
    env = dict(os.environ, CANDLE_NUM_THREADS=str(n_threads))
    cmd = [os.path.join(args.bin, "conv_grad_bench"), "--benchmark_format=json",
           f"--benchmark_min_time={args.min_time}", f"--benchmark_repetitions={args.repeats}"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    doc = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    res, order = {}, []
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        key = b["name"].replace("BM_", "").replace("/process_time", "").replace("/real_time", "")
        if key not in order:
            order.append(key)
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b.get("time_unit", "ns")]
        t, c = b["real_time"] * scale, b["cpu_time"] * scale
        old = res.get(key)
        res[key] = (t, c) if old is None else (min(old[0], t), min(old[1], c))
    return res, order, doc["context"].get("blas", "?")


def best_ms(fn, repeats):
    fn()
    n = 1
    while True:  # iterations per repetition: at least ~0.1 s
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 > 0.1:
            break
        n *= 2
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
        best_cpu = min(best_cpu, (time.process_time() - c0) / n)
    return best * 1e3, best_cpu * 1e3


for n_threads in [int(t) for t in args.threads.split(",")]:
    ours, order, blas = run_ours(n_threads)
    torch.set_num_threads(n_threads)
    print(f"\n### {n_threads} thread(s): candle-cpp ({blas}) vs PyTorch {torch.__version__} "
          f"(mkldnn {torch.backends.mkldnn.is_available()})\n")
    print("| gradient | candle-cpp ms | PyTorch ms | PyTorch/ours | candle-cpp CPU ms | PyTorch CPU ms | CPU ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in order:
        fn = torch_case(key)
        tt, tc = best_ms(fn, args.repeats)
        del fn
        ot, oc = ours[key]
        print(f"| {key} | {ot:.3f} | {tt:.3f} | {tt / ot:.2f}x | {oc:.3f} | {tc:.3f} | {tc / oc:.2f}x |")
