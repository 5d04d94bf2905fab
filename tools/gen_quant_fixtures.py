#!/usr/bin/python3
"""Writes the GGML codec fixtures of tests/quantized (tests/data/quantized/) from llama.cpp's own
library, and checks candle-cpp's codec against it on many random inputs (--check).

llama.cpp's prebuilt libggml-base.so (ggml v0.5.0, from node-llama-cpp 3.22.1; tools/install-deps.sh
puts it under tools/peers) is loaded through ctypes; no headers are needed.

    /usr/bin/python3 tools/gen_quant_fixtures.py              # (re)write the fixtures
    /usr/bin/python3 tools/gen_quant_fixtures.py --check [--lib build-release/lib/libcandle_core.so]
                                                              # randomized comparison, not in CI

Fixture format, little endian. One file <type name>.bin per GgmlDType (ggml's name: q4_0.bin, q4_K.bin, ...):
    char[4]  magic "CQF1"
    u32      ggml type id
    u32      nrows, u32 n_per_row
    u32      flags: 1 = has the importance-matrix form, 2 = has to_float values (Q8_1 has none in ggml)
    f32      src[nrows * n_per_row]    the input rows (kRowKinds below, one kind per row)
    f32      imatrix[n_per_row]        the importance weights (same for every row)
    u8       q[nrows * row_bytes]      ggml_quantize_chunk(type, src, q, 0, nrows, n_per_row, NULL)
                                       (Q8_1, Q8_K: the type's reference from_float; buffers start zeroed)
    f32      dq[nrows * n_per_row]     ggml's to_float of q                      (if flags & 2)
    u8       qi[nrows * row_bytes]     the same with imatrix                     (if flags & 1)
    f32      dqi[nrows * n_per_row]    ggml's to_float of qi                     (if flags & 1 and flags & 2)
And float_conversions.bin, the f16 / bf16 conversions on edge cases:
    char[4]  magic "CQC1"
    u32      n;  f32 x[n];  u16 f16[n];  u16 bf16[n]    ggml_quantize_chunk(F16 / BF16, x)
    u32      m;  u16 h[m];  f32 from_f16[m];  f32 from_bf16[m]    ggml's to_float of the bit patterns h
"""
import argparse
import ctypes
import os
import struct
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "quantized")
GGML = os.path.join(ROOT, "tools", "peers", "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64",
                    "libggml-base.so")

# (name, ggml id, block size, block bytes)
TYPES = [
    ("f32", 0, 1, 4), ("f16", 1, 1, 2), ("q4_0", 2, 32, 18), ("q4_1", 3, 32, 20), ("q5_0", 6, 32, 22),
    ("q5_1", 7, 32, 24), ("q8_0", 8, 32, 34), ("q8_1", 9, 32, 36), ("q2_K", 10, 256, 84), ("q3_K", 11, 256, 110),
    ("q4_K", 12, 256, 144), ("q5_K", 13, 256, 176), ("q6_K", 14, 256, 210), ("q8_K", 15, 256, 292),
    ("iq4_nl", 20, 32, 18), ("iq4_xs", 23, 256, 136), ("bf16", 30, 1, 2),
]
Q8_1, Q8_K = 9, 15

ROWS_FIXTURE = 7
N_FIXTURE = 256


class TypeTraits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p), ("from_float_ref", ctypes.c_void_p)]


ROW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class Ggml:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self.lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
        self.lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        for name in ("quantize_row_q8_K_ref", "dequantize_row_q8_K", "ggml_fp16_to_fp32_row", "ggml_bf16_to_fp32_row"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            getattr(self.lib, name).restype = None

    def quantize(self, tid, x, nrows, n, imatrix, nbytes):
        out = np.zeros(nbytes, dtype=np.uint8)
        x = np.ascontiguousarray(x, dtype=np.float32)
        if tid == Q8_K:
            self.lib.quantize_row_q8_K_ref(x.ctypes.data, out.ctypes.data, nrows * n)
        elif tid == Q8_1:
            tt = self.lib.ggml_get_type_traits(tid).contents
            ROW_FN(tt.from_float_ref)(x.ctypes.data, out.ctypes.data, nrows * n)
        else:
            im = None if imatrix is None else np.ascontiguousarray(imatrix, dtype=np.float32)
            self.lib.ggml_quantize_chunk(tid, x.ctypes.data, out.ctypes.data, 0, nrows, n,
                                         None if im is None else im.ctypes.data)
        return out

    def has_to_float(self, tid):
        return tid in (0, Q8_K) or bool(self.lib.ggml_get_type_traits(tid).contents.to_float)

    def to_float(self, tid, q, count):
        out = np.zeros(count, dtype=np.float32)
        if tid == 0:
            return q.view(np.float32).copy()
        if tid == Q8_K:
            self.lib.dequantize_row_q8_K(q.ctypes.data, out.ctypes.data, count)
        else:
            ROW_FN(self.lib.ggml_get_type_traits(tid).contents.to_float)(q.ctypes.data, out.ctypes.data, count)
        return out


def make_rows(rng, nrows, n):
    """One row of each kind (cycling): normal, outliers + zero blocks, constant, tiny, negative-only,
    mixed magnitudes with exact ties, and (from the seventh row on) more normal rows at other scales."""
    rows = []
    for r in range(nrows):
        kind = r % 7
        x = rng.standard_normal(n).astype(np.float32)
        if kind == 1:
            x[::37] *= 40.0
            x[32:64] = 0.0
            x[100] = -250.0
        elif kind == 2:
            x[:] = 0.75
        elif kind == 3:
            x *= 1e-6  # f16 scales in the subnormal range
            x[:32] *= 1e-12  # a group below ggml's 1e-15 threshold
            x[32:64] = 0.0
        elif kind == 4:
            x = -np.abs(x) * 3.0 - 0.01
        elif kind == 5:
            x = np.round(x * 4.0) / 4.0  # ties on the quantization grid
            x[::64] *= 1000.0
            x[1::3] *= 0.001
        elif kind == 6:
            x = x * np.float32(rng.uniform(0.01, 100.0))
        rows.append(x.astype(np.float32))
    return np.stack(rows)


def make_imatrix(rng, n):
    w = (np.abs(rng.standard_normal(n)) + 0.05).astype(np.float32)
    w[::17] = 0.0  # some columns without importance
    w[5] = 50.0
    return w


def type_case(ggml, t, x, im):
    name, tid, block, bbytes = t
    nrows, n = x.shape
    nbytes = nrows * n // block * bbytes
    q = ggml.quantize(tid, x, nrows, n, None, nbytes)
    has_im = tid not in (Q8_1, Q8_K)
    has_dq = ggml.has_to_float(tid)
    qi = ggml.quantize(tid, x, nrows, n, im, nbytes) if has_im else None
    dq = ggml.to_float(tid, q, nrows * n) if has_dq else None
    dqi = ggml.to_float(tid, qi, nrows * n) if has_dq and has_im else None
    return q, dq, qi, dqi, has_im, has_dq


def write_fixtures(ggml):
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240614)
    x = make_rows(rng, ROWS_FIXTURE, N_FIXTURE)
    im = make_imatrix(rng, N_FIXTURE)
    total = 0
    for t in TYPES:
        name, tid, _, _ = t
        q, dq, qi, dqi, has_im, has_dq = type_case(ggml, t, x, im)
        flags = (1 if has_im else 0) | (2 if has_dq else 0)
        parts = [b"CQF1", struct.pack("<IIII", tid, x.shape[0], x.shape[1], flags), x.tobytes(), im.tobytes(),
                 q.tobytes()]
        if has_dq:
            parts.append(dq.tobytes())
        if has_im:
            parts.append(qi.tobytes())
            if has_dq:
                parts.append(dqi.tobytes())
        data = b"".join(parts)
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data)
        total += len(data)
    total += write_float_conversions(ggml, rng)
    print(f"wrote {len(TYPES) + 1} fixtures, {total} bytes, to {os.path.relpath(OUT, ROOT)}")


def f32_from_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def write_float_conversions(ggml, rng):
    edge_bits = [
        0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000,  # 0, 1, inf
        0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fa00000,  # quiet / signalling NaNs
        0x477fe000, 0x477fefff, 0x477ff000, 0x477fffff, 0x47800000,  # f16 max 65504 and overflow
        0x38800000, 0x387fffff, 0x33800000, 0x33000000, 0x33000001, 0x33c00000, 0x32ffffff,  # f16 subnormals
        0x3f801000, 0x3f803000, 0x3f801001, 0x3f802fff,  # f16 round-half-even around 1
        0x3f808000, 0x3f818000, 0x3f808001, 0x3f817fff,  # bf16 round-half-even around 1
        0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x00800000,  # f32 max, subnormals
    ]
    rand_bits = rng.integers(0, 2**32, size=1500, dtype=np.uint64).astype(np.uint32)
    # random values in the f16 range, and near its rounding boundaries
    near = (rng.integers(0x33000000, 0x47800000, size=500, dtype=np.uint64).astype(np.uint32) & ~np.uint32(0xfff)) \
        | np.uint32(0x1000)
    x = np.concatenate([f32_from_bits(edge_bits), rand_bits.view(np.float32), near.view(np.float32),
                        rng.standard_normal(500).astype(np.float32)])
    n = len(x)
    h16 = ggml.quantize(1, x, 1, n, None, 2 * n).view(np.uint16)
    hb16 = ggml.quantize(30, x, 1, n, None, 2 * n).view(np.uint16)
    patterns = np.concatenate([np.arange(0, 65536, 29, dtype=np.uint16),
                               np.array([0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0x7c01, 0x7dff, 0x7e00, 0x7fff, 0x8001,
                                         0xfc00, 0xfc01, 0xfe00, 0xffff, 0xff80, 0x7f80, 0x7f81, 0x0080, 0x007f],
                                        dtype=np.uint16)])
    m = len(patterns)
    from_f16 = np.zeros(m, dtype=np.float32)
    from_bf16 = np.zeros(m, dtype=np.float32)
    ggml.lib.ggml_fp16_to_fp32_row(patterns.ctypes.data, from_f16.ctypes.data, m)
    ggml.lib.ggml_bf16_to_fp32_row(patterns.ctypes.data, from_bf16.ctypes.data, m)
    data = b"".join([b"CQC1", struct.pack("<I", n), x.tobytes(), h16.tobytes(), hb16.tobytes(), struct.pack("<I", m),
                     patterns.tobytes(), from_f16.tobytes(), from_bf16.tobytes()])
    with open(os.path.join(OUT, "float_conversions.bin"), "wb") as f:
        f.write(data)
    return len(data)


def check(ggml, lib_path, iters):
    """Compares candle's quantize_rows / dequantize_rows (through their C++ symbols) with ggml."""
    lib = ctypes.CDLL(lib_path)
    quantize_rows = lib["_ZN6candle9quantized13quantize_rowsENS0_9GgmlDTypeEPKfPvmmS3_"]
    quantize_rows.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                              ctypes.c_void_p]
    dequantize_rows = lib["_ZN6candle9quantized15dequantize_rowsENS0_9GgmlDTypeEPKvPfmm"]
    dequantize_rows.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    rng = np.random.default_rng(7)
    bad = 0
    cases = 0
    for it in range(iters):
        nrows = int(rng.integers(1, 5))
        n = 256 * int(rng.integers(1, 9))
        x = make_rows(rng, nrows + it % 7, n)[it % 7:]
        x *= np.float32(10.0 ** rng.uniform(-4, 4))
        im = make_imatrix(rng, n)
        for t in TYPES:
            name, tid, block, bbytes = t
            q, dq, qi, dqi, has_im, has_dq = type_case(ggml, t, x, im)
            for ours_im, ref_q, ref_dq in ((None, q, dq), (im if has_im else None, qi, dqi)):
                if ref_q is None:
                    continue
                ours = np.zeros_like(ref_q)
                quantize_rows(tid, x.ctypes.data, ours.ctypes.data, nrows, n,
                              None if ours_im is None else ours_im.ctypes.data)
                cases += 1
                if not np.array_equal(ours, ref_q):
                    bad += 1
                    print(f"MISMATCH quantize {name} imatrix={ours_im is not None} iter {it}", file=sys.stderr)
                if ref_dq is not None:
                    got = np.zeros(nrows * n, dtype=np.float32)
                    dequantize_rows(tid, ref_q.ctypes.data, got.ctypes.data, nrows, n)
                    cases += 1
                    if not np.array_equal(got.view(np.uint32), ref_dq.view(np.uint32)):
                        bad += 1
                        print(f"MISMATCH dequantize {name} iter {it}", file=sys.stderr)
    print(f"--check: {cases} comparisons, {bad} mismatches")
    return bad == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare candle's codec with ggml on random inputs")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build-release", "lib", "libcandle_core.so"))
    ap.add_argument("--iters", type=int, default=40)
    args = ap.parse_args()
    ggml = Ggml(GGML)
    if args.check:
        sys.exit(0 if check(ggml, args.lib, args.iters) else 1)
    write_fixtures(ggml)


if __name__ == "__main__":
    main()
