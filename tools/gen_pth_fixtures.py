#!/usr/bin/python3
"""Generates the PyTorch checkpoints of tests/io/pickle_test.cpp and tests/nn (tests/data/pth/).

Run from the repository root with Debian's python3-torch (1.13):
    /usr/bin/python3 tools/gen_pth_fixtures.py
Each <name>.pt comes with <name>.expected.safetensors: every tensor the C++ reader must
return, by its flattened name, contiguous and in the dtype candle loads it as (int8 -> int16,
bool -> uint8). The files are committed.
"""
import collections
import io
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pth")
GENERATOR = "tools/gen_pth_fixtures.py"


def path(name):
    return os.path.join(OUT, name)


class Tiny(torch.nn.Module):
    """A Linear and a BatchNorm (f32 parameters, an int64 buffer) plus one buffer per dtype."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.bn = torch.nn.BatchNorm1d(2)
        g = torch.Generator().manual_seed(1)
        self.register_buffer("f64", torch.randn(2, 2, generator=g, dtype=torch.float64))
        self.register_buffer("f16", torch.randn(3, generator=g).half())
        self.register_buffer("bf16", torch.randn(2, 3, generator=g).bfloat16())
        self.register_buffer("i32", torch.tensor([[-7, 0, 2**31 - 1], [-(2**31), 5, 6]], dtype=torch.int32))
        self.register_buffer("i16", torch.tensor([-32768, 32767, -1], dtype=torch.int16))
        self.register_buffer("i8", torch.tensor([-128, 127, -1, 0], dtype=torch.int8))
        self.register_buffer("u8", torch.tensor([0, 255, 7], dtype=torch.uint8))
        self.register_buffer("flags", torch.tensor([True, False, True]))
        self.register_buffer("i64", torch.tensor([-(2**63), 2**63 - 1, 3], dtype=torch.int64))
        self.register_buffer("scalar", torch.tensor(2.5))


def expected(tensors):
    """What candle returns for each tensor: contiguous, int8 widened, bool as uint8."""
    out = {}
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.int8:
            t = t.to(torch.int16)
        elif t.dtype == torch.bool:
            t = t.to(torch.uint8)
        out[name] = t.clone()
    return out


def flatten(obj, name=""):
    """The tensors of a nest of dicts and lists, by dotted name (as candle::pickle::read_all)."""
    if isinstance(obj, torch.Tensor):
        return {name: obj}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return {}
    out = {}
    for k, v in items:
        out.update(flatten(v, f"{name}.{k}" if name else str(k)))
    return out


def save(name, obj, **kwargs):
    p = path(name + ".pt")
    torch.save(obj, p, **kwargs)
    write_safetensors(path(name + ".expected.safetensors"), expected(flatten(obj)), GENERATOR)
    print(f"wrote {os.path.normpath(p)} ({os.path.getsize(p)} bytes)")


def views():
    """Non-contiguous tensors, storage offsets, storages shared by several tensors."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    d = collections.OrderedDict()
    d["base"] = base
    d["transposed"] = base.t()                  # stride (1, 6)
    d["sliced"] = base[1:, ::2]                 # offset 6, stride (6, 2)
    d["row2"] = base[2]                         # offset 12, contiguous
    d["flat"] = base.view(24)                   # the same storage again
    d["expanded"] = torch.tensor([1.0, 2.0, 3.0]).expand(4, 3)  # stride (0, 1)
    d["empty"] = torch.zeros(0, 3)
    i8 = torch.tensor([[1, -2, 3], [-4, 5, -6]], dtype=torch.int8)
    d["i8_t"] = i8.t()                          # widened and strided
    d["permuted"] = torch.arange(24, dtype=torch.int64).reshape(2, 3, 4).permute(2, 0, 1)
    return d


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    sd = Tiny().state_dict()
    save("module", sd)                                      # zip, pickle protocol 2
    save("module_proto4", sd, pickle_protocol=4)            # zip, protocol 4 (FRAME, MEMOIZE, STACK_GLOBAL)
    save("module_legacy", sd, _use_new_zipfile_serialization=False)
    save("views", views())
    save("views_legacy", views(), _use_new_zipfile_serialization=False)
    save("views_proto5", views(), pickle_protocol=5)

    lin = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(lin.parameters(), lr=0.1)
    lin(torch.ones(1, 2)).sum().backward()
    opt.step()
    nested = {
        "epoch": 3,
        "name": "tiny",
        "blob": b"\x00\xffbytes",
        "state_dict": lin.state_dict(),
        "optimizer": opt.state_dict(),      # int keys (state.0.exp_avg), lists (param_groups)
        "param": torch.nn.Parameter(torch.tensor([0.5, -0.5])),  # _rebuild_parameter
        "list": [torch.tensor([1, 2], dtype=torch.int32), {"deep": {"er": torch.tensor([9.0])}}],
        "sizes": torch.Size([2, 3]),
        "f": 1.25,
        "none": None,
    }
    save("nested", nested)
    save("nested_legacy", nested, _use_new_zipfile_serialization=False)
    save("nested_proto4", nested, pickle_protocol=4)

    # a lone tensor (named "" by read_all)
    save("tensor", torch.arange(5, dtype=torch.int16))

    # the same state dict under another top folder name in the archive
    buf = io.BytesIO()
    torch.save(sd, buf)
    with open(path("archive_folder.pt"), "wb") as f:
        f.write(buf.getvalue())                # a BytesIO's folder is "archive"
    write_safetensors(path("archive_folder.expected.safetensors"), expected(flatten(sd)), GENERATOR)


if __name__ == "__main__":
    main()
