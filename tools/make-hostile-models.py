#!/usr/bin/env python3
"""Writes crafted (hostile) model and checkpoint files into a directory.

Every file must make candle-cpp's loaders throw a clear candle::Error: never crash, hang or
allocate much. The GoogleTest cases (tests/io/hostile_test.cpp, tests/models/hostile_test.cpp)
run this script into a temporary directory; with --fuzz-corpus DIR it also writes each file
in the input format of its fuzzer to DIR/<fuzzer>/hostile-<name> (tests/fuzz/corpus holds
them). Python 3 standard library only.

  tools/make-hostile-models.py OUT_DIR [--fuzz-corpus tests/fuzz/corpus]

What it writes (OUT_DIR/...):
  deep_header.safetensors     a header nesting 75,000 levels deep (stack overflow in dump())
  offsets_past_eof.safetensors  data_offsets past the end of the file
  overlapping.safetensors     two tensors sharing bytes
  dims_overflow.safetensors   a shape whose element count overflows u64
  deep_format/model.json      "format" nesting 80,000 deep
  dup_shards/model.json       one shard listed 2,000 times (+ its shard)
  x64_upsample.safetensors    a converted model with a x64 upsample fused into a conv
  pad_2p63.safetensors        a conv padding of 2^63 (2p + 1 wraps to 1)
  huge_shape.npy              a shape of 2^40 x 2^40 elements, no data
  huge_shape_fits.npy         a shape of 2^31 x 2^31 (count fits, data missing)
  bomb.npz                    a member that inflates past its declared size
  bomb_declared.npz           a member that declares 4 GiB (ZIP64) from a few deflate bytes
  overlap.npz                 300 central-directory entries sharing one member's bytes
"""
import json
import os
import struct
import sys
import zlib


def safetensors_bytes(header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def raw_safetensors(header_text, data=b""):
    h = header_text.encode()
    return struct.pack("<Q", len(h)) + h + data


def f32_tensor_entries(tensors):
    """{name: (shape, values)} -> (header dict, data bytes), f32."""
    header, data = {}, b""
    for name, (shape, value) in sorted(tensors.items()):
        n = 1
        for d in shape:
            n *= d
        b = struct.pack("<%df" % n, *([value] * n))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    return header, data


def converted_model(layers, tensors, scale):
    header, data = f32_tensor_entries(tensors)
    topo = {"format": "candle-graph", "version": 1, "input": "in", "output": layers[-1]["name"],
            "scale": scale, "layers": layers}
    header["__metadata__"] = {"topology": json.dumps(topo), "scale": str(scale)}
    return safetensors_bytes(header, data)


def conv(name, inp, ci, co, k, pad):
    return {"name": name, "op": "conv2d", "inputs": [inp], "in_channels": ci, "out_channels": co,
            "kernel": k, "padding": pad, "bias": True, "activation": "relu"}


def npy_bytes(header_dict_text, data=b""):
    h = header_dict_text
    total = 10 + len(h) + 1
    h = h + " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data


def small_npy():
    return npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", struct.pack("<2f", 1, 2))


def zip_local(name, method, crc, csize, size):
    n = name.encode()
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, csize, size, len(n), 0) + n


def zip_central(name, method, crc, csize, size, offset, extra=b""):
    n = name.encode()
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, csize, size,
                       len(n), len(extra), 0, 0, 0, 0, offset) + n + extra


def zip_end(count, cd_size, cd_offset):
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, cd_size, cd_offset, 0)


def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def bomb_npz():
    # a real .npy member, its central entry declaring 1,000 bytes; it inflates to 32 MiB
    payload = small_npy() + b"\0" * (32 << 20)
    comp = deflate(payload)
    crc = zlib.crc32(payload[:1000])
    local = zip_local("a.npy", 8, crc, len(comp), 1000)
    central = zip_central("a.npy", 8, crc, len(comp), 1000, 0)
    body = local + comp
    return body + central + zip_end(1, len(central), len(body))


def bomb_declared_npz():
    comp = deflate(b"\0" * 1024)[:1024] or b"\x03\x00"
    extra = struct.pack("<HHQQ", 1, 16, 4 << 30, len(comp))  # ZIP64: size, compressed size
    local = zip_local("a.npy", 8, 0, 0xFFFFFFFF, 0xFFFFFFFF)
    central = zip_central("a.npy", 8, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, extra)
    body = local + comp
    return body + central + zip_end(1, len(central), len(body))


def overlap_npz():
    # one 1 MiB-of-zeros member (about 1 KiB deflated) and 300 entries reading its bytes: the
    # overlapping-member bomb (300 MiB from 1 KiB) without the overlap check
    member = npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (1048576,), }", b"\0" * (1 << 20))
    comp = deflate(member)
    crc = zlib.crc32(member)
    local = zip_local("a.npy", 8, crc, len(comp), len(member))
    body = local + comp
    central = b"".join(zip_central("m%03d.npy" % i, 8, crc, len(comp), len(member), 0) for i in range(300))
    return body + central + zip_end(300, len(central), len(body))


def tfjs_model_json(manifest, fmt="layers-model"):
    topo = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Conv2D", "config": {"name": "c", "filters": 1, "kernel_size": [1, 1], "padding": "valid",
                                            "use_bias": False, "batch_input_shape": [None, None, None, 1]}}]}}
    return {"format": fmt, "modelTopology": topo, "weightsManifest": manifest}


def fuzz_tfjs_input(model_json_text, shards):
    out = model_json_text.encode() + b"\0"
    for name, data in shards.items():
        out += name.encode() + b"\n" + struct.pack("<I", len(data)) + data
    return out


def main():
    args = sys.argv[1:]
    corpus = None
    if "--fuzz-corpus" in args:
        i = args.index("--fuzz-corpus")
        corpus = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    os.makedirs(out, exist_ok=True)
    files = {}  # relative path -> (bytes, fuzzer or None)

    # ---- safetensors
    depth = 75000
    files["deep_header.safetensors"] = (raw_safetensors('{"a":' + "[" * depth + "]" * depth + "}"), "safetensors")
    files["offsets_past_eof.safetensors"] = (safetensors_bytes(
        {"a": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}}, b"\0" * 16), "safetensors")
    files["overlapping.safetensors"] = (safetensors_bytes(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 24), "safetensors")
    files["dims_overflow.safetensors"] = (safetensors_bytes(
        {"a": {"dtype": "F32", "shape": [1 << 32, 1 << 32, 16], "data_offsets": [0, 0]}}), "safetensors")

    # ---- TF.js model.json
    deep = 80000
    deep_text = ('{"format": ' + "[" * deep + "]" * deep +
                 ', "modelTopology": {}, "weightsManifest": []}')
    files["deep_format/model.json"] = (deep_text.encode(), None)
    shard = b"\0" * 4096
    dup = tfjs_model_json([{"paths": ["group1-shard1of1.bin"] * 2000,
                            "weights": [{"name": "c/kernel", "shape": [1, 1, 1, 1], "dtype": "float32"}]}])
    dup_text = json.dumps(dup)
    files["dup_shards/model.json"] = (dup_text.encode(), None)
    files["dup_shards/group1-shard1of1.bin"] = (shard, None)
    if corpus:
        files["@tfjs_model/hostile-deep_format"] = (fuzz_tfjs_input(deep_text, {}), "tfjs_model")
        files["@tfjs_model/hostile-dup_shards"] = (fuzz_tfjs_input(dup_text, {"group1-shard1of1.bin": shard[:64]}),
                                                  "tfjs_model")

    # ---- converted models (Rdn)
    c = 32  # 150 KB of weights: conv 3->32 3x3, conv 32->32 3x3 x4, SR conv 32->3 3x3 after a x64 upsample
    layers = [{"name": "in", "op": "input", "inputs": [], "channels": 3}, conv("c0", "in", 3, c, [3, 3], [1, 1])]
    tensors = {"c0.weight": ([c, 3, 3, 3], 0.01), "c0.bias": ([c], 0.0)}
    prev = "c0"
    for i in range(1, 5):
        layers.append(conv("c%d" % i, prev, c, c, [3, 3], [1, 1]))
        tensors["c%d.weight" % i] = ([c, c, 3, 3], 0.01)
        tensors["c%d.bias" % i] = ([c], 0.0)
        prev = "c%d" % i
    layers.append({"name": "up", "op": "upsample_nearest", "inputs": [prev], "size": [64, 64]})
    layers.append(conv("SR", "up", c, 3, [3, 3], [1, 1]))
    tensors["SR.weight"] = ([3, c, 3, 3], 0.01)
    tensors["SR.bias"] = ([3], 0.0)
    files["x64_upsample.safetensors"] = (converted_model(layers, tensors, 64), "safetensors")
    layers = [{"name": "in", "op": "input", "inputs": [], "channels": 3},
              {"name": "up", "op": "upsample_nearest", "inputs": ["in"], "size": [2, 2]},
              conv("c", "up", 3, 3, [1, 1], [1 << 63, 0])]
    files["pad_2p63.safetensors"] = (converted_model(layers, {"c.weight": ([3, 3, 1, 1], 0.5),
                                                               "c.bias": ([3], 0.0)}, 2), "safetensors")

    # ---- npy / npz
    files["huge_shape.npy"] = (npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }"
                                         % (1 << 40, 1 << 40)), "npy")
    files["huge_shape_fits.npy"] = (npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (%d, %d), }"
                                              % (1 << 31, 1 << 31), b"\0" * 64), "npy")
    files["bomb.npz"] = (bomb_npz(), "npz")
    files["bomb_declared.npz"] = (bomb_declared_npz(), "npz")
    files["overlap.npz"] = (overlap_npz(), "npz")

    for rel, (data, fuzzer) in files.items():
        if not rel.startswith("@"):
            path = os.path.join(out, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        if corpus and fuzzer:
            targets = [fuzzer] + (["zip"] if fuzzer == "npz" else [])
            if rel.startswith("@"):
                name = rel.split("/", 1)[1]
            else:
                name = "hostile-" + os.path.basename(rel).replace(".", "_")
            if rel in ("x64_upsample.safetensors", "pad_2p63.safetensors"):
                # the topology also as the Rdn fuzzer's input (flag byte 0: matching weights)
                header_len = struct.unpack("<Q", data[:8])[0]
                topo = json.loads(data[8:8 + header_len])["__metadata__"]["topology"]
                write(os.path.join(corpus, "rdn_topology", name), b"\0" + topo.encode())
            for t in targets:
                write(os.path.join(corpus, t, name), data)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
