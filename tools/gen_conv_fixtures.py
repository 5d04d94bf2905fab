#!/usr/bin/env python3
"""Generates tests/data/conv_grid.safetensors: PyTorch conv1d/conv2d references over a grid of
kernel 1/3/5/7 (conv1d: 1/3/5), stride 1/2, padding 0/1/2, dilation 1/2, groups 1/2/channels,
batch 1/3 (alternating), odd spatial sizes. Inputs and kernels are stored once in f64; each
reference is computed in f64 (stored as f32, and as f64 for every third case, for the tight f64
check). tests/conv/conv_grid_test.cpp casts the inputs to f32/f64/f16/bf16, runs them through
contiguous and strided layouts and compares.

  /usr/bin/python3 tools/gen_conv_fixtures.py      # Debian's python3-torch (1.13)
"""
import os

import torch
import torch.nn.functional as F
from st_write import write_safetensors

torch.manual_seed(4242)
C = 4  # channels in and out; groups 1, 2 and C (depthwise)
tensors = {}

x2d = {1: torch.randn(1, C, 11, 13, dtype=torch.float64), 3: torch.randn(3, C, 9, 11, dtype=torch.float64)}
x1d = {1: torch.randn(1, C, 17, dtype=torch.float64), 3: torch.randn(3, C, 15, dtype=torch.float64)}
for b in (1, 3):
    tensors[f"x2d.b{b}"] = x2d[b]
    tensors[f"x1d.b{b}"] = x1d[b]
w2d, w1d = {}, {}
for k in (1, 3, 5, 7):
    for g in (1, 2, C):
        w2d[(k, g)] = torch.randn(C, C // g, k, k, dtype=torch.float64)
        tensors[f"w2d.k{k}.g{g}"] = w2d[(k, g)]
        if k <= 5:
            w1d[(k, g)] = torch.randn(C, C // g, k, dtype=torch.float64)
            tensors[f"w1d.k{k}.g{g}"] = w1d[(k, g)]

n = 0
for k in (1, 3, 5, 7):
    for s in (1, 2):
        for p in (0, 1, 2):
            for d in (1, 2):
                for g in (1, 2, C):
                    b = 1 if n % 2 == 0 else 3
                    x = x2d[b]
                    span = d * (k - 1) + 1
                    if min(x.shape[2], x.shape[3]) + 2 * p >= span:
                        y = F.conv2d(x, w2d[(k, g)], stride=s, padding=p, dilation=d, groups=g)
                        name = f"c2d.k{k}.s{s}.p{p}.d{d}.g{g}.b{b}"
                        tensors[name + ".f32"] = y.float()
                        if n % 3 == 0:
                            tensors[name + ".f64"] = y
                    if k <= 5:
                        x = x1d[b]
                        if x.shape[2] + 2 * p >= span:
                            y = F.conv1d(x, w1d[(k, g)], stride=s, padding=p, dilation=d, groups=g)
                            name = f"c1d.k{k}.s{s}.p{p}.d{d}.g{g}.b{b}"
                            tensors[name + ".f32"] = y.float()
                            if n % 3 == 0:
                                tensors[name + ".f64"] = y
                    n += 1

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "conv_grid.safetensors")
write_safetensors(out, tensors, "tools/gen_conv_fixtures.py")
