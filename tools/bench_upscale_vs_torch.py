#!/usr/bin/env python3
"""candle-upscale beside the same network in PyTorch, in one run on the same machine and image.

  /usr/bin/python3 tools/bench_upscale_vs_torch.py --bin build-release/bin --scales 4 --threads 2
  /usr/bin/python3 tools/bench_upscale_vs_torch.py --bin /tmp/b/bin --scales 4 --threads 1,16

PyTorch builds the graph from the same converted .safetensors file (weights and the "topology"
metadata) and runs it in NCHW f32 with torch.no_grad(), then clamps and rounds as candle-upscale
does. Each side runs in its own process (so each peak RSS is its own): one warm-up pass and
--repeats timed passes of the network in that process (candle-upscale --repeat; image decoding
and encoding excluded on both sides); the best time is reported. A PyTorch run that needs more than --torch-max-gb of address space fails and is
reported as such (PyTorch materialises the x8 upsampled 192-channel map whole).
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



def read_png_rgb(path):
    """8-bit RGB/RGBA non-interlaced PNG -> (h, w, bytes of h*w*3)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, color, _, _, interlace = hdr
    if depth != 8 or color not in (2, 6) or interlace:
        raise SystemExit(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs")
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    out, prev = bytearray(), bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        out += line if bpp == 3 else bytes(v for j, v in enumerate(line) if j % 4 != 3)
    return h, w, bytes(out)


def build_forward(model, device="cpu"):
    """The network of a converted .safetensors file (weights + "topology" metadata) as a function
    x [b, 3, h, w] f32 -> clamped, rounded output, with its weights on `device` (a torch device).
    Also used by tools/bench_upscale_vulkan_vs_torch.py."""
    import torch
    import torch.nn.functional as F
    raw = open(model, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    graph = json.loads(header["__metadata__"]["topology"])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        assert info["dtype"] == "F32"
        tensors[name] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]),
                                         dtype=torch.float32).reshape(info["shape"]).to(device)
    layers = {l["name"]: l for l in graph["layers"]}
    order, seen = [], set()

    def visit(name):
        if name in seen:
            return
        seen.add(name)
        for i in layers[name]["inputs"]:
            visit(i)
        order.append(layers[name])
    visit(graph["output"])

    def raw(x):
        vals = {}
        for l in order:
            ins = [vals[i] for i in l["inputs"]]
            op = l["op"]
            if op == "input":
                v = x
            elif op == "conv2d":
                v = F.conv2d(ins[0], tensors[l["name"] + ".weight"], tensors.get(l["name"] + ".bias"),
                             padding=tuple(l["padding"]))
                if l.get("activation") == "relu":
                    v = F.relu(v)
            elif op == "relu":
                v = F.relu(ins[0])
            elif op == "identity":
                v = ins[0]
            elif op == "concat":
                v = torch.cat(ins, 1)
            elif op == "add":
                v = ins[0]
                for t in ins[1:]:
                    v = v + t
            elif op == "upsample_nearest":
                v = F.interpolate(ins[0], scale_factor=tuple(l["size"]), mode="nearest")
            else:
                raise SystemExit("unknown op " + op)
            vals[l["name"]] = v
        return vals[graph["output"]]

    def forward(x):
        return raw(x).clamp(0, 255).round()
    forward.raw = raw  # the output as it comes (differentiable)
    forward.tensors = tensors  # name -> weight
    return forward


def torch_child(model, image, threads, repeats):
    import resource
    import time

    import torch
    torch.set_num_threads(threads)
    forward = build_forward(model)
    h, w, px = read_png_rgb(image)
    x = torch.frombuffer(bytearray(px), dtype=torch.uint8).reshape(h, w, 3).permute(2, 0, 1)[None].float().contiguous()
    best = None
    with torch.no_grad():
        for r in range(repeats + 1):
            t0 = time.perf_counter()
            y = forward(x)
            dt = time.perf_counter() - t0
            if r > 0:
                best = dt if best is None else min(best, dt)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"secs": best, "rss_mib": rss, "out": list(y.shape)}))


def run_child(cmd, env, max_gb=None):
    def limit():
        if max_gb:
            import resource
            b = int(max_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=limit)
    out, err = proc.communicate()
    return proc.returncode, out, err


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build-release/bin"))
    p.add_argument("--model-dir", default=os.path.join(ROOT, "models/esrgan-slim"))
    p.add_argument("--image", default=os.path.join(ROOT, "models/esrgan-slim/samples/4x/result.png"),
                   help="input PNG (default: a 512x512 image, the x4 sample output)")
    p.add_argument("--scales", default="4")
    p.add_argument("--threads", default="2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--torch-max-gb", type=float, default=20.0)
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--torch-child", nargs=4, help=argparse.SUPPRESS)  # model image threads repeats
    args = p.parse_args()

    if args.torch_child:
        torch_child(args.torch_child[0], args.torch_child[1], int(args.torch_child[2]), int(args.torch_child[3]))
        sys.exit(0)

    h, w, _ = read_png_rgb(args.image)
    print(f"image {args.image}: {w}x{h}")
    print("| model | threads | candle-cpp s | PyTorch s | PyTorch/candle-cpp | candle-cpp peak RSS MiB | PyTorch peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for scale in [int(s) for s in args.scales.split(",")]:
        model = os.path.join(args.model_dir, f"x{scale}.safetensors")
        for t in [int(v) for v in args.threads.split(",")]:
            env = dict(os.environ, CANDLE_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
            ours, rss = None, 0.0
            with tempfile.TemporaryDirectory() as tmp:
                # one process, like the PyTorch side: a warm-up pass and --repeats timed passes
                exe = os.path.join(args.bin, "candle-upscale")
                cmd = [exe, "--model", model, "--scale", str(scale), "--repeat", str(args.repeats + 1)]
                # a CPU benchmark: --device auto would take a GPU where the machine has one (builds from
                # before the option, compared in before/after runs, run on the CPU only)
                if "--device" in subprocess.run([exe, "--help"], capture_output=True, text=True).stdout:
                    cmd += ["--device", "cpu"]
                rc, out, err = run_child(cmd + [args.image, os.path.join(tmp, "out.png")], env)
                if rc != 0:
                    raise SystemExit("candle-upscale failed: " + err)
                m = re.search(r"\(network ([0-9.]+) s[^)\n]*\), peak memory ([0-9.]+) MiB", err)  # the summary line
                ours, rss = float(m.group(1)), float(m.group(2))
            theirs = "skipped"
            if not args.skip_torch:
                rc, out, err = run_child([sys.executable, os.path.abspath(__file__), "--torch-child", model, args.image,
                                          str(t), str(args.repeats)], env, args.torch_max_gb)
                theirs = json.loads(out.strip().splitlines()[-1]) if rc == 0 else None
            if isinstance(theirs, dict):
                print(f"| slim x{scale} | {t} | {ours:.3f} | {theirs['secs']:.3f} | {theirs['secs'] / ours:.2f}x | "
                      f"{rss:.0f} | {theirs['rss_mib']:.0f} |", flush=True)
            else:
                why = theirs if theirs == "skipped" else f"failed (over {args.torch_max_gb:g} GB)"
                print(f"| slim x{scale} | {t} | {ours:.3f} | {why} | | {rss:.0f} | |", flush=True)
