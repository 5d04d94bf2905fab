#!/usr/bin/env python3
"""Writes a Fashion-MNIST folder whose training set is the given folder's t10k set repeated N times.

On the GPU machine only the 10,000-image t10k files fit the transfer; six copies make an epoch of
60,000 images, the full training set's size (the same work per epoch; the images repeat).
  python3 tools/make_fmnist_repeated.py SRC_DIR DST_DIR [--times 6]
"""
import argparse
import gzip
import os
import shutil
import struct

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("dst")
ap.add_argument("--times", type=int, default=6)
a = ap.parse_args()
os.makedirs(a.dst, exist_ok=True)
for kind, header in (("images-idx3", 16), ("labels-idx1", 8)):
    raw = gzip.open(os.path.join(a.src, f"t10k-{kind}-ubyte.gz")).read()
    head, body = bytearray(raw[:header]), raw[header:]
    count = struct.unpack(">I", head[4:8])[0]
    head[4:8] = struct.pack(">I", count * a.times)
    with gzip.open(os.path.join(a.dst, f"train-{kind}-ubyte.gz"), "wb", compresslevel=1) as f:
        f.write(bytes(head) + body * a.times)
    shutil.copy(os.path.join(a.src, f"t10k-{kind}-ubyte.gz"), a.dst)
print(f"{a.dst}: {a.times} x t10k as the training set")
