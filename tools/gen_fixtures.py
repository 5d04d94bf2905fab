#!/usr/bin/python3
"""Generates tests/data/ops_grid.safetensors: PyTorch reference results over a grid of
ops x dtypes x layouts, read by tests/io/ops_grid_test.cpp.

Run with Debian's PyTorch (python3-torch, 1.13):  /usr/bin/python3 tools/gen_fixtures.py

Naming: "<op>/<dtype>/in0", "<op>/<dtype>/in1" (contiguous inputs) and
"<op>/<dtype>/<layout>" (the expected output when the same view is applied to every input).
Layouts (applied to each [6, 8] input):
  contig     x
  transposed x.t()                       -> [8, 6]
  narrowed   x[:, 1:7]                   -> [6, 6]  (row stride 8)
  offset     x[2:5]                      -> [3, 8]  (start offset 16)
  broadcast  x[1:2].expand(6, 8)         -> [6, 8]  (row stride 0)
f16/bf16 references are computed in f32 and rounded once, as candle-cpp computes them.
"""
import os

import torch
import torch.nn.functional as F
from st_write import write_safetensors

torch.manual_seed(1234)

LAYOUTS = {
    "contig": lambda x: x,
    "transposed": lambda x: x.t(),
    "narrowed": lambda x: x[:, 1:7],
    "offset": lambda x: x[2:5],
    "broadcast": lambda x: x[1:2].expand(6, 8),
}

FLOATS = ["f32", "f64", "f16", "bf16"]
TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
               "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8}

tensors = {}


def put(name, t):
    tensors[name] = t.contiguous()


def compute_dtype(dt):
    return torch.float32 if dt in ("f16", "bf16") else TORCH_DTYPE[dt]


def gen_input(dt, kind):
    if dt in FLOATS:
        if kind == "positive":
            x = torch.rand(6, 8, dtype=torch.float64) * 4 + 0.1
        elif kind == "nonzero":
            x = (torch.rand(6, 8, dtype=torch.float64) * 4 + 0.25) * (torch.randint(0, 2, (6, 8)) * 2 - 1)
        else:
            x = torch.randn(6, 8, dtype=torch.float64) * 2
        return x.to(TORCH_DTYPE[dt])
    if dt == "u8":
        return torch.randint(0, 16, (6, 8), dtype=torch.uint8)
    return torch.randint(-20, 20, (6, 8), dtype=TORCH_DTYPE[dt])


def run(op, dts, fn, kinds=("any",), cast_back=True):
    for dt in dts:
        ins = [gen_input(dt, k) for k in kinds]
        for i, x in enumerate(ins):
            put(f"{op}/{dt}/in{i}", x)
        for lname, lf in LAYOUTS.items():
            views = [lf(x.to(compute_dtype(dt))) for x in ins]
            out = fn(*views)
            if cast_back and out.dtype.is_floating_point:
                out = out.to(TORCH_DTYPE[dt])
            put(f"{op}/{dt}/{lname}", out)


UNARY = {
    "exp": (torch.exp, "any"), "log": (torch.log, "positive"), "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"), "tanh": (torch.tanh, "any"), "abs": (torch.abs, "any"),
    "sqr": (lambda x: x * x, "any"), "sqrt": (torch.sqrt, "positive"),
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), "any"), "gelu_erf": (F.gelu, "any"),
    "erf": (torch.erf, "any"), "relu": (torch.relu, "any"), "silu": (F.silu, "any"),
    "sigmoid": (torch.sigmoid, "any"), "ceil": (torch.ceil, "any"), "floor": (torch.floor, "any"),
    "round": (lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5), "any"),  # candle rounds half away from zero
    "neg": (torch.neg, "any"), "recip": (torch.reciprocal, "nonzero"), "sign": (torch.sign, "any"),
    "affine": (lambda x: x * 2.5 - 1.0, "any"), "powf": (lambda x: torch.pow(x, 2.5), "positive"),
    "elu": (lambda x: F.elu(x, 0.7), "any"),
}
for name, (fn, kind) in UNARY.items():
    run(name, FLOATS, fn, (kind,))

BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "maximum": torch.maximum, "minimum": torch.minimum}
for name, fn in BINARY.items():
    run(name, FLOATS, fn, ("any", "nonzero" if name == "div" else "any"))
for name in ("add", "mul", "maximum", "minimum"):
    run(name, ["i64", "i32", "u8"], BINARY[name], ("any", "any"))

for name, fn in {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
                 "ge": torch.ge}.items():
    # inputs with ties: round to a coarse grid
    def cmp(a, b, fn=fn):
        if a.dtype.is_floating_point:
            a, b = torch.round(a), torch.round(b)
        return fn(a, b).to(torch.uint8)
    run(name, ["f32", "f64", "i64"], cmp, ("any", "any"))

REDUCE = {
    "sum0": lambda x: x.sum(0, keepdim=True), "sum1": lambda x: x.sum(1, keepdim=True),
    "sum01": lambda x: x.sum((0, 1), keepdim=True),
    "max1": lambda x: x.max(1, keepdim=True).values, "min0": lambda x: x.min(0, keepdim=True).values,
    "argmax1": lambda x: x.argmax(1, keepdim=True).to(torch.int64),
    "argmin0": lambda x: x.argmin(0, keepdim=True).to(torch.int64),
    "mean1": lambda x: x.mean(1, keepdim=True), "cumsum1": lambda x: x.cumsum(1),
    "log_sum_exp1": lambda x: torch.logsumexp(x, 1, keepdim=True),
    "var1": lambda x: x.var(1, keepdim=True),
}
for name, fn in REDUCE.items():
    # argmax/argmin on a grid without ties (random floats); broadcast layout has ties along dim 0 only
    # arg ops: the broadcast layout has ties along dim 0, where the first index wins in both
    dts = FLOATS if not name.startswith("arg") else ["f32", "f64"]
    run(name, dts, fn)
for name in ("sum0", "sum1", "max1", "min0"):
    # PyTorch promotes integer sums to i64; candle keeps the dtype (values here fit)
    run(name, ["i64", "i32"], lambda x, f=REDUCE[name]: f(x).to(x.dtype))

run("matmul", FLOATS, lambda a, b: a @ b.t(), ("any", "any"))
run("where_cond", ["f32", "f64", "i64"], lambda c, a, b: torch.where(c > 0, a, b), ("any", "any", "any"))
run("to_f32", ["f64", "f16", "bf16", "i64", "i32", "u8"], lambda x: x.to(torch.float32), cast_back=False)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "ops_grid.safetensors")
write_safetensors(out, tensors, "tools/gen_fixtures.py")
