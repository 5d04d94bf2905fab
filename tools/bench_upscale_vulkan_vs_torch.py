#!/usr/bin/env python3
"""candle-upscale on Vulkan beside the same network in PyTorch on CUDA (one GPU, same machine).

  python3 tools/bench_upscale_vulkan_vs_torch.py --bin /tmp/build/bin --sizes 512,1024 --scales 4,8

Inputs: deterministic synthetic RGB PNGs of each --sizes side (written to a temporary folder).
candle side: `candle-upscale --device vulkan --repeat N` (one process; the network runs N + 1
times, its best "network X s" is taken: forward + download of the f32 output to the host).
PyTorch side: the graph interpreter of tools/bench_upscale_vs_torch.py (imported, build_forward)
with the weights on CUDA, f32 NCHW under torch.no_grad(), TF32 off and then on; after --warmup
passes, N timed passes each ending with torch.cuda.synchronize() ("gpu"), and N more that also
copy the output to the host (".cpu()", comparable with candle's figure). Best times are printed
with the ratios PyTorch / candle (above 1: candle faster).
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
    cmd = [os.path.join(args.bin, "candle-upscale"), "--device", args.device, "--model", model, "--scale",
           str(scale), "--repeat", str(args.repeat), "--max-memory", "1000000", image, out]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"rc {p.returncode}"
    m = re.search(r"\(network ([0-9.]+) s", p.stderr)  # the summary line (best run), not "run 1"
    return float(m.group(1)), f"process {time.perf_counter() - t0:.1f} s"


def torch_times(args, model, image):
    import torch
    h, w, px = ref.read_png_rgb(image)
    forward = ref.build_forward(model, "cuda")
    x = torch.frombuffer(bytearray(px), dtype=torch.uint8).reshape(h, w, 3).permute(2, 0, 1)[None]
    x = x.float().contiguous().cuda()
    res = {}
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            with torch.no_grad():
                for _ in range(args.warmup):
                    forward(x)
                torch.cuda.synchronize()
                gpu, host = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    forward(x)
                    torch.cuda.synchronize()
                    gpu.append(time.perf_counter() - t0)
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    forward(x).cpu()
                    host.append(time.perf_counter() - t0)
            res[tf32] = (min(gpu), min(host))
        except torch.cuda.OutOfMemoryError:
            res[tf32] = None
        torch.cuda.empty_cache()
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build-release/bin"))
    p.add_argument("--model-dir", default=os.path.join(ROOT, "models/esrgan-slim"))
    p.add_argument("--device", default="vulkan")
    p.add_argument("--sizes", default="512,1024")
    p.add_argument("--scales", default="4,8")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--skip-torch", action="store_true")
    args = p.parse_args()
    print("| model | input | candle vulkan s | torch f32 gpu s | torch f32 +cpu s | torch tf32 gpu s | "
          "torch tf32 +cpu s | f32 +cpu / candle | tf32 +cpu / candle | f32 gpu / candle |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(v) for v in args.sizes.split(",")]:
            image = os.path.join(tmp, f"in{size}.png")
            write_png(image, size, size)
            for scale in [int(v) for v in args.scales.split(",")]:
                model = os.path.join(args.model_dir, f"x{scale}.safetensors")
                ours, note = candle_time(args, model, scale, image, os.path.join(tmp, "out.png"))
                th = {} if args.skip_torch else torch_times(args, model, image)

                def f(v):
                    return f"{v:.4f}" if v is not None else "-"

                def r(v):
                    return f"{v / ours:.2f}x" if v is not None and ours else "-"
                t32, tt = th.get(False), th.get(True)
                cells = [f(ours) if ours else f"failed: {note}",
                         f(t32 and t32[0]), f(t32 and t32[1]), f(tt and tt[0]), f(tt and tt[1]),
                         r(t32 and t32[1]), r(tt and tt[1]), r(t32 and t32[0])]
                print(f"| slim x{scale} | {size}x{size} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
