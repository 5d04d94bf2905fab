// PNG (libpng) and JPEG (libjpeg-turbo) decoding with the header checked before any pixel.
//
// Both libraries report errors by longjmp. Every function below that calls setjmp is a "phase"
// that holds no C++ object with a destructor and calls nothing that throws: it returns false with
// the library's message in a plain buffer, and the C++ caller (which never calls setjmp itself)
// turns that into a candle::Error after the jump. The callbacks the libraries call never throw.
// jpeglib.h needs size_t and FILE declared first
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "candle/image.h"
#include "image_internal.h"

namespace candle::image {
namespace {

using detail::fail;
using detail::mul_ok;

constexpr uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

std::string size_str(size_t w, size_t h) { return std::to_string(w) + "x" + std::to_string(h); }

// The header's size against the options; `bytes_per_pixel` of the decoder's buffer.
void check_limits(const Info& info, size_t bytes_per_pixel, const DecodeOptions& opts,
                  std::string_view name) {
  const size_t w = info.width, h = info.height;
  if (w == 0 || h == 0)
    fail(ErrorKind::Parse, name, "the header claims an empty image (" + size_str(w, h) + ")");
  if (w > kMaxSide || h > kMaxSide) {
    fail(ErrorKind::Parse, name,
         size_str(w, h) + " is larger than " + std::to_string(kMaxSide) + " pixels on a side (the limit)");
  }
  const size_t pixels = w * h;  // both <= 65535: no overflow
  if (pixels > opts.max_pixels) {
    std::string msg = size_str(w, h) + " is " + std::to_string(pixels) + " pixels, over the limit of " +
                      std::to_string(opts.max_pixels) + " (a decompression bomb?";
    if (!opts.max_pixels_flag.empty()) msg += " raise the limit with " + std::string(opts.max_pixels_flag);
    fail(ErrorKind::Parse, name, msg + ")");
  }
  size_t bytes = 0;
  if (!mul_ok(pixels, bytes_per_pixel, bytes) || bytes > opts.max_bytes) {
    std::string msg = "decoding " + size_str(w, h) + " needs " + std::to_string(bytes) +
                      " bytes, over the budget of " + std::to_string(opts.max_bytes) + " bytes";
    if (!opts.budget_flag.empty()) msg += " (raise it with " + std::string(opts.budget_flag) + ")";
    fail(ErrorKind::Parse, name, msg);
  }
}

// ---- PNG ------------------------------------------------------------------------------------

// Plain data only: it lives across the longjmps.
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  bool has_trns = false;
  size_t channels = 0, rowbytes = 0;  // after the transforms
  char msg[200] = {};
};

extern "C" void png_on_error(png_structp png, png_const_charp m) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->msg, sizeof r->msg, "%s", m ? m : "error");
  png_longjmp(png, 1);
}

extern "C" void png_on_warning(png_structp, png_const_charp) {}

extern "C" void png_on_read(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// The ancillary chunks the decoder has no use for, skipped unread (no zTXt/iCCP inflating).
constexpr png_byte kPngIgnored[] =
    "iCCP\0zTXt\0iTXt\0tEXt\0sPLT\0eXIf\0hIST\0pCAL\0sCAL\0tIME\0sBIT\0bKGD\0cHRM\0";

bool png_phase_header(PngReader* r) {
  r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_on_error, png_on_warning);
  if (!r->png) return std::snprintf(r->msg, sizeof r->msg, "out of memory"), false;
  r->info = png_create_info_struct(r->png);
  if (!r->info) return std::snprintf(r->msg, sizeof r->msg, "out of memory"), false;
  if (setjmp(png_jmpbuf(r->png))) return false;
  // the side limit is checked (with a better message) after the header; hostile chunks must not
  // allocate much: few cached ancillary chunks, none larger than 1 MiB
  png_set_user_limits(r->png, 0x7fffffffu, 0x7fffffffu);
  png_set_chunk_cache_max(r->png, 64);
  png_set_chunk_malloc_max(r->png, 1u << 20);
  png_set_keep_unknown_chunks(r->png, PNG_HANDLE_CHUNK_NEVER, nullptr, 0);
  png_set_keep_unknown_chunks(r->png, PNG_HANDLE_CHUNK_NEVER, kPngIgnored,
                              static_cast<int>(sizeof kPngIgnored / 5));
  png_set_read_fn(r->png, r, png_on_read);
  png_read_info(r->png, r->info);
  png_get_IHDR(r->png, r->info, &r->width, &r->height, &r->bit_depth, &r->color_type, &r->interlace, nullptr,
               nullptr);
  r->has_trns = png_get_valid(r->png, r->info, PNG_INFO_tRNS) != 0;
  return true;
}

// To 8-bit RGB or RGBA.
bool png_phase_transforms(PngReader* r) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_structp png = r->png;
  if (r->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (r->color_type == PNG_COLOR_TYPE_GRAY && r->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (r->has_trns) png_set_tRNS_to_alpha(png);
  if (r->bit_depth == 16) png_set_scale_16(png);
  if (r->color_type == PNG_COLOR_TYPE_GRAY || r->color_type == PNG_COLOR_TYPE_GRAY_ALPHA)
    png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, r->info);
  r->channels = png_get_channels(png, r->info);
  r->rowbytes = png_get_rowbytes(png, r->info);
  return true;
}

bool png_phase_pixels(PngReader* r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_read_image(r->png, rows);
  return true;
}

struct PngGuard {
  PngReader* r;
  ~PngGuard() {
    if (r->png) png_destroy_read_struct(&r->png, r->info ? &r->info : nullptr, nullptr);
  }
};

Info png_info_of(const PngReader& r) {
  Info info;
  info.format = Format::Png;
  info.width = r.width, info.height = r.height;
  const bool alpha = (r.color_type & PNG_COLOR_MASK_ALPHA) != 0 || r.has_trns;
  info.channels = alpha ? 4 : 3;
  const bool color = (r.color_type & PNG_COLOR_MASK_COLOR) != 0;
  info.source_channels = (color ? 3 : 1) + (alpha ? 1 : 0);
  info.bit_depth = r.bit_depth;
  info.interlaced = r.interlace != PNG_INTERLACE_NONE;
  return info;
}

Image png_decode(std::span<const uint8_t> data, const DecodeOptions& opts, std::string_view name, bool pixels,
                 Info* info_out) {
  // The size from IHDR (which must come first) before libpng sees the file: a header alone, or a
  // file cut after it, is refused for its size rather than for its end.
  if (data.size() >= 24 && std::memcmp(data.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return size_t(data[at]) << 24 | size_t(data[at + 1]) << 16 | size_t(data[at + 2]) << 8 |
             size_t(data[at + 3]);
    };
    Info early;
    early.width = be32(16), early.height = be32(20);
    const bool alpha = data.size() > 25 && (data[25] & PNG_COLOR_MASK_ALPHA) != 0;
    // at least 3 bytes a pixel (a tRNS chunk may add alpha later: checked again below)
    check_limits(early, alpha ? 4 : 3, opts, name);
  }
  PngReader r;
  r.data = data.data(), r.size = data.size();
  PngGuard guard{&r};
  if (!png_phase_header(&r)) fail(ErrorKind::Parse, name, std::string("PNG: ") + r.msg);
  const Info info = png_info_of(r);
  check_limits(info, info.channels, opts, name);
  if (info_out) *info_out = info;
  if (!pixels) return {};
  if (!png_phase_transforms(&r)) fail(ErrorKind::Parse, name, std::string("PNG: ") + r.msg);
  if ((r.channels != 3 && r.channels != 4) || r.channels != info.channels ||
      r.rowbytes != info.width * r.channels) {
    fail(ErrorKind::Internal, name, "PNG: unexpected row layout after the transforms");
  }
  Image img;
  img.width = info.width, img.height = info.height, img.channels = r.channels;
  img.pixels.resize(img.width * img.height * img.channels);  // checked by check_limits
  std::vector<png_bytep> rows(img.height);
  for (size_t y = 0; y < img.height; ++y) rows[y] = img.pixels.data() + y * r.rowbytes;
  if (!png_phase_pixels(&r, rows.data())) fail(ErrorKind::Parse, name, std::string("PNG: ") + r.msg);
  return img;
}

// ---- JPEG -----------------------------------------------------------------------------------

constexpr int kJpegMaxScans = 500;  // progressive files with thousands of scans take minutes

struct JpegReader {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  bool created = false;
  char msg[JMSG_LENGTH_MAX + 32] = {};
};

JpegReader* jpeg_reader(j_common_ptr c) {
  // cinfo is the first member: the struct's address
  return reinterpret_cast<JpegReader*>(reinterpret_cast<char*>(c) - offsetof(JpegReader, cinfo));
}

extern "C" void jpeg_on_error(j_common_ptr c) {
  JpegReader* r = jpeg_reader(c);
  c->err->format_message(c, r->msg);
  std::longjmp(r->jump, 1);
}

// Warnings are corrupt data (a file shorter than its header claims, bad Huffman codes): errors,
// but for the few that say nothing about the pixels.
extern "C" void jpeg_on_message(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  switch (c->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC: c->err->num_warnings++; return;
    default: jpeg_on_error(c);
  }
}

extern "C" void jpeg_on_progress(j_common_ptr c) {
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number > kJpegMaxScans) {
    JpegReader* r = jpeg_reader(c);
    std::snprintf(r->msg, sizeof r->msg, "more than %d scans", kJpegMaxScans);
    std::longjmp(r->jump, 1);
  }
}

bool jpeg_phase_header(JpegReader* r, const uint8_t* data, size_t size) {
  r->cinfo.err = jpeg_std_error(&r->err);
  r->err.error_exit = jpeg_on_error;
  r->err.emit_message = jpeg_on_message;
  if (setjmp(r->jump)) return false;
  jpeg_create_decompress(&r->cinfo);
  r->created = true;
  r->progress.progress_monitor = jpeg_on_progress;
  r->cinfo.progress = &r->progress;
  jpeg_mem_src(&r->cinfo, data, static_cast<unsigned long>(size));
  if (jpeg_read_header(&r->cinfo, TRUE) != JPEG_HEADER_OK) {
    std::snprintf(r->msg, sizeof r->msg, "no image in the file (tables only)");
    return false;
  }
  return true;
}

bool jpeg_phase_pixels(JpegReader* r, uint8_t* px, size_t stride, long max_memory) {
  if (setjmp(r->jump)) return false;
  j_decompress_ptr c = &r->cinfo;
  c->mem->max_memory_to_use = max_memory;
  jpeg_start_decompress(c);
  if (c->output_width != c->image_width || c->output_height != c->image_height ||
      static_cast<size_t>(c->output_components) * c->output_width != stride) {
    std::snprintf(r->msg, sizeof r->msg, "unexpected output layout");
    return false;
  }
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = px + static_cast<size_t>(c->output_scanline) * stride;
    if (jpeg_read_scanlines(c, &row, 1) != 1) {
      std::snprintf(r->msg, sizeof r->msg, "the file ends early (truncated)");
      return false;
    }
  }
  return true;
}

struct JpegGuard {
  JpegReader* r;
  ~JpegGuard() {
    if (r->created) jpeg_destroy_decompress(&r->cinfo);
  }
};

Image jpeg_decode(std::span<const uint8_t> data, const DecodeOptions& opts, std::string_view name,
                  bool pixels, Info* info_out) {
  JpegReader r;
  JpegGuard guard{&r};
  if (!jpeg_phase_header(&r, data.data(), data.size()))
    fail(ErrorKind::Parse, name, std::string("JPEG: ") + r.msg);
  j_decompress_ptr c = &r.cinfo;
  const bool cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
  const bool ok_space = cmyk ? c->num_components == 4
                             : (c->jpeg_color_space == JCS_GRAYSCALE && c->num_components == 1) ||
                                   ((c->jpeg_color_space == JCS_YCbCr || c->jpeg_color_space == JCS_RGB) &&
                                    c->num_components == 3);
  if (!ok_space) {
    fail(ErrorKind::Parse, name,
         "JPEG: unsupported color space with " + std::to_string(c->num_components) + " components");
  }
  Info info;
  info.format = Format::Jpeg;
  info.width = c->image_width, info.height = c->image_height;
  info.channels = 3;
  info.source_channels = static_cast<size_t>(c->num_components);
  info.bit_depth = c->data_precision;
  info.interlaced = c->progressive_mode != 0;
  const size_t bpp = cmyk ? 4 : 3;  // CMYK is decoded as such, then converted in place
  check_limits(info, bpp, opts, name);
  if (info_out) *info_out = info;
  if (!pixels) return {};
  c->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  Image img;
  img.width = info.width, img.height = info.height, img.channels = 3;
  img.pixels.resize(img.width * img.height * bpp);
  // the library's own buffers (progressive coefficients: 2 bytes per sample) stay near the image
  const long max_memory = static_cast<long>(std::min<size_t>(img.pixels.size() * 2 + (64u << 20), 1ul << 40));
  if (!jpeg_phase_pixels(&r, img.pixels.data(), img.width * bpp, max_memory))
    fail(ErrorKind::Parse, name, std::string("JPEG: ") + r.msg);
  if (cmyk) {
    // Adobe writes inverted CMYK (0 = full ink); libjpeg passes the stored values on
    const bool inverted = c->saw_Adobe_marker != 0;
    uint8_t* p = img.pixels.data();
    const size_t n = img.width * img.height;
    for (size_t i = 0; i < n; ++i) {
      unsigned cc = p[4 * i], m = p[4 * i + 1], yy = p[4 * i + 2], k = p[4 * i + 3];
      if (!inverted) cc = 255 - cc, m = 255 - m, yy = 255 - yy, k = 255 - k;
      p[3 * i] = static_cast<uint8_t>((cc * k + 127) / 255);
      p[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
      p[3 * i + 2] = static_cast<uint8_t>((yy * k + 127) / 255);
    }
    img.pixels.resize(n * 3);
    img.pixels.shrink_to_fit();
  }
  return img;
}

const char* other_format(std::span<const uint8_t> d) {
  auto starts = [&](std::string_view s) {
    return d.size() >= s.size() && std::memcmp(d.data(), s.data(), s.size()) == 0;
  };
  using namespace std::string_view_literals;
  if (starts("BM")) return "BMP";
  if (starts("GIF87a") || starts("GIF89a")) return "GIF";
  if (starts("RIFF") && d.size() >= 12 && std::memcmp(d.data() + 8, "WEBP", 4) == 0) return "WebP";
  if (starts("II*\0"sv) || starts("MM\0*"sv)) return "TIFF";
  if (d.size() >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7') return "PNM";
  if (starts("8BPS")) return "PSD";
  if (starts("qoif")) return "QOI";
  return nullptr;
}

}  // namespace

Format detect(std::span<const uint8_t> data, std::string_view name) {
  if (data.size() >= 8 && std::memcmp(data.data(), kPngSig, 8) == 0) return Format::Png;
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return Format::Jpeg;
  std::string what = "not a supported image (PNG or JPEG are accepted)";
  if (const char* other = other_format(data))
    what = std::string("a ") + other + " file is " + what;
  else if (data.empty())
    what = "an empty file is " + what;
  fail(ErrorKind::Parse, name, what);
}

Info probe(std::span<const uint8_t> data, const DecodeOptions& opts, std::string_view name) {
  Info info;
  if (detect(data, name) == Format::Png)
    png_decode(data, opts, name, false, &info);
  else
    jpeg_decode(data, opts, name, false, &info);
  return info;
}

Image decode(std::span<const uint8_t> data, const DecodeOptions& opts, std::string_view name) {
  return detect(data, name) == Format::Png ? png_decode(data, opts, name, true, nullptr)
                                           : jpeg_decode(data, opts, name, true, nullptr);
}

}  // namespace candle::image
