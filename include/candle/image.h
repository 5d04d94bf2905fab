// candle::image: PNG and JPEG in and out, for programs that read untrusted files.
//
// Decoding goes through libpng and libjpeg-turbo with their errors turned into candle::Error
// (ErrorKind::Parse): the header is read first and its size checked against a pixel limit and a
// byte budget before any pixel buffer is allocated, and a file shorter than its header claims is
// an error. PNG encoding deflates horizontal strips on several threads into one standard zlib
// stream; JPEG encoding uses libjpeg-turbo. Files are written through a temporary file in the
// target's directory and renamed over it, so a target is only ever replaced whole.
//
//   auto img = candle::image::read("in.png");            // 8-bit RGB or RGBA, interleaved
//   candle::image::check_output_path("out.png");         // before any long computation
//   candle::image::write("out.png", img);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace candle::image {

enum class Format { Png, Jpeg };

// Pillow's decompression-bomb limit (its MAX_IMAGE_PIXELS).
inline constexpr size_t kDefaultMaxPixels = 89'478'485;
// The largest width or height read or written (PNG allows 2^31 - 1; this library does not).
inline constexpr size_t kMaxSide = 65535;

struct DecodeOptions {
  // width * height above this is an error before decoding; raised by `max_pixels_flag`.
  size_t max_pixels = kDefaultMaxPixels;
  // bytes of the decoded pixel buffer (width * height * channels) allowed; raised by `budget_flag`.
  size_t max_bytes = SIZE_MAX;
  // read(): a larger file is an error; 0 picks 8 bytes per allowed pixel plus 16 MiB.
  size_t max_file_bytes = 0;
  // the program's options that raise the limits, named in the errors
  std::string_view max_pixels_flag = "--max-pixels";
  std::string_view budget_flag = "--max-memory";
};

// What the header says, before any pixel is decoded.
struct Info {
  Format format = Format::Png;
  size_t width = 0, height = 0;
  size_t channels = 0;         // of the decoded image: 3 (RGB) or 4 (RGBA)
  size_t source_channels = 0;  // in the file: 1 gray, 2 gray+alpha, 3 color, 4 color+alpha or CMYK
  int bit_depth = 8;           // per sample in the file (PNG: 1, 2, 4, 8 or 16)
  bool interlaced = false;     // PNG Adam7 or progressive JPEG
};

// 8-bit samples, rows top to bottom, interleaved (RGB, RGBA; encoders also take gray and gray+alpha)
struct Image {
  size_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // width * height * channels
};

// The format from the signature bytes; an error (Parse) naming `name` for anything else.
Format detect(std::span<const uint8_t> data, std::string_view name = "<memory>");

// Reads the header only and checks the size against the options' limits.
Info probe(std::span<const uint8_t> data, const DecodeOptions& opts = {}, std::string_view name = "<memory>");

// Decodes to 8-bit RGB (no alpha in the file) or RGBA: palette, gray, 16-bit, interlaced PNG; gray,
// color and CMYK JPEG. Every error is a candle::Error naming `name`.
Image decode(std::span<const uint8_t> data, const DecodeOptions& opts = {},
             std::string_view name = "<memory>");

// The bytes of a regular file, at most `max_bytes` of them (else an error).
std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes);
Info probe_file(const std::string& path, const DecodeOptions& opts = {});
Image read(const std::string& path, const DecodeOptions& opts = {});

struct EncodeOptions {
  // PNG zlib level 0-9. 0: stored; 1: the Paeth filter and run-length deflate (fast, and on smooth
  // images as small as libpng's defaults); 2-3: libpng's adaptive filter choice, run-length deflate;
  // 4-9: the adaptive filters and zlib's level
  int png_level = 1;
  int jpeg_quality = 95;  // 1-100
  // PNG threads (0: the hardware's); rows per strip (0: automatic; the tests force small strips)
  unsigned threads = 0;
  size_t strip_rows = 0;
};

// 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels; width and height 1..kMaxSide.
std::vector<uint8_t> encode_png(const uint8_t* pixels, size_t width, size_t height, size_t channels,
                                const EncodeOptions& opts = {});
// 1, 3 or 4 channels (alpha is dropped: JPEG has none).
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, size_t width, size_t height, size_t channels,
                                 const EncodeOptions& opts = {});

// The output format from the extension (.png, .jpg, .jpeg, any case), and the checks a write would
// fail: the path is not a directory, its directory exists and is writable. Call it before long
// work; errors (InvalidArgument for the extension, Io otherwise) give the reason.
Format check_output_path(const std::string& path);

// Replaces `path` whole with `bytes`: a temporary `.<name>.tmp-<pid>-<random>` beside it (removed
// on every error, and on SIGINT/SIGTERM during the write), fsync, rename, fsync of the directory.
// An existing target keeps its permission bits.
void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

// Encodes by the extension (check_output_path) and writes atomically.
void write(const std::string& path, const uint8_t* pixels, size_t width, size_t height, size_t channels,
           const EncodeOptions& opts = {});
void write(const std::string& path, const Image& img, const EncodeOptions& opts = {});

}  // namespace candle::image
