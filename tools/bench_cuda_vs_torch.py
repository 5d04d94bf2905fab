#!/usr/bin/env python3
"""candle's CUDA ops beside PyTorch's on the same card, in the same run (GPU machine).

    python3 tools/bench_cuda_vs_torch.py BUILD_DIR [--only NAME]

Runs BUILD_DIR/bin/gpu_ops_speed, then the same ops in PyTorch (median of 5 runs of N calls after a
warm-up, torch.cuda.synchronize() around them; TF32 off unless the case says tf32), and prints
each case with both times and speed = PyTorch time / candle time (>= 1: candle is as fast or faster).
The copy line is the card's copy bandwidth, the reference of the element-wise targets.
"""
import subprocess
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def tms(fn, reps):
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) * 1e3 / reps)
    return sorted(runs)[2]


def torch_rdn_train_step():
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_upscale_vs_torch as ref
    model = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models/esrgan-slim/x4.safetensors")
    fwd = ref.build_forward(model, "cuda")
    params = [t.requires_grad_() for t in fwd.tensors.values()]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    x = torch.rand(4, 3, 64, 64, device="cuda") * 255
    target = torch.rand(4, 3, 256, 256, device="cuda") * 255

    def step():
        opt.zero_grad()
        loss = (fwd.raw(x) - target).abs().mean()
        loss.backward()
        opt.step()
    return tms(step, 5)


def torch_case(name, dt, shape):
    if name == "rdn_train_step":
        return torch_rdn_train_step()
    d = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]
    if name.startswith("conv2d"):
        # 1x64x512x512, 64 -> 64 channels, 3x3, padding 1 (cuDNN; TF32 only for conv2d_tf32)
        x = torch.randn(1, 64, 512, 512, device="cuda", dtype=d)
        w = torch.randn(64, 64, 3, 3, device="cuda", dtype=d) * 0.1
        b = torch.randn(64, device="cuda", dtype=d) * 0.1
        F = torch.nn.functional
        torch.backends.cudnn.allow_tf32 = name == "conv2d_tf32"
        if name == "conv2d_bias_relu":
            t = tms(lambda: F.relu(F.conv2d(x, w, b, padding=1)), 10)
        else:
            t = tms(lambda: F.conv2d(x, w, padding=1), 10)
        torch.backends.cudnn.allow_tf32 = False
        return t
    dims = [int(v) for v in shape.split("x")]
    if name.startswith("matmul") or name == "bmm_qkT":
        if name == "bmm_qkT":
            q = torch.randn(32, 2048, 128, device="cuda", dtype=d)
            k = torch.randn(32, 2048, 128, device="cuda", dtype=d)
            return tms(lambda: torch.matmul(q, k.transpose(1, 2)), 10)
        n = dims[0]
        a = torch.randn(n, n, device="cuda", dtype=d)
        b = torch.randn(n, n, device="cuda", dtype=d)
        torch.backends.cuda.matmul.allow_tf32 = name == "matmul_tf32"
        reps = 20 if n <= 2048 else 5 if n == 4096 else 2
        t = tms(lambda: torch.matmul(a, b), reps)
        torch.backends.cuda.matmul.allow_tf32 = False
        return t
    x = torch.randn(*dims, device="cuda", dtype=d)
    y = torch.randn(*dims, device="cuda", dtype=d)
    row = torch.randn(dims[-1], device="cuda", dtype=d)
    fns = {
        "copy": lambda: x.clone(),
        "exp": lambda: torch.exp(x),
        "gelu": lambda: torch.nn.functional.gelu(x, approximate="tanh"),
        "add": lambda: x + y,
        "tiny_op": lambda: x + y,
        "add_bcast_row": lambda: x + row,
        "affine": lambda: x * 2.0 + 1.0,
        "transpose_copy": lambda: x.t().contiguous(),
        "cast_f32_f16": lambda: x.to(torch.float16),
        "sum_all": lambda: x.sum(),
        "sum_last_dim": lambda: x.sum(dim=1, keepdim=True),
        "sum_first_dim": lambda: x.sum(dim=0, keepdim=True),
        "max_last_dim": lambda: x.amax(dim=1, keepdim=True),
    }
    return tms(fns[name], 20) if name in fns else None


def main():
    build = sys.argv[1]
    args = [f"{build}/bin/gpu_ops_speed"] + sys.argv[2:]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name()}; TF32 off except matmul_tf32")
    print(f"{'case':<22} {'dtype':<5} {'shape':<16} {'candle ms':>10} {'torch ms':>10} {'speed':>7}  candle rate")
    for line in out.splitlines():
        if line.startswith("#"):
            print(line)
            continue
        p = line.split()
        name, dt, shape, ms = p[0], p[1], p[2], float(p[3])
        rate = " ".join(p[5:])
        t = torch_case(name, dt, shape)
        speed = f"{t / ms:7.2f}" if t else "      -"
        print(f"{name:<22} {dt:<5} {shape:<16} {ms:10.4f} {t if t else float('nan'):10.4f} {speed}  {rate}", flush=True)


if __name__ == "__main__":
    main()
