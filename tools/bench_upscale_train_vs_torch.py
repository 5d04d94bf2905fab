#!/usr/bin/env python3
"""One training step of the bundled x4 upscaler (ESRGAN slim) in candle-cpp and in PyTorch, in one
run on the same machine: batch 4 of 64x64 crops, L1 loss against a 256x256 target, AdamW
(lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01: candle's defaults and PyTorch's) over
every weight.

  /usr/bin/python3 tools/bench_upscale_train_vs_torch.py --bin build-release/bin --threads 2

candle-cpp: bench/rdn_train_bench.cpp (Google Benchmark, mean ms per step over >= 2 s);
PyTorch: the same graph built from the same .safetensors file by tools/bench_upscale_vs_torch.py,
2 warm-up steps then the mean of --steps steps. Each side runs in its own process; peak RSS of each.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

p = argparse.ArgumentParser()
p.add_argument("--bin", default=os.path.join(ROOT, "build-release/bin"))
p.add_argument("--model", default=os.path.join(ROOT, "models/esrgan-slim/x4.safetensors"))
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
args = p.parse_args()

if args.torch_child:
    import resource

    import torch
    import bench_upscale_vs_torch as ref
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    fwd = ref.build_forward(args.model, "cpu")
    params = [t.requires_grad_() for t in fwd.tensors.values()]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    x = torch.rand(4, 3, 64, 64) * 255
    target = torch.rand(4, 3, 256, 256) * 255
    times = []
    for s in range(args.steps + 2):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = (fwd.raw(x) - target).abs().mean()
        loss.backward()
        opt.step()
        if s >= 2:
            times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"ms": 1000 * sum(times) / len(times), "rss_mib": rss}))
    sys.exit(0)


def run(cmd, env):
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {err[-2000:]}")
    return out


env = dict(os.environ, CANDLE_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
import resource  # noqa: E402
out = run([os.path.join(args.bin, "rdn_train_bench"), "--benchmark_format=json"], env)
ours = json.loads(out)["benchmarks"][0]
ours_ms = ours["real_time"] if ours.get("time_unit") == "ms" else ours["real_time"] / 1e6
ours_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
theirs = json.loads(run([sys.executable, os.path.abspath(__file__), "--torch-child", "--threads", str(args.threads),
                         "--model", args.model, "--steps", str(args.steps)], env).strip().splitlines()[-1])
print(f"x4 slim training step (batch 4 of 64x64, L1, AdamW), {args.threads} threads")
print("| | ms per step | peak RSS MiB |")
print("| --- | ---: | ---: |")
print(f"| PyTorch {__import__('torch').__version__} | {theirs['ms']:.1f} | {theirs['rss_mib']:.0f} |")
print(f"| candle-cpp | {ours_ms:.1f} | {ours_rss:.0f} |")
print(f"PyTorch/candle-cpp: {theirs['ms'] / ours_ms:.2f}x")
