#!/usr/bin/python3
"""Generates the small fixture files of tests/io (tests/data/) with NumPy.

Run from the repository root with Debian's python3-numpy:
    /usr/bin/python3 tools/gen_io_fixtures.py
The files are committed; the C++ tests compare against the values written out here.
"""
import json
import os
import struct
import zipfile

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


def path(name):
    return os.path.join(OUT, name)


def main():
    os.makedirs(OUT, exist_ok=True)

    # candle-core/tests/test.npy and test.npz (serialization_tests.rs) hold these values.
    np.save(path("test.npy"), np.arange(10, dtype=np.int64))
    np.savez(path("test.npz"), x=np.arange(10, dtype=np.int64), x_plus_one=np.arange(10, dtype=np.int64) + 1)

    # One C-order file per dtype we write, to compare npy_bytes() byte for byte.
    base = np.array([[0, 1, 2], [3, 4, 5]])
    for descr in ["|u1", "<u4", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8"]:
        np.save(path("c_%s.npy" % descr[1:]), base.astype(np.dtype(descr)))
    np.save(path("c_scalar_f64.npy"), np.array(2.5))  # 0-d
    np.save(path("c_empty_f32.npy"), np.zeros((0, 3), dtype=np.float32))

    # Reading only: Fortran order, big-endian, bool, int8, uint16, versions 2.0 / 3.0.
    np.save(path("fortran_f32.npy"), np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)))
    np.save(path("fortran_i16.npy"), np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)))
    np.save(path("be_f32.npy"), np.array([1.5, -2.0, 3.25], dtype=">f4"))
    np.save(path("be_i64.npy"), np.array([[1, -2], [300000000000, 4]], dtype=">i8"))
    np.save(path("be_f16.npy"), np.array([0.5, -1.0], dtype=">f2"))
    np.save(path("be_u2.npy"), np.array([1, 65535], dtype=">u2"))
    np.save(path("bool.npy"), np.array([True, False, True, True]))
    np.save(path("i1.npy"), np.array([-128, -1, 0, 127], dtype=np.int8))
    np.save(path("u2.npy"), np.array([0, 1, 65535], dtype=np.uint16))
    np.save(path("unsupported_u8.npy"), np.array([1, 2], dtype=np.uint64))
    np.save(path("unsupported_c8.npy"), np.array([1 + 2j], dtype=np.complex64))
    for version in [(2, 0), (3, 0)]:
        with open(path("v%d_f32.npy" % version[0]), "wb") as f:
            np.lib.format.write_array(f, np.array([1.0, 2.0], dtype=np.float32), version=version)

    # npz: stored (numpy.savez, ZIP64 local headers) and deflate (savez_compressed).
    np.savez(path("stored.npz"), a=np.arange(6, dtype=np.float32).reshape(2, 3), b=np.array([7, 8], dtype=np.int32))
    np.savez_compressed(path("compressed.npz"), a=np.arange(100, dtype=np.float64).reshape(10, 10),
                        flags=np.array([True, False]), f=np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)))

    # safetensors written by hand (no safetensors package needed): the dtypes candle-cpp
    # widens or renames, with metadata.
    tensors = [
        ("b", "BOOL", [3], np.array([1, 0, 1], dtype=np.uint8).tobytes()),
        ("i8", "I8", [2, 2], np.array([[-128, -1], [0, 127]], dtype=np.int8).tobytes()),
        ("u16", "U16", [3], np.array([0, 1, 65535], dtype="<u2").tobytes()),
        ("bf", "BF16", [2], (np.array([1.0, -2.5], dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()),
        ("w", "F32", [2, 3], np.arange(6, dtype="<f4").tobytes()),
    ]
    header = {"__metadata__": {"format": "pt", "note": "fixture"}}
    data = b""
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path("mixed.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)

    # Check what was written reads back as intended.
    z = np.load(path("compressed.npz"))
    assert z["a"][3, 4] == 34.0 and z["f"][1, 2] == 5
    with zipfile.ZipFile(path("compressed.npz")) as zf:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    with zipfile.ZipFile(path("stored.npz")) as zf:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


if __name__ == "__main__":
    main()
