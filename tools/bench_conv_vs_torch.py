#!/usr/bin/env python3
"""The super-resolution building blocks of conv_bench beside the same ops in PyTorch, in one run
on the same machine, at each requested thread count. Prints a markdown table per thread count.

  /usr/bin/python3 tools/bench_conv_vs_torch.py --bin /tmp/build/bin --threads 2
  python3 tools/bench_conv_vs_torch.py --bin /tmp/b/bin --threads 1,16 --sizes 2048 --filter 3x3_64_64
Ratios are PyTorch time / candle-cpp time: above 1 means candle-cpp is faster. Times are the
best of the repetitions (ms). Ops candle-cpp does not implement yet show "n/a".
"""
import argparse
import json
import os
import re
import subprocess
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--bin", default="build-release/bin")
p.add_argument("--threads", default="2")
p.add_argument("--sizes", default="512", help="spatial sizes to run: 512, 2048 or 512,2048")
p.add_argument("--filter", default="", help="regex on the case name (e.g. conv2d, 3x3_64_64)")
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--min-time", default="0.5")
args = p.parse_args()
threads = [int(t) for t in args.threads.split(",")]
sizes = [int(s) for s in args.sizes.split(",")]

CONVS = {"3x3_3_64": (3, 64, 3), "3x3_64_64": (64, 64, 3), "3x3_64_4": (64, 4, 3), "3x3_64_32": (64, 32, 3),
         "3x3_32_48": (32, 48, 3), "3x3_48_3": (48, 3, 3), "3x3_32_192": (32, 192, 3), "5x5_64_64": (64, 64, 5),
         "1x1_68_64": (68, 64, 1), "1x1_256_64": (256, 64, 1)}


def torch_case(key):
    """(setup -> fn) for a conv_bench case name like conv2d/3x3_64_64/512."""
    op, case, n = key.split("/")
    n = int(n)
    if op == "conv2d":
        ci, co, k = CONVS[case]
        x, w = torch.randn(1, ci, n, n), torch.randn(co, ci, k, k)
        return lambda: F.conv2d(x, w, padding=k // 2)
    if op == "upsample_nearest":
        s, c = re.match(r"x(\d+)_(\d+)", case).groups()
        x = torch.randn(1, int(c), n, n)
        return lambda: F.interpolate(x, scale_factor=int(s), mode="nearest")
    if op == "cat":
        a, b = torch.randn(1, 4, n, n), torch.randn(1, 64, n, n)
        return lambda: torch.cat([a, b], 1)
    if op == "conv_transpose2d":
        x, w = torch.randn(1, 64, n, n), torch.randn(64, 64, 2, 2)
        return lambda: F.conv_transpose2d(x, w, stride=2)
    if op == "pool":
        x = torch.randn(1, 64, n, n)
        return (lambda: F.avg_pool2d(x, 2)) if case.startswith("avg") else (lambda: F.max_pool2d(x, 2))
    raise KeyError(key)


def run_ours(n_threads):
    env = dict(os.environ, CANDLE_NUM_THREADS=str(n_threads))
    size_re = "|".join(str(s) for s in sizes)
    filt = f"({args.filter}).*/({size_re})/" if args.filter else f"/({size_re})/"
    out = subprocess.run([os.path.join(args.bin, "conv_bench"), "--benchmark_format=json",
                          f"--benchmark_filter={filt}", f"--benchmark_min_time={args.min_time}",
                          f"--benchmark_repetitions={args.repeats}"],
                         env=env, check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    res, order = {}, []
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        key = b["name"].replace("BM_", "").replace("/real_time", "")
        if key not in order:
            order.append(key)
        if b.get("error_occurred"):
            res.setdefault(key, None)
            continue
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b.get("time_unit", "ns")]
        t = b["real_time"] * scale
        res[key] = t if res.get(key) is None else min(res[key], t)
    return res, order, doc["context"].get("blas", "?")


def best_ms(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


for n_threads in threads:
    ours, order, blas = run_ours(n_threads)
    torch.set_num_threads(n_threads)
    print(f"\n### {n_threads} thread(s): candle-cpp ({blas}) vs PyTorch {torch.__version__} "
          f"(mkldnn {torch.backends.mkldnn.is_available()})\n")
    print("| op | candle-cpp ms | PyTorch ms | PyTorch/ours |")
    print("| --- | ---: | ---: | ---: |")
    for key in order:
        fn = torch_case(key)
        t_torch = best_ms(fn, args.repeats)
        del fn
        t_ours = ours.get(key)
        if t_ours is None:
            print(f"| {key} | n/a | {t_torch:.2f} | n/a |")
        else:
            print(f"| {key} | {t_ours:.2f} | {t_torch:.2f} | {t_torch / t_ours:.2f}x |")
