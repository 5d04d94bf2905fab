#!/usr/bin/env python3
"""GGUF interoperability with llama.cpp's own reader and writer (ggml's gguf C API in the prebuilt
libggml-base.so of tools/peers, called through ctypes; no headers are shipped, so the few
prototypes are declared here).

  python3 tools/gguf_interop.py dump FILE
      read FILE with ggml's gguf_init_from_file (tensor data loaded) and print a canonical dump:
      version, alignment, data offset, every key with its type and value, every tensor with its
      type, ne[] (all 4), offset and the hex of its first 64 data bytes. Exit status 1 when ggml refuses
      the file.
  python3 tools/gguf_interop.py accepts FILE...
      one line per file: "ok" or "refused" by ggml's reader (what llama.cpp would do).
  python3 tools/gguf_interop.py write OUT
      write the fixture tests/data/quantized/ggml_written.gguf with ggml's writer (gguf_init_empty,
      gguf_set_*, gguf_add_tensor, gguf_write_to_file): metadata of every scalar type, arrays of
      strings / i32 / f32, and tensors of types F32, F16 and Q8_0 whose bytes are built here.

Environment: CANDLE_GGML_LIB overrides the path of libggml-base.so.
"""
import ctypes as C
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ.get(
    "CANDLE_GGML_LIB",
    os.path.join(HERE, "peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"))

# gguf value types (the GGUF specification)
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
SCALAR_CTYPES = {T_U8: C.c_uint8, T_I8: C.c_int8, T_U16: C.c_uint16, T_I16: C.c_int16, T_U32: C.c_uint32,
                 T_I32: C.c_int32, T_F32: C.c_float, T_BOOL: C.c_bool, T_U64: C.c_uint64, T_I64: C.c_int64,
                 T_F64: C.c_double}
GETTERS = {T_U8: "u8", T_I8: "i8", T_U16: "u16", T_I16: "i16", T_U32: "u32", T_I32: "i32", T_F32: "f32",
           T_BOOL: "bool", T_U64: "u64", T_I64: "i64", T_F64: "f64"}
# ggml tensor types used here
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8


class GgufInitParams(C.Structure):
    _fields_ = [("no_alloc", C.c_bool), ("ctx", C.POINTER(C.c_void_p))]


class GgmlInitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


def load_lib():
    lib = C.CDLL(LIB)

    def fn(name, res, *args):
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = list(args)

    vp, i64, sz, cp = C.c_void_p, C.c_int64, C.c_size_t, C.c_char_p
    fn("gguf_init_from_file", vp, cp, GgufInitParams)
    fn("gguf_init_empty", vp)
    fn("gguf_free", None, vp)
    fn("gguf_get_version", C.c_uint32, vp)
    fn("gguf_get_alignment", sz, vp)
    fn("gguf_get_data_offset", sz, vp)
    fn("gguf_get_n_kv", i64, vp)
    fn("gguf_get_key", cp, vp, i64)
    fn("gguf_get_kv_type", C.c_int, vp, i64)
    fn("gguf_get_arr_type", C.c_int, vp, i64)
    fn("gguf_get_arr_n", sz, vp, i64)
    fn("gguf_get_arr_data", vp, vp, i64)
    fn("gguf_get_arr_str", cp, vp, i64, sz)
    fn("gguf_get_val_str", cp, vp, i64)
    for t, g in GETTERS.items():
        fn("gguf_get_val_" + g, SCALAR_CTYPES[t], vp, i64)
        fn("gguf_set_val_" + g, None, vp, cp, SCALAR_CTYPES[t])
    fn("gguf_set_val_str", None, vp, cp, cp)
    fn("gguf_set_arr_data", None, vp, cp, C.c_int, vp, sz)
    fn("gguf_set_arr_str", None, vp, cp, C.POINTER(cp), sz)
    fn("gguf_get_n_tensors", i64, vp)
    fn("gguf_get_tensor_name", cp, vp, i64)
    fn("gguf_get_tensor_type", C.c_int, vp, i64)
    fn("gguf_get_tensor_offset", sz, vp, i64)
    fn("gguf_get_tensor_size", sz, vp, i64)
    fn("gguf_add_tensor", None, vp, vp)
    fn("gguf_write_to_file", C.c_bool, vp, cp, C.c_bool)
    fn("ggml_init", vp, GgmlInitParams)
    fn("ggml_free", None, vp)
    fn("ggml_get_tensor", vp, vp, cp)
    fn("ggml_get_data", vp, vp)
    fn("ggml_type_name", cp, C.c_int)
    fn("ggml_new_tensor", vp, vp, C.c_int, C.c_int, C.POINTER(C.c_int64))
    fn("ggml_set_name", vp, vp, cp)
    return lib


# struct ggml_tensor begins {enum ggml_type type; struct ggml_backend_buffer* buffer; int64_t ne[4]; ...}:
# ne[] is at byte 16 on x86-64 (a 4-byte enum, padding, a pointer)
NE_OFFSET = 16


def tensor_ne(tensor):
    return list((C.c_int64 * 4).from_address(tensor + NE_OFFSET))


def fmt_scalar(t, v):
    if t == T_BOOL:
        return "true" if v else "false"
    if t in (T_F32, T_F64):
        return repr(float(v))
    return str(int(v))


def fmt_str(b):
    return repr(b.decode("utf-8", "backslashreplace"))


def open_gguf(lib, path):
    ggml_ctx = C.c_void_p()
    params = GgufInitParams(False, C.pointer(ggml_ctx))
    ctx = lib.gguf_init_from_file(path.encode(), params)
    return ctx, ggml_ctx


def dump(path):
    lib = load_lib()
    ctx, ggml_ctx = open_gguf(lib, path)
    if not ctx:
        print("ggml refused " + path, file=sys.stderr)
        return 1
    out = ["version %d" % lib.gguf_get_version(ctx), "alignment %d" % lib.gguf_get_alignment(ctx),
           "data_offset %d" % lib.gguf_get_data_offset(ctx)]
    for i in range(lib.gguf_get_n_kv(ctx)):
        key = lib.gguf_get_key(ctx, i).decode("utf-8", "backslashreplace")
        t = lib.gguf_get_kv_type(ctx, i)
        if t == T_STR:
            out.append("kv %s string %s" % (key, fmt_str(lib.gguf_get_val_str(ctx, i))))
        elif t == T_ARR:
            at = lib.gguf_get_arr_type(ctx, i)
            n = lib.gguf_get_arr_n(ctx, i)
            if at == T_STR:
                vals = [fmt_str(lib.gguf_get_arr_str(ctx, i, j)) for j in range(n)]
            else:
                data = lib.gguf_get_arr_data(ctx, i)
                arr = (SCALAR_CTYPES[at] * n).from_address(data) if n else []
                vals = [fmt_scalar(at, v) for v in arr]
            out.append("kv %s array[%s] %d [%s]" % (key, TYPE_NAMES[at], n, ", ".join(vals)))
        else:
            v = getattr(lib, "gguf_get_val_" + GETTERS[t])(ctx, i)
            out.append("kv %s %s %s" % (key, TYPE_NAMES[t], fmt_scalar(t, v)))
    for i in range(lib.gguf_get_n_tensors(ctx)):
        name = lib.gguf_get_tensor_name(ctx, i)
        t = lib.gguf_get_tensor_type(ctx, i)
        tensor = lib.ggml_get_tensor(ggml_ctx, name)
        ne = tensor_ne(tensor)
        size = lib.gguf_get_tensor_size(ctx, i)
        data = C.string_at(lib.ggml_get_data(tensor), min(size, 64))
        out.append("tensor %s %s ne=%s offset=%d size=%d data=%s" % (
            name.decode("utf-8", "backslashreplace"), lib.ggml_type_name(t).decode(), ne,
            lib.gguf_get_tensor_offset(ctx, i), size, data.hex()))
    lib.gguf_free(ctx)
    lib.ggml_free(ggml_ctx)
    print("\n".join(out))
    return 0


def accepts(paths):
    lib = load_lib()
    for p in paths:
        ctx, ggml_ctx = open_gguf(lib, p)
        print("%s %s" % ("ok" if ctx else "refused", p))
        sys.stdout.flush()
        if ctx:
            lib.gguf_free(ctx)
            lib.ggml_free(ggml_ctx)
    return 0


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


# The tensors of the fixture: (name, ggml type, ne[], data bytes). tests/quantized/gguf_test.cpp
# writes the same bytes out.
def fixture_tensors():
    f32 = struct.pack("<12f", *[0.5 * i - 2.0 for i in range(12)])  # ne (4, 3): candle (3, 4)
    f16 = struct.pack("<8H", *[f16_bits(0.25 * i) for i in range(8)])  # ne (2, 2, 2)
    q8 = b""
    for b in range(4):  # ne (64, 2): two rows of two blocks; block b: d = 0.5 * (b + 1), qs = b * 3 + i - 16
        q8 += struct.pack("<H", f16_bits(0.5 * (b + 1)))
        q8 += struct.pack("<32b", *[b * 3 + i - 16 for i in range(32)])
    return [("t.f32", GGML_F32, [4, 3], f32), ("t.f16", GGML_F16, [2, 2, 2], f16), ("t.q8_0", GGML_Q8_0, [64, 2], q8)]


def write_fixture(out):
    lib = load_lib()
    ctx = lib.gguf_init_empty()
    s = lambda x: x.encode()
    lib.gguf_set_val_str(ctx, b"general.architecture", b"candle-test")
    lib.gguf_set_val_str(ctx, b"general.name", "caf\u00e9 \u2615".encode())
    lib.gguf_set_val_u8(ctx, b"test.u8", 200)
    lib.gguf_set_val_i8(ctx, b"test.i8", -100)
    lib.gguf_set_val_u16(ctx, b"test.u16", 60000)
    lib.gguf_set_val_i16(ctx, b"test.i16", -30000)
    lib.gguf_set_val_u32(ctx, b"test.u32", 4000000000)
    lib.gguf_set_val_i32(ctx, b"test.i32", -2000000000)
    lib.gguf_set_val_u64(ctx, b"test.u64", 18000000000000000000)
    lib.gguf_set_val_i64(ctx, b"test.i64", -9000000000000000000)
    lib.gguf_set_val_f32(ctx, b"test.f32", 1.5)
    lib.gguf_set_val_f64(ctx, b"test.f64", -0.125)
    lib.gguf_set_val_bool(ctx, b"test.bool", True)
    toks = [s("<s>"), s("</s>"), s("hello"), s(""), "\u00fcber".encode()]
    arr = (C.c_char_p * len(toks))(*toks)
    lib.gguf_set_arr_str(ctx, b"tokenizer.ggml.tokens", arr, len(toks))
    i32s = (C.c_int32 * 4)(1, -2, 3, -4)
    lib.gguf_set_arr_data(ctx, b"test.arr_i32", T_I32, C.cast(i32s, C.c_void_p), 4)
    f32s = (C.c_float * 3)(0.5, -1.0, 2.25)
    lib.gguf_set_arr_data(ctx, b"test.arr_f32", T_F32, C.cast(f32s, C.c_void_p), 3)
    lib.gguf_set_arr_data(ctx, b"test.arr_empty", T_U8, None, 0)

    gctx = lib.ggml_init(GgmlInitParams(1 << 20, None, False))
    keep = []
    for name, t, ne, data in fixture_tensors():
        dims = (C.c_int64 * len(ne))(*ne)
        tensor = lib.ggml_new_tensor(gctx, t, len(ne), dims)
        lib.ggml_set_name(tensor, name.encode())
        C.memmove(lib.ggml_get_data(tensor), data, len(data))
        lib.gguf_add_tensor(ctx, tensor)
        keep.append(tensor)
    ok = lib.gguf_write_to_file(ctx, out.encode(), False)
    lib.gguf_free(ctx)
    lib.ggml_free(gctx)
    if not ok:
        print("gguf_write_to_file failed", file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "dump":
        return dump(argv[1])
    if len(argv) >= 2 and argv[0] == "accepts":
        return accepts(argv[1:])
    if len(argv) == 2 and argv[0] == "write":
        return write_fixture(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
