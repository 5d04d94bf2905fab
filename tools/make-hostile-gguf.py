#!/usr/bin/env python3
"""The GGUF and legacy GGML fuzz corpora: small valid seeds and hostile files, each breaking one
rule of the format, that candle::quantized must refuse with a clear error.

  python3 tools/make-hostile-gguf.py            writes tests/fuzz/corpus/gguf/ and tests/fuzz/corpus/ggml/
  python3 tools/make-hostile-gguf.py --ggml-check   also prints what llama.cpp's reader says of each GGUF file

tests/quantized/gguf_test.cpp replays every hostile-*.gguf here and asserts the message names the
problem (its table lists the file names below); the valid-*.gguf seeds must load. The bytes are
written by hand from the GGUF specification (little-endian; v1 has 32-bit counts and lengths).
"""
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF_DIR = os.path.join(ROOT, "tests/fuzz/corpus/gguf")
GGML_DIR = os.path.join(ROOT, "tests/fuzz/corpus/ggml")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
              U64: "<Q", I64: "<q", F64: "<d"}


class W:
    """A GGUF writer of raw fields, for any version (v1: 32-bit counts, lengths and dims)."""

    def __init__(self, version=3):
        self.v = version
        self.b = bytearray()

    def raw(self, data):
        self.b += data
        return self

    def u32(self, x):
        return self.raw(struct.pack("<I", x))

    def u64(self, x):
        return self.raw(struct.pack("<Q", x))

    def count(self, x):  # a count or length: u32 in v1, u64 after
        return self.u32(x) if self.v == 1 else self.u64(x)

    def string(self, s, length=None):
        if isinstance(s, str):
            s = s.encode()
        self.count(len(s) if length is None else length)
        return self.raw(s)

    def header(self, n_tensors, n_kv, magic=b"GGUF"):
        self.raw(magic).u32(self.v)
        return self.count(n_tensors).count(n_kv)

    def value(self, t, v):
        if t == STR:
            return self.string(v)
        if t == ARR:
            et, items = v
            self.u32(et).count(len(items))
            for x in items:
                self.value(et, x)
            return self
        return self.raw(struct.pack(SCALAR_FMT[t], v))

    def kv(self, key, t, v):
        self.string(key).u32(t)
        return self.value(t, v)

    def tensor(self, name, ne, ggml_type, offset):
        self.string(name).u32(len(ne))
        for d in ne:
            self.count(d)
        return self.u32(ggml_type).u64(offset)

    def align(self, a=32):
        self.b += b"\0" * ((-len(self.b)) % a)
        return self

    def bytes(self):
        return bytes(self.b)


def f32_data(n, start=0.0):
    return struct.pack("<%df" % n, *[start + 0.25 * i for i in range(n)])


def valid(version, with_alignment=None):
    w = W(version)
    kvs = [("general.architecture", STR, "llama"), ("general.name", STR, "tiny"),
           ("test.u32", U32, 7), ("test.f32", F32, 0.5), ("test.bool", BOOL, 1),
           ("test.strings", ARR, (STR, ["a", "bc", ""])), ("test.nested", ARR, (ARR, [(I32, [1, 2]), (I32, [])]))]
    if with_alignment:
        kvs.append(("general.alignment", U32, with_alignment))
    align = with_alignment or 32
    w.header(2, len(kvs))
    for k in kvs:
        w.kv(*k)
    w.tensor("w", [4, 2], 0, 0)           # f32, candle shape (2, 4): 32 bytes
    w.tensor("b", [4], 0, max(32, align))  # f32 (4)
    w.align(align)
    w.raw(f32_data(8)).align(align).raw(f32_data(4, 10.0))
    return w.bytes()


def one_tensor(ne, ggml_type=0, offset=0, data=b"", name="t", version=3, kvs=()):
    w = W(version).header(1, len(kvs))
    for k in kvs:
        w.kv(*k)
    w.tensor(name, ne, ggml_type, offset).align()
    return w.raw(data).bytes()


def hostile():
    H = {}
    H["truncated-header"] = b"GGUF\x03\x00"
    H["bad-magic"] = W().header(0, 0, magic=b"GGXF").bytes()
    H["version-0"] = W(0).header(0, 0).bytes()
    H["version-4"] = W(4).header(0, 0).bytes()
    H["big-endian"] = b"GGUF" + struct.pack(">I", 3) + b"\0" * 16
    H["tensor-count-2p63"] = W().header(1 << 63, 0).bytes()
    H["kv-count-2p63"] = W().header(0, 1 << 63).bytes()
    H["v1-kv-count-huge"] = W(1).header(0, 0xFFFFFFFF).bytes()
    H["key-length-past-end"] = W().header(0, 1).string(b"general", length=1 << 40).bytes()
    H["string-length-past-end"] = W().header(0, 1).string("k").u32(STR).string(b"abc", length=1000).bytes()
    H["array-length-past-end"] = W().header(0, 1).string("k").u32(ARR).u32(U32).u64(1 << 62).u32(1).bytes()
    H["string-array-length-past-end"] = W().header(0, 1).string("k").u32(ARR).u32(STR).u64(1 << 40).bytes()
    w = W().header(0, 1).string("k").u32(ARR)
    for _ in range(100):
        w.u32(ARR).u64(1)
    H["nested-arrays-100-deep"] = w.u32(U8).u64(0).bytes()
    H["alignment-0"] = one_tensor([8], kvs=[("general.alignment", U32, 0)], data=f32_data(8))
    H["alignment-3"] = one_tensor([8], kvs=[("general.alignment", U32, 3)], data=f32_data(8))
    H["alignment-string"] = one_tensor([8], kvs=[("general.alignment", STR, "32")], data=f32_data(8))
    H["alignment-u64"] = one_tensor([8], kvs=[("general.alignment", U64, 32)], data=f32_data(8))
    H["dims-product-overflow"] = one_tensor([1 << 32, 1 << 32, 2])
    H["dim-over-int64"] = one_tensor([1 << 63])
    H["bytes-overflow"] = one_tensor([1 << 61, 2])
    H["n-dims-5"] = one_tensor([1, 1, 1, 1, 1], data=f32_data(1))
    H["offset-past-eof"] = one_tensor([8], offset=1 << 20, data=f32_data(8))
    H["data-past-eof"] = one_tensor([64], data=f32_data(8))
    w = W().header(2, 0).tensor("a", [8], 0, 0).tensor("b", [8], 0, 0).align()
    H["overlapping-tensors"] = w.raw(f32_data(8)).bytes()
    H["offset-not-aligned"] = one_tensor([8], offset=4, data=f32_data(9))
    H["type-unknown-99"] = one_tensor([32], ggml_type=99, data=b"\0" * 64)
    H["type-iq2_xxs"] = one_tensor([256], ggml_type=16, data=b"\0" * 66)
    H["type-removed-4"] = one_tensor([32], ggml_type=4, data=b"\0" * 64)
    H["row-not-whole-blocks"] = one_tensor([33, 2], ggml_type=2, data=b"\0" * 64)
    w = W().header(2, 0).tensor("a", [8], 0, 0).tensor("a", [8], 0, 32).align()
    H["duplicate-tensor"] = w.raw(f32_data(16)).bytes()
    H["duplicate-key"] = W().header(0, 2).kv("k", U32, 1).kv("k", U32, 2).bytes()
    H["key-invalid-utf8"] = W().header(0, 1).kv(b"k\xff\xfe", U32, 1).bytes()
    H["key-empty"] = W().header(0, 1).kv(b"", U32, 1).bytes()
    H["tensor-name-invalid-utf8"] = one_tensor([8], name=b"t\xc0\x80", data=f32_data(8))
    H["value-type-13"] = W().header(0, 1).string("k").u32(13).u32(0).bytes()
    H["array-type-13"] = W().header(0, 1).string("k").u32(ARR).u32(13).u64(1).u32(0).bytes()
    H["truncated-kv"] = W().header(0, 1).string("k").u32(U64).raw(b"\1\2").bytes()
    H["truncated-tensor-info"] = W().header(1, 0).string("tensor_name_long").u32(2).u64(4).bytes()
    H["kv-count-plausible-but-truncated"] = W().header(0, 3).kv("a" * 40, U8, 1).bytes()
    H["v1-dims-product-overflow"] = one_tensor([0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF], version=1)
    return H


def legacy_ggml_seeds():
    """Small legacy GGML / GGJT files (llama hparams, vocab, tensors)."""
    def build(magic, version, align):
        b = bytearray(magic[::-1])  # the magic is a little-endian u32: 'ggjt' is stored "tjgg"
        if version is not None:
            b += struct.pack("<I", version)
        n_vocab = 3
        b += struct.pack("<7I", n_vocab, 8, 256, 2, 1, 4, 0)
        for i, tok in enumerate([b"<unk>", b"a", b"bc"]):
            b += struct.pack("<I", len(tok)) + tok
            if version is not None:
                b += struct.pack("<f", -float(i))
        for name, ne in [(b"tok_embeddings.weight", [8, 3]), (b"norm.weight", [8])]:
            b += struct.pack("<3I", len(ne), len(name), 0) + struct.pack("<%dI" % len(ne), *ne) + name
            if align:
                b += b"\0" * ((-len(b)) % 32)
            n = 1
            for d in ne:
                n *= d
            b += f32_data(n)
        return bytes(b)

    return {"valid-ggml": build(b"ggml", None, False), "valid-ggmf-v1": build(b"ggmf", 1, False),
            "valid-ggjt-v1": build(b"ggjt", 1, True), "valid-ggjt-v3": build(b"ggjt", 3, True)}


def main():
    os.makedirs(GGUF_DIR, exist_ok=True)
    os.makedirs(GGML_DIR, exist_ok=True)
    files = {"valid-v1": valid(1), "valid-v2": valid(2), "valid-v3": valid(3), "valid-v3-align64": valid(3, 64)}
    # accepted as llama.cpp accepts them: a dim of 0 (an empty tensor), an empty tensor name,
    # a bool byte other than 0 or 1 (true), a tensor of 0 dims (shape (1))
    files["valid-dim-0"] = one_tensor([4, 0])
    files["valid-tensor-name-empty"] = one_tensor([8], name="", data=f32_data(8))
    files["valid-n-dims-0"] = one_tensor([], data=f32_data(1))
    files["valid-bool-2"] = W().header(0, 1).kv("k", BOOL, 2).bytes()
    for k, v in hostile().items():
        files["hostile-" + k] = v
    # the file written by llama.cpp's writer (tools/gguf_interop.py write) is a seed too
    fixture = os.path.join(ROOT, "tests/data/quantized/ggml_written.gguf")
    if os.path.exists(fixture):
        with open(fixture, "rb") as f:
            files["valid-ggml-written"] = f.read()
    paths = []
    for name, data in files.items():
        p = os.path.join(GGUF_DIR, name + ".gguf")
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    for name, data in legacy_ggml_seeds().items():
        with open(os.path.join(GGML_DIR, name + ".bin"), "wb") as f:
            f.write(data)
    print("wrote %d GGUF files to %s and %d GGML files to %s" % (
        len(files), GGUF_DIR, len(legacy_ggml_seeds()), GGML_DIR))
    if "--ggml-check" in sys.argv:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/gguf_interop.py"), "accepts"] + paths,
                       stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
