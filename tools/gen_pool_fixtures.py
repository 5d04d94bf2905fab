#!/usr/bin/python3
"""Generates tests/data/pool_grid.safetensors: PyTorch references for pooling and resizing,
read by tests/conv/pool_test.cpp.

Run with Debian's PyTorch (python3-torch, 1.13):  /usr/bin/python3 tools/gen_pool_fixtures.py

Names (every input "x" is contiguous; the test parses the rest of the name):
  pool/<dt>/<sid>/x                          input [b, c, h, w]
  pool/<dt>/<sid>/<avg|max>_k<kh>x<kw>_s<sh>x<sw>
  nearest2d/<dt>/<sid>/x, nearest2d/<dt>/<sid>/<th>x<tw>
  nearest1d/<dt>/x, nearest1d/<dt>/<l>
  bilinear/<dt>/<sid>/x
  bilinear/<dt>/<sid>/size_<th>x<tw>_ac<0|1>      F.interpolate(size=..., align_corners=...)
  bilinear/<dt>/<sid>/scale_<sh>x<sw>_ac<0|1>     F.interpolate(scale_factor=..., recompute_scale_factor=False)
Expected outputs of f16/bf16 inputs are computed in f32 (pooling) or f64 (bilinear) from the
rounded input and stored as f32; integer max pooling and nearest resizing are exact.

Nearest: PyTorch's source index for mode='nearest' is floor(dst * in / out). candle computes
it as floor(dst * (in / out)) with the ratio in f64, which is one too small at some exact
multiples (e.g. in 2, out 98, dst 49: candle 0, PyTorch 1); candle-cpp uses the exact integer
formula. This script checks PyTorch against the exact formula for in <= 64, out <= 128.
"""
import os

import torch
import torch.nn.functional as F
from st_write import write_safetensors

torch.manual_seed(4242)

TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
               "i64": torch.int64, "u8": torch.uint8}
FLOATS = ["f32", "f64", "f16", "bf16"]

tensors = {}


def put(name, t):
    assert name not in tensors, name
    tensors[name] = t.contiguous()


def make_input(dt, shape):
    if dt == "u8":
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    if dt == "i64":
        return torch.randint(-1000, 1000, shape, dtype=torch.int64)
    return (torch.randn(shape, dtype=torch.float64) * 3).to(TORCH_DTYPE[dt])


def ref_dtype(dt):
    return torch.float32 if dt in ("f16", "bf16") else TORCH_DTYPE[dt]


# ---- pooling ----
POOL_SHAPES = {"b1c1": (1, 1, 7, 9), "b2c3": (2, 3, 8, 7)}
KERNELS = [(1, 1), (2, 2), (3, 3), (2, 3)]
STRIDES = [(1, 1), (2, 2), (3, 3), (2, 1)]
for dt in FLOATS + ["u8", "i64"]:
    for sid, shape in POOL_SHAPES.items():
        x = make_input(dt, shape)
        put(f"pool/{dt}/{sid}/x", x)
        for k in KERNELS:
            for s in STRIDES:
                tag = f"k{k[0]}x{k[1]}_s{s[0]}x{s[1]}"
                if dt in FLOATS:
                    xr = x.to(ref_dtype(dt))
                    put(f"pool/{dt}/{sid}/avg_{tag}", F.avg_pool2d(xr, k, s))
                    put(f"pool/{dt}/{sid}/max_{tag}", F.max_pool2d(xr, k, s))
                else:
                    # integer max pooling: exact through f64
                    put(f"pool/{dt}/{sid}/max_{tag}", F.max_pool2d(x.to(torch.float64), k, s).to(x.dtype))

# ---- nearest ----
def nearest_exact_check():
    for i in range(1, 65):
        x = torch.arange(i, dtype=torch.float64).reshape(1, 1, i)
        for o in range(1, 129):
            got = F.interpolate(x, size=o, mode="nearest").flatten().long().tolist()
            want = [min(k * i // o, i - 1) for k in range(o)]
            assert got == want, (i, o)


nearest_exact_check()
NEAREST_SHAPES = {"b1c1": (1, 1, 5, 7), "b2c3": (2, 3, 4, 6)}
NEAREST_TARGETS = {"b1c1": [(10, 14), (15, 21), (5, 7), (8, 11), (3, 4), (2, 9), (1, 1)],
                   "b2c3": [(8, 12), (16, 24), (7, 10), (2, 3), (3, 4), (4, 6)]}
for dt in ["f32", "f64", "f16", "bf16", "u8", "i64"]:
    for sid, shape in NEAREST_SHAPES.items():
        x = make_input(dt, shape)
        put(f"nearest2d/{dt}/{sid}/x", x)
        for th, tw in NEAREST_TARGETS[sid]:
            y = F.interpolate(x.to(torch.float64), size=(th, tw), mode="nearest").to(x.dtype)
            put(f"nearest2d/{dt}/{sid}/{th}x{tw}", y)
    x = make_input(dt, (2, 3, 7))
    put(f"nearest1d/{dt}/x", x)
    for n in [14, 21, 7, 10, 3, 1, 98]:
        put(f"nearest1d/{dt}/{n}", F.interpolate(x.to(torch.float64), size=n, mode="nearest").to(x.dtype))

# ---- bilinear ----
BILINEAR_SHAPES = {"b1c1": (1, 1, 5, 7), "b2c3": (2, 3, 4, 6), "b1c2": (1, 2, 3, 4)}
SIZES = {"b1c1": [(10, 14), (9, 11), (3, 4), (2, 9), (1, 1), (1, 5), (5, 7)],
         "b2c3": [(8, 12), (7, 13), (2, 3), (4, 6)],
         "b1c2": [(6, 8), (3, 4)]}
SCALES = {"b1c1": [(2.0, 2.0), (1.5, 2.5), (0.5, 0.75), (1.2, 1.3)],
          "b2c3": [(2.0, 3.0), (0.6, 0.4)],
          # 1.2 x 3 and 1.1 x 4 floor back to 3 and 4: PyTorch maps a dim that keeps its size
          # one to one, whatever the scale factor
          "b1c2": [(1.2, 1.1), (1.7, 1.1), (1.1, 1.7), (1.0, 1.0)]}
for dt in FLOATS:
    for sid, shape in BILINEAR_SHAPES.items():
        x = make_input(dt, shape)
        put(f"bilinear/{dt}/{sid}/x", x)
        # f32/f64: PyTorch in that dtype; f16/bf16: f64 from the rounded input
        xr = x.to(torch.float64) if dt in ("f16", "bf16") else x
        for ac in (False, True):
            for th, tw in SIZES[sid]:
                y = F.interpolate(xr, size=(th, tw), mode="bilinear", align_corners=ac)
                put(f"bilinear/{dt}/{sid}/size_{th}x{tw}_ac{int(ac)}", y.to(ref_dtype(dt)))
            for sh, sw in SCALES[sid]:
                y = F.interpolate(xr, scale_factor=(sh, sw), mode="bilinear", align_corners=ac,
                                  recompute_scale_factor=False)
                put(f"bilinear/{dt}/{sid}/scale_{sh}x{sw}_ac{int(ac)}", y.to(ref_dtype(dt)))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pool_grid.safetensors")
write_safetensors(out, tensors, "tools/gen_pool_fixtures.py")
