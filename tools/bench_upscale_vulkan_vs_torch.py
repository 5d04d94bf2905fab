#!/usr/bin/env python3
"""candle-upscale on Vulkan beside the same network in PyTorch on CUDA (one GPU, same machine).

  python3 tools/bench_upscale_vulkan_vs_torch.py --bin /tmp/build/bin --sizes 512,1024 --scales 4,8
  # a dry run without CUDA (PyTorch on the CPU; Vulkan on lavapipe):
  CANDLE_VULKAN_ALLOW_CPU=1 /usr/bin/python3 tools/bench_upscale_vulkan_vs_torch.py --bin /tmp/b/bin \
      --sizes 64 --scales 4 --repeat 2 --warmup 1 --torch-device cpu

Inputs: deterministic synthetic RGB PNGs of each --sizes side (written to a temporary folder);
the x<scale>.safetensors of each --models entry (a bundled model's name under models/, or a
directory).
candle side: `candle-upscale --device vulkan --repeat N+1` (one process, the first run is the
warm-up); from its summary line, the best run's "compute" (forward until the device is idle)
and "network" (the compute, the conversion of the output to 8 bits on the device and the
download of those bytes to the host, as an application that writes the image does).
PyTorch side: the graph interpreter of tools/bench_upscale_vs_torch.py (imported, build_forward:
forward, then clamp to 0..255 and round) with the weights on CUDA, f32 NCHW under
torch.no_grad(), TF32 off and then on; after --warmup passes, N timed passes each ending with
torch.cuda.synchronize() ("gpu"), and N more that also convert the output to uint8 on the GPU
and copy it to the host (".to(torch.uint8).cpu()", "u8"), the same work as candle's network
figure. Best times are printed with the ratios candle / PyTorch (below 1: candle faster):
candle compute / PyTorch gpu and candle network / PyTorch u8, TF32 off and on.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_upscale_vs_torch as ref  # noqa: E402  (build_forward, read_png_rgb)


def write_png(path, w, h, seed=1):
    """A smooth pattern with deterministic noise: something like an image, not constant."""
    rows, s = bytearray(), seed * 2654435761 % (1 << 32)
    for y in range(h):
        rows.append(0)
        for x in range(w):
            s = (s * 1664525 + 1013904223) % (1 << 32)
            n = (s >> 24) % 24
            rows += bytes(((x * 255 // max(w - 1, 1) + n) % 256, (y * 255 // max(h - 1, 1) + n) % 256,
                           ((x + y) * 3 + n) % 256))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


def candle_time(args, model, scale, image, out):
    """-> (network s, compute s, note); (None, None, why) when candle-upscale failed."""
    cmd = [os.path.join(args.bin, "candle-upscale"), "--device", args.device, "--model", model, "--scale",
           str(scale), "--repeat", str(args.repeat + 1), "--max-memory", "1000000", image, out]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"rc {p.returncode}"
    # the summary line (best run), not "run 1"
    m = re.search(r"\(network ([0-9.]+) s, compute ([0-9.]+) s", p.stderr)
    if not m:
        return None, None, "no summary line in: " + p.stderr.strip().splitlines()[-1]
    return float(m.group(1)), float(m.group(2)), f"process {time.perf_counter() - t0:.1f} s"


def torch_times(args, model, image):
    """-> {tf32: (best gpu s, best u8 s) or None (out of memory)}, TF32 off and on."""
    import torch
    dev = args.torch_device
    cuda = dev.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()
    h, w, px = ref.read_png_rgb(image)
    forward = ref.build_forward(model, dev)
    x = torch.frombuffer(bytearray(px), dtype=torch.uint8).reshape(h, w, 3).permute(2, 0, 1)[None]
    x = x.float().contiguous().to(dev)
    res = {}
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            with torch.no_grad():
                for _ in range(args.warmup):
                    forward(x)
                sync()
                gpu, u8 = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    forward(x)
                    sync()
                    gpu.append(time.perf_counter() - t0)
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    # forward's output is clamped and rounded: the cast gives its pixels exactly
                    # (as candle-upscale's to_dtype(U8) on the device), then 1 byte a value is copied
                    forward(x).to(torch.uint8).cpu()
                    u8.append(time.perf_counter() - t0)
            res[tf32] = (min(gpu), min(u8))
        except torch.cuda.OutOfMemoryError:
            res[tf32] = None
        if cuda:
            torch.cuda.empty_cache()
    return res


def model_dir(name):
    return name if os.path.isdir(name) else os.path.join(ROOT, "models", name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build-release/bin"))
    p.add_argument("--models", default="esrgan-slim,esrgan-medium",
                   help="bundled model names (under models/) or model directories, comma-separated")
    p.add_argument("--device", default="vulkan", help="candle-upscale's --device")
    p.add_argument("--torch-device", default="cuda", help="PyTorch's device (cpu: a dry run without CUDA)")
    p.add_argument("--sizes", default="512,1024")
    p.add_argument("--scales", default="4,8")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--skip-torch", action="store_true")
    args = p.parse_args()
    print(f"candle {args.device}, PyTorch {args.torch_device}; best of {args.repeat}; candle / PyTorch "
          "ratios (below 1: candle faster): compute / gpu (forward only), network / u8 (forward, "
          "uint8 on the device, copy to the host)")
    print("| model | input | candle compute s | candle network s | torch f32 gpu s | torch f32 u8 s | "
          "torch tf32 gpu s | torch tf32 u8 s | f32: compute / gpu | f32: network / u8 | "
          "tf32: compute / gpu | tf32: network / u8 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(v) for v in args.sizes.split(",")]:
            image = os.path.join(tmp, f"in{size}.png")
            write_png(image, size, size)
            for name in args.models.split(","):
                label = os.path.basename(os.path.normpath(name)).replace("esrgan-", "")
                for scale in [int(v) for v in args.scales.split(",")]:
                    model = os.path.join(model_dir(name), f"x{scale}.safetensors")
                    if not os.path.isfile(model):  # e.g. esrgan-medium x2: not bundled
                        print(f"| {label} x{scale} | {size}x{size} | no {model} |", flush=True)
                        continue
                    net, comp, note = candle_time(args, model, scale, image, os.path.join(tmp, "out.png"))
                    th = {} if args.skip_torch else torch_times(args, model, image)

                    def f(v):
                        return f"{v:.4f}" if v is not None else "-"

                    def r(ours, theirs):
                        return f"{ours / theirs:.2f}x" if ours is not None and theirs else "-"
                    t32, tt = th.get(False), th.get(True)
                    cells = [f(comp) if net is not None else f"failed: {note}", f(net),
                             f(t32 and t32[0]), f(t32 and t32[1]), f(tt and tt[0]), f(tt and tt[1]),
                             r(comp, t32 and t32[0]), r(net, t32 and t32[1]),
                             r(comp, tt and tt[0]), r(net, tt and tt[1])]
                    print(f"| {label} x{scale} | {size}x{size} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
