#!/usr/bin/env python3
"""What a user waits for: the whole candle-upscale process beside a PyTorch script doing the same.

Each run is a fresh process timed from outside (start to exit: loading, the image decoded, the
network's first and only pass, the PNG encoded and written). The PyTorch side is the same graph
(tools/bench_upscale_vs_torch.py's build_forward, from the same .safetensors file) in a script
that imports torch, decodes the input with PIL (numpy + zlib where PIL is missing), runs the network once under torch.no_grad(),
clamps, rounds, converts to uint8 and writes the PNG with PIL (compress_level 1, PIL's fastest
deflate, as candle's default --png-level 1). Also printed: candle's own network time from its
summary line, so the share of the process the network takes is visible.

  python3 tools/bench_upscale_process.py --bin build-release/bin --threads 2 [--runs 3]
      [--model esrgan-slim] [--scale 4] [--size 512] [--device cpu] [--torch-device cpu]

The input is a synthetic --size x --size RGB PNG (a gradient with noise), written once.
"""
import argparse
import os
import random
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TORCH_CHILD = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import torch
import numpy as np
from bench_upscale_vs_torch import build_forward
model, inp, out, threads, device = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
torch.set_num_threads(threads)
if device == "cuda":
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
forward = build_forward(model, device)
try:
    from PIL import Image
    img = np.asarray(Image.open(inp).convert("RGB"))
except ImportError:  # no PIL: the synthetic input's rows are all filter 0 (numpy, no Python loop)
    Image = None
    import struct, zlib
    raw = open(inp, "rb").read()
    w, h = struct.unpack(">II", raw[16:24])
    pos, idat = 8, b""
    while pos < len(raw):
        n = struct.unpack(">I", raw[pos:pos + 4])[0]
        if raw[pos + 4:pos + 8] == b"IDAT":
            idat += raw[pos + 8:pos + 8 + n]
        pos += 12 + n
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any(), "only filter-0 rows without PIL"
    img = rows[:, 1:].reshape(h, w, 3)
x = torch.from_numpy(img.copy()).permute(2, 0, 1)[None].float().to(device)
with torch.no_grad():
    n0 = time.perf_counter()
    y = forward(x).to(torch.uint8)
    y = y[0].permute(1, 2, 0).contiguous().cpu().numpy()
    net = time.perf_counter() - n0
if Image is not None:
    Image.fromarray(y).save(out, compress_level=1)
else:  # zlib level 1, filter None
    import struct, zlib
    rows = np.concatenate([np.zeros((y.shape[0], 1), np.uint8), y.reshape(y.shape[0], -1)], 1).tobytes()
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(out, "wb").write(b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", y.shape[1], y.shape[0], 8, 2, 0, 0, 0))
                          + ch(b"IDAT", zlib.compress(rows, 1)) + ch(b"IEND", b""))
print("network %.4f png %s" % (net, "PIL" if Image is not None else "zlib"))
"""


def write_png(path, size):
    random.seed(1)
    rows = b"".join(b"\x00" + bytes(((x * 7 + y * 3 + random.randint(0, 40)) % 256 for x in range(size * 3)))
                    for y in range(size))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("failed: " + " ".join(cmd) + "\n" + p.stderr[-2000:])
    return dt, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-release/bin"))
    ap.add_argument("--model", default="esrgan-slim")
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="candle-upscale --device")
    ap.add_argument("--torch-device", default="cpu")
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="candle-process-")
    inp = os.path.join(work, "in.png")
    write_png(inp, args.size)
    model_file = os.path.join(ROOT, "models", args.model, "x%d.safetensors" % args.scale)
    env = dict(os.environ, CANDLE_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    child = os.path.join(work, "torch_child.py")
    with open(child, "w") as f:
        f.write(TORCH_CHILD)
    rows = {"candle": [], "torch": []}
    nets = {"candle": [], "torch": []}
    for r in range(args.runs):  # alternate, so that drift of the machine hits both sides
        dt, err = timed([os.path.join(args.bin, "candle-upscale"), "--device", args.device, "--model", args.model,
                         "--scale", str(args.scale), inp, os.path.join(work, "candle.png")], env)
        m = re.search(r"\(network ([0-9.]+) s", err)
        rows["candle"].append(dt)
        nets["candle"].append(float(m.group(1)) if m else float("nan"))
        if not args.skip_torch:
            dt, out = timed([sys.executable, child, os.path.join(ROOT, "tools"), model_file, inp,
                             os.path.join(work, "torch.png"), str(args.threads), args.torch_device], env)
            rows["torch"].append(dt)
            nets["torch"].append(float(re.search(r"network ([0-9.]+)", out).group(1)))
    print("%s x%d, %dx%d input, %d threads, candle --device %s, PyTorch %s; %d fresh processes each"
          % (args.model, args.scale, args.size, args.size, args.threads, args.device, args.torch_device, args.runs))
    print("| side | process s (median) | process s (min) | network s (median) |")
    print("| --- | ---: | ---: | ---: |")
    for side in ("candle", "torch"):
        if rows[side]:
            print("| %s | %.3f | %.3f | %.4f |" % (side, statistics.median(rows[side]), min(rows[side]),
                                                  statistics.median(nets[side])))
    if rows["torch"]:
        print("candle / PyTorch, whole process (median): %.2fx" %
              (statistics.median(rows["candle"]) / statistics.median(rows["torch"])))


if __name__ == "__main__":
    main()
