#!/usr/bin/python3
"""Crafted hostile pickles and PyTorch checkpoints for candle::pickle.

    /usr/bin/python3 tools/make-hostile-pickles.py
writes raw pickles to tests/fuzz/corpus/pickle/hostile_*.pkl and whole checkpoints to
tests/fuzz/corpus/pth/hostile_*.pt (committed): the seeds of fuzz_pickle / fuzz_pth and the
inputs of tests/io/pickle_hostile_test.cpp, which checks the error each one gets. The valid
fixtures of tests/data/pth/ are copied in as seeds too.
"""
import collections
import glob
import io
import os
import pickle
import shutil
import struct
import zipfile

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PKL = os.path.join(ROOT, "tests", "fuzz", "corpus", "pickle")
PTH = os.path.join(ROOT, "tests", "fuzz", "corpus", "pth")


class Storage:
    def __init__(self, key, numel, storage_type=torch.FloatStorage, view=None):
        self.key, self.numel, self.storage_type, self.view = key, numel, storage_type, view


class Tensor:
    """Pickles as torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    legacy = False

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            pid = ("storage", obj.storage_type, obj.key, "cpu", obj.numel)
            return pid + (obj.view,) if self.legacy else pid
        return None


def dumps(obj, protocol=2, legacy=False):
    buf = io.BytesIO()
    p = Pickler(buf, protocol=protocol)
    p.legacy = legacy
    p.dump(obj)
    return buf.getvalue()


def write(folder, name, data):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def checkpoint(pkl, storages, folder="archive"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in [("data.pkl", pkl)] + [(f"data/{k}", v) for k, v in storages.items()] + \
                [("version", b"3\n")]:
            z.writestr(zipfile.ZipInfo(f"{folder}/{name}", date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def legacy(pkl, storages):
    """The legacy layout: magic, version, sys info, the pickle, the keys, the storages."""
    out = dumps(0x1950A86A20F9469CFC6C) + dumps(1001)
    out += dumps({"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}})
    out += pkl + dumps(sorted(storages))
    for key in sorted(storages):
        numel, data = storages[key]
        out += struct.pack("<q", numel) + data
    return out


def main():
    os.makedirs(PKL, exist_ok=True)
    os.makedirs(PTH, exist_ok=True)
    # ---- raw pickles (the VM alone)
    raw = {
        "os_system": b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.",
        "stack_global_eval": b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x011\x85R.",
        "reduce_str": b"\x80\x02X\x03\x00\x00\x00abc)R.",
        "reduce_storage_type": b"\x80\x02ctorch\nFloatStorage\n)R.",
        "memo_out_of_range": b"\x80\x02K\x01q\x00h\x05.",
        "stack_underflow": b"\x80\x02]K\x01(a.",
        "pop_mark_without_mark": b"\x80\x02K\x01e.",
        "huge_length": b"\x80\x02X\xff\xff\xff\xffab.",
        "huge_length8": b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7fab.",
        "frame_past_end": b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x01\x00N.",
        "deep_marks": b"\x80\x02" + b"(" * 100000 + b".",
        # (pickle_hostile_test.cpp builds a 100k-deep one in memory)
        "deep_lists": b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".",
        "cyclic_list": b"\x80\x02]q\x00h\x00a.",
        "no_stop": b"\x80\x02}q\x00(X\x01\x00\x00\x00aK\x01u",
        "unknown_opcode": b"\x80\x02\xff.",
        "ext_code": b"\x80\x02\x82\x01.",
        "build_on_list": b"\x80\x02]}b.",
        "codecs_rot13": b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.",
        "bad_protocol": b"\x80\x09N.",
        "negative_long4": b"\x80\x02\x8b\xff\xff\xff\xffN.",
        "big_text_int": b"L" + b"9" * 5000 + b"L\n.",
    }
    # a billion laughs: 40 levels of dicts that each hold the one below twice
    laughs = bytearray(b"\x80\x02")
    laughs += dumps(Tensor(Storage("0", 1), 0, [1], [1]))[2:-1] + b"q\x00"
    for i in range(40):
        laughs += b"}(X\x01\x00\x00\x00ah" + bytes([i]) + b"X\x01\x00\x00\x00bh" + bytes([i]) + b"uq" + bytes([i + 1])
    raw["billion_laughs"] = bytes(laughs) + b"."
    # tensors whose extent does not fit their storage
    raw["tensor_past_storage"] = dumps({"w": Tensor(Storage("0", 4), 0, [10], [1])})
    raw["tensor_offset_past_storage"] = dumps({"w": Tensor(Storage("0", 4), 3, [2], [1])})
    raw["tensor_extent_overflow"] = dumps({"w": Tensor(Storage("0", 4), 0, [2**31, 2], [2**40, 2**62])})
    raw["tensor_count_overflow"] = dumps({"w": Tensor(Storage("0", 4), 0, [2**40, 2**40], [0, 0])})
    raw["tensor_negative_size"] = dumps({"w": Tensor(Storage("0", 4), 0, [-1], [1])})
    raw["storage_two_dtypes"] = dumps([Tensor(Storage("0", 4), 0, [1], [1]),
                                       Tensor(Storage("0", 4, torch.LongStorage), 0, [1], [1])])
    for name, data in raw.items():
        write(PKL, f"hostile_{name}.pkl", data)

    # ---- whole checkpoints
    f32x4 = struct.pack("<4f", 1, 2, 3, 4)
    pth = {
        "missing_storage": checkpoint(dumps({"w": Tensor(Storage("0", 4), 0, [4], [1])}), {}),
        "short_storage": checkpoint(dumps({"w": Tensor(Storage("0", 4), 0, [4], [1])}), {"0": f32x4[:8]}),
        "tensor_past_storage": checkpoint(dumps({"w": Tensor(Storage("0", 4), 0, [2, 3], [3, 1])}), {"0": f32x4}),
        "os_system": checkpoint(raw["os_system"], {}),
        "expand_huge": checkpoint(dumps({"w": Tensor(Storage("0", 1), 0, [2**20, 2**20], [0, 0])}), {"0": f32x4[:4]}),
        "no_data_pkl": checkpoint(b"", {"0": f32x4}).replace(b"archive/data.pkl", b"archive/dat2.pkl"),
        "complex": checkpoint(dumps({"c": Tensor(Storage("0", 1, torch.ComplexFloatStorage), 0, [1], [1])}),
                              {"0": f32x4[:8]}),
        "legacy_truncated": legacy(dumps({"w": Tensor(Storage("0", 4), 0, [4], [1])}, legacy=True),
                                   {"0": (4, f32x4)})[:-5],
        "legacy_wrong_numel": legacy(dumps({"w": Tensor(Storage("0", 4), 0, [4], [1])}, legacy=True),
                                     {"0": (3, f32x4[:12])}),
        "legacy_missing_storage": legacy(dumps({"w": Tensor(Storage("0", 4), 0, [4], [1])}, legacy=True), {}),
        "legacy_bad_magic": dumps(12345) + dumps(1001),
        "legacy_view_outside": legacy(dumps({"w": Tensor(Storage("0", 4, view=("v", 2, 4)), 0, [1], [1])},
                                            legacy=True), {"0": (4, f32x4)}),
    }
    good = open(os.path.join(ROOT, "tests", "data", "pth", "module.pt"), "rb").read()
    pth["truncated_zip"] = good[: len(good) // 2]
    for name, data in pth.items():
        write(PTH, f"hostile_{name}.pt", data)
    # a legacy view that is fine (the reader's view path)
    write(PTH, "legacy_view.pt", legacy(dumps({"w": Tensor(Storage("0", 4, view=("v", 1, 2)), 1, [1], [1])},
                                              legacy=True), {"0": (4, f32x4)}))

    # seeds: the valid fixtures, and their pickles
    for p in glob.glob(os.path.join(ROOT, "tests", "data", "pth", "*.pt")):
        shutil.copy(p, os.path.join(PTH, "seed_" + os.path.basename(p)))
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
                write(PKL, "seed_" + os.path.basename(p)[:-3] + ".pkl", z.read(pkl))
    print(f"wrote {len(raw)} hostile pickles to {os.path.normpath(PKL)}, {len(pth)} checkpoints to "
          f"{os.path.normpath(PTH)}")


if __name__ == "__main__":
    main()
