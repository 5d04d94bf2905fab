#!/usr/bin/python3
"""Generates tests/data/convt_grid.safetensors: PyTorch references for conv_transpose1d/2d,
read by tests/conv/conv_transpose_test.cpp.

Run with Debian's PyTorch (python3-torch, 1.13):  /usr/bin/python3 tools/gen_convt_fixtures.py

Per case "<op>/<dtype>/<i>/": "x" (input), "w" (kernel, candle/PyTorch layout), "y" (the
reference output) and "p" (i64: padding, output_padding, stride, dilation, groups).
The grid: kernel 1..4, stride 1..3, padding 0/1, dilation 1/2, output_padding 1 where
PyTorch allows it (every other case), groups 1/2 (1-D), batch 1/2, odd sizes.
f32 covers the whole grid; f64 every third case, f16/bf16 every sixth, with references computed in f32 from the
rounded inputs and rounded once (as candle-cpp computes them).
"""
import itertools
import os

import torch
import torch.nn.functional as F
from st_write import write_safetensors

torch.manual_seed(4242)

TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
               "i64": torch.int64}

tensors = {}


def put(name, t):
    tensors[name] = t.contiguous()


def cases():
    out = []
    for i, (k, s, p, d) in enumerate(itertools.product([1, 2, 3, 4], [1, 2, 3], [0, 1], [1, 2])):
        op = 1 if (i % 2 == 1 and (1 < s or 1 < d)) else 0
        out.append(dict(k=k, s=s, p=p, d=d, op=op, g=1 + (i // 2) % 2, b=1 + (i // 3) % 2))
    return out


def emit(prefix, dt, x, w, c, fn):
    if dt in ("f16", "bf16"):
        x, w = x.to(TORCH_DTYPE[dt]), w.to(TORCH_DTYPE[dt])
        y = fn(x.float(), w.float()).to(TORCH_DTYPE[dt])
    else:
        x, w = x.to(TORCH_DTYPE[dt]), w.to(TORCH_DTYPE[dt])
        y = fn(x, w)
    put(prefix + "x", x)
    put(prefix + "w", w)
    put(prefix + "y", y)
    put(prefix + "p", torch.tensor([c["p"], c["op"], c["s"], c["d"], c["g"]], dtype=torch.int64))


for dt in ["f32", "f64", "f16", "bf16"]:
    for i, c in enumerate(cases()):
        if (dt in ("f16", "bf16") and i % 6 != 0) or (dt == "f64" and i % 3 != 0):
            continue
        # 1-D: c_in = 4, c_out = 3 * groups, odd length
        x = torch.randn(c["b"], 4, 7 if i % 2 else 5, dtype=torch.float64)
        w = torch.randn(4, 3, c["k"], dtype=torch.float64)
        emit(f"c1d/{dt}/{i}/", dt, x, w, c,
             lambda x, w, c=c: F.conv_transpose1d(x, w, padding=c["p"], output_padding=c["op"], stride=c["s"],
                                                  dilation=c["d"], groups=c["g"]))
        # 2-D: c_in = 3, c_out = 2, odd non-square sizes (no groups, as candle)
        x = torch.randn(c["b"], 3, 3 if i % 2 else 5, 4, dtype=torch.float64)
        w = torch.randn(3, 2, c["k"], c["k"] if i % 3 else max(1, c["k"] - 1), dtype=torch.float64)
        c2 = dict(c, g=1)
        emit(f"c2d/{dt}/{i}/", dt, x, w, c2,
             lambda x, w, c=c2: F.conv_transpose2d(x, w, padding=c["p"], output_padding=c["op"], stride=c["s"],
                                                   dilation=c["d"]))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "convt_grid.safetensors")
write_safetensors(out, tensors, "tools/gen_convt_fixtures.py")
