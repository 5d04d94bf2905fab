#!/usr/bin/env python3
"""Generates tests/data/convgrad_grid.safetensors: PyTorch autograd references for the gradients
of conv1d/conv2d (kernel 1/3/5, stride 1/2, padding 0/1/2, dilation 1/2, groups 1/2, batch 1/2
alternating, odd sizes), conv_transpose1d/2d (kernel 1/3/4, stride 1/2/3, padding 0/1,
dilation 1/2, output_padding 0/1 where allowed, groups 1/2 for 1-D), max/avg pooling (kernel ==
stride, kernel > stride, kernel < stride; integer inputs with ties and NaNs for max) and
nearest/bilinear resizing (both align_corners modes and the scale-factor form).

Inputs and kernels are stored once in f64. The output gradient is not stored: it is
grad_out[i] = sin(0.37 i + 0.1) over the row-major elements (tests/conv/conv_grad_test.cpp
builds the same). References are computed in f64 and stored as f32, and as f64 for every third
case (the tight f64 check).

  /usr/bin/python3 tools/gen_convgrad_fixtures.py      # Debian's python3-torch (1.13)
"""
import math
import os

import torch
import torch.nn.functional as F
from st_write import write_safetensors

torch.manual_seed(977)
T = {}
C = 4


def gout(shape):
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    return torch.sin(0.37 * i + 0.1).reshape(shape)


def store(name, t, n):
    T[name + ".f32"] = t.float()
    if n % 3 == 0:
        T[name + ".f64"] = t.clone()


# ---- conv2d / conv1d ----
x2d = {b: torch.randn(b, C, 7, 9, dtype=torch.float64) for b in (1, 2)}
x1d = {b: torch.randn(b, C, 13, dtype=torch.float64) for b in (1, 2)}
w2d, w1d = {}, {}
for b in (1, 2):
    T[f"x2d.b{b}"] = x2d[b]
    T[f"x1d.b{b}"] = x1d[b]
for k in (1, 3, 5):
    for g in (1, 2):
        w2d[(k, g)] = torch.randn(C, C // g, k, k, dtype=torch.float64)
        w1d[(k, g)] = torch.randn(C, C // g, k, dtype=torch.float64)
        T[f"w2d.k{k}.g{g}"] = w2d[(k, g)]
        T[f"w1d.k{k}.g{g}"] = w1d[(k, g)]

n = 0
for k in (1, 3, 5):
    for s in (1, 2):
        for p in (0, 1, 2):
            for d in (1, 2):
                for g in (1, 2):
                    b = 1 if n % 2 == 0 else 2
                    span = d * (k - 1) + 1
                    for dim, x, w, conv in (("2d", x2d[b], w2d[(k, g)], F.conv2d), ("1d", x1d[b], w1d[(k, g)], F.conv1d)):
                        if min(x.shape[2:]) + 2 * p < span:
                            continue
                        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
                        bias = torch.zeros(C, dtype=torch.float64, requires_grad=True)
                        y = conv(xr, wr, bias, stride=s, padding=p, dilation=d, groups=g)
                        y.backward(gout(y.shape))
                        name = f"c{dim}.k{k}.s{s}.p{p}.d{d}.g{g}.b{b}"
                        store(name + ".gw", wr.grad, n)
                        store(name + ".gx", xr.grad, n)
                        store(name + ".gb", bias.grad, n)
                    n += 1

# ---- conv_transpose2d (groups 1) / conv_transpose1d (groups 1, 2) ----
xt2d = {b: torch.randn(b, C, 5, 6, dtype=torch.float64) for b in (1, 2)}
xt1d = {b: torch.randn(b, C, 7, dtype=torch.float64) for b in (1, 2)}
for b in (1, 2):
    T[f"xt2d.b{b}"] = xt2d[b]
    T[f"xt1d.b{b}"] = xt1d[b]
wt2d, wt1d = {}, {}
for k in (1, 3, 4):
    wt2d[k] = torch.randn(C, 3, k, k, dtype=torch.float64)
    T[f"wt2d.k{k}"] = wt2d[k]
    for g in (1, 2):
        wt1d[(k, g)] = torch.randn(C, 2, k, dtype=torch.float64)  # c_out = 2 * groups
        T[f"wt1d.k{k}.g{g}"] = wt1d[(k, g)]
n = 0
for k in (1, 3, 4):
    for s in (1, 2, 3):
        for p in (0, 1):
            for d in (1, 2):
                op = n % 2 if (s > 1 or d > 1) else 0
                b = 1 if n % 2 == 0 else 2
                g = 1 + (n // 2) % 2
                for dim in ("2d", "1d"):
                    if dim == "2d":
                        x, w, gg = xt2d[b], wt2d[k], 1
                        conv = F.conv_transpose2d
                    else:
                        x, w, gg = xt1d[b], wt1d[(k, g)], g
                        conv = F.conv_transpose1d
                    out_len = (x.shape[2] - 1) * s - 2 * p + d * (k - 1) + op + 1
                    if out_len <= 0:
                        continue
                    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
                    y = conv(xr, wr, stride=s, padding=p, output_padding=op, dilation=d, groups=gg)
                    y.backward(gout(y.shape))
                    name = f"t{dim}.k{k}.s{s}.p{p}.o{op}.d{d}.g{gg}.b{b}"
                    store(name + ".gw", wr.grad, n)
                    store(name + ".gx", xr.grad, n)
                n += 1

# ---- pooling ----
xp = torch.randint(0, 4, (2, 3, 7, 9)).double()  # small integers: many ties
xp[0, 0, 0, 1] = float("nan")
xp[0, 0, 1, 0] = float("nan")
xp[1, 2, 3, 3] = float("nan")
xp[1, 1, 0:2, 0:3] = float("-inf")
T["pool.x"] = xp
n = 0
for kh, kw, sh, sw in ((2, 2, 2, 2), (3, 3, 2, 2), (2, 2, 1, 1), (3, 2, 2, 3), (2, 2, 3, 3), (1, 1, 2, 2)):
    name = f"k{kh}x{kw}.s{sh}x{sw}"
    xr = xp.clone().requires_grad_()
    y = F.max_pool2d(xr, (kh, kw), (sh, sw))
    y.backward(gout(y.shape))
    store("maxpool." + name, xr.grad, n)
    xr = xp.clone().nan_to_num(0.0, 0.0, 0.0).requires_grad_()
    y = F.avg_pool2d(xr, (kh, kw), (sh, sw))
    y.backward(gout(y.shape))
    store("avgpool." + name, xr.grad, n)
    n += 1

# ---- resizing ----
xu = torch.randn(2, 3, 5, 7, dtype=torch.float64)
xu1 = torch.randn(2, 3, 7, dtype=torch.float64)


def exact_nearest(i, o):
    return [min(i - 1, (d * i) // o) for d in range(o)]


n = 0
for oh, ow in ((11, 16), (10, 14), (3, 4), (5, 7)):
    xr = xu.clone().requires_grad_()
    y = F.interpolate(xr, size=(oh, ow), mode="nearest")
    # the forward here maps dst -> floor(dst * in / out) exactly: check torch agrees on these sizes
    hi, wi = exact_nearest(5, oh), exact_nearest(7, ow)
    assert torch.equal(y, xu[:, :, hi][:, :, :, wi])
    y.backward(gout(y.shape))
    store(f"nearest2d.{oh}x{ow}", xr.grad, n)
    for ac in (False, True):
        xr = xu.clone().requires_grad_()
        y = F.interpolate(xr, size=(oh, ow), mode="bilinear", align_corners=ac)
        y.backward(gout(y.shape))
        store(f"bilinear.{oh}x{ow}.ac{int(ac)}", xr.grad, n)
    n += 1
for ol in (16, 3, 14):
    xr = xu1.clone().requires_grad_()
    y = F.interpolate(xr, size=ol, mode="nearest")
    assert torch.equal(y, xu1[:, :, exact_nearest(7, ol)])
    y.backward(gout(y.shape))
    store(f"nearest1d.{ol}", xr.grad, n)
    n += 1
for sh, sw in ((1.7, 2.3), (0.6, 1.5)):
    for ac in (False, True):
        xr = xu.clone().requires_grad_()
        y = F.interpolate(xr, scale_factor=(sh, sw), mode="bilinear", align_corners=ac)
        y.backward(gout(y.shape))
        store(f"bilinear_scale.{sh}x{sw}.ac{int(ac)}", xr.grad, n)
        n += 1
T["up.x"] = xu
T["up.x1"] = xu1

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "convgrad_grid.safetensors")
write_safetensors(out, T, "tools/gen_convgrad_fixtures.py")
