#!/usr/bin/env python3
"""Writes crafted (hostile) image files into a directory, as regression inputs for candle::image.

    tools/make-hostile-images.py DIR [--small]

Python's standard library only (zlib, struct). The files and what a safe decoder must do with them:

  ppm_16000.ppm              19-byte PPM header claiming 16000x16000: not PNG/JPEG, refused
  png_bomb_16000_gray1.png   a complete, valid PNG of 16000x16000 (1-bit gray zeros, ~31 KB): over
                             the default pixel limit, refused before decoding
  png_bomb_16000_rgb_cut.png 16000x16000 RGB, the IDAT of zeros cut short: refused by the header
  png_chunk_2g.png           1x1 PNG with a tEXt chunk whose length is 2^31 - 1: an error, no 2 GB
  png_idat_2g.png            1x1 PNG whose IDAT length is 2^31 - 1 (the file is small): an error
  png_1x1_huge_idat.png      IHDR 1x1, its IDAT inflating to megabytes of zeros: decodes (or fails)
                             fast, never inflating it all
  png_small.png              a valid 7x5 RGB PNG (for comparison and as a fuzzing seed)
  jpeg_small.jpg             a valid 64x48 gray baseline JPEG (DC only)
  jpeg_truncated.jpg         a 1024x1024 gray JPEG cut in its entropy-coded data: an error
  jpeg_sof_65500.jpg         SOF claims 65500x65500 (no scan data): refused before decoding
  tga_rle.tga                an RLE TGA (type 10) claiming 16000x16000: not PNG/JPEG, refused

--small keeps every file under a few KB (for fuzzing corpora): the 16000x16000 gray bomb is left out
and the huge IDAT inflates to 1 MB instead of 16 MB.
"""
import os
import struct
import sys
import zlib

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def chunk(kind, data, length=None):
    n = len(data) if length is None else length
    return struct.pack(">I", n) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def ihdr(w, h, depth=8, color=2, interlace=0):
    return chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace))


def zeros_deflated(total, step=1 << 20, level=9):
    c = zlib.compressobj(level)
    out = []
    block = bytes(min(step, total))
    left = total
    while left:
        n = min(left, len(block))
        out.append(c.compress(block[:n]))
        left -= n
    out.append(c.flush())
    return b"".join(out)


def png_small():
    w, h = 7, 5
    raw = b"".join(b"\x00" + bytes((x * 36 + y * 50 + c * 80) & 255 for x in range(w) for c in range(3))
                   for y in range(h))
    return PNG_SIG + ihdr(w, h) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def png_bomb_gray1():
    w = h = 16000
    raw_row = 1 + (w + 7) // 8
    return PNG_SIG + ihdr(w, h, 1, 0) + chunk(b"IDAT", zeros_deflated(raw_row * h)) + chunk(b"IEND", b"")


def png_bomb_rgb_cut():
    w = h = 16000
    data = zeros_deflated((1 + 3 * w) * 100)  # the first 100 rows of 16000
    return PNG_SIG + ihdr(w, h) + chunk(b"IDAT", data)  # no IEND: cut


def png_chunk_2g(kind):
    # a chunk header claiming 2^31 - 1 bytes, followed by a few of them and nothing else
    return PNG_SIG + ihdr(1, 1) + struct.pack(">I", 0x7FFFFFFF) + kind + b"\x00" * 64


def png_1x1_huge_idat(small):
    n = (1 << 20) if small else (16 << 20)
    return PNG_SIG + ihdr(1, 1) + chunk(b"IDAT", zeros_deflated(n)) + chunk(b"IEND", b"")


# ---- JPEG: a baseline gray JPEG whose every 8x8 block is DC 0 with an end-of-block ------------

def marker(code, payload):
    return b"\xff" + bytes([code]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_headers(w, h):
    dqt = marker(0xDB, b"\x00" + b"\x01" * 64)
    sof = marker(0xC0, struct.pack(">BHHB", 8, h, w, 1) + b"\x01\x11\x00")
    one_code = b"\x01" + b"\x00" * 15  # one code of length 1
    dht_dc = marker(0xC4, b"\x00" + one_code + b"\x00")  # DC table 0: category 0
    dht_ac = marker(0xC4, b"\x10" + one_code + b"\x00")  # AC table 0: end of block
    sos = marker(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    return b"\xff\xd8" + dqt + sof + dht_dc + dht_ac + sos


def jpeg_gray(w, h):
    blocks = ((w + 7) // 8) * ((h + 7) // 8)
    bits = 2 * blocks  # "0" (DC category 0) and "0" (EOB) per block
    nbytes = (bits + 7) // 8
    data = bytearray(nbytes)
    pad = nbytes * 8 - bits
    if pad:
        data[-1] = (1 << pad) - 1  # padding with 1 bits
    return jpeg_headers(w, h) + bytes(data) + b"\xff\xd9"


def tga_rle():
    # id length, no colormap, type 10 (RLE truecolor), 16000x16000, 24 bpp
    head = struct.pack("<BBBHHBHHHHBB", 0, 0, 10, 0, 0, 0, 0, 0, 16000, 16000, 24, 0)
    return head + b"\xff\x10\x20\x30" * 16  # runs of 128 pixels


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    small = "--small" in sys.argv[1:]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    out = args[0]
    os.makedirs(out, exist_ok=True)
    files = {
        "ppm_16000.ppm": b"P6\n16000 16000\n255\n",
        "png_bomb_16000_rgb_cut.png": png_bomb_rgb_cut(),
        "png_chunk_2g.png": png_chunk_2g(b"tEXt"),
        "png_idat_2g.png": png_chunk_2g(b"IDAT"),
        "png_1x1_huge_idat.png": png_1x1_huge_idat(small),
        "png_small.png": png_small(),
        "jpeg_small.jpg": jpeg_gray(64, 48),
        "jpeg_truncated.jpg": jpeg_gray(1024, 1024)[:-200],
        "jpeg_sof_65500.jpg": jpeg_headers(65500, 65500),
        "tga_rle.tga": tga_rle(),
    }
    if not small:
        files["png_bomb_16000_gray1.png"] = png_bomb_gray1()
    assert len(files["ppm_16000.ppm"]) == 19
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
