// JPEG encoding with libjpeg-turbo. As in decode.cpp, the function that calls setjmp holds no C++
// object with a destructor; its caller turns the message into a candle::Error.
// jpeglib.h needs size_t and FILE declared first
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "candle/image.h"
#include "image_internal.h"

namespace candle::image {
namespace {

struct JpegWriter {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  std::jmp_buf jump;
  bool created = false;
  unsigned char* out = nullptr;  // malloc'ed by jpeg_mem_dest
  unsigned long out_size = 0;
  char msg[JMSG_LENGTH_MAX] = {};
};

extern "C" void jpeg_write_on_error(j_common_ptr c) {
  auto* w = reinterpret_cast<JpegWriter*>(c);  // cinfo is the first member
  c->err->format_message(c, w->msg);
  std::longjmp(w->jump, 1);
}

extern "C" void jpeg_write_on_message(j_common_ptr, int) {}

// gray_row: a width-sized buffer for gray+alpha input (its gray samples), else null
bool jpeg_phase_encode(JpegWriter* w, const uint8_t* px, size_t width, size_t height, size_t channels,
                       int quality, uint8_t* gray_row) {
  w->cinfo.err = jpeg_std_error(&w->err);
  w->err.error_exit = jpeg_write_on_error;
  w->err.emit_message = jpeg_write_on_message;
  if (setjmp(w->jump)) return false;
  jpeg_create_compress(&w->cinfo);
  w->created = true;
  j_compress_ptr c = &w->cinfo;
  jpeg_mem_dest(c, &w->out, &w->out_size);
  c->image_width = static_cast<JDIMENSION>(width);
  c->image_height = static_cast<JDIMENSION>(height);
  c->input_components = channels == 4 ? 4 : channels == 3 ? 3 : 1;
  c->in_color_space = channels == 4 ? JCS_EXT_RGBA : channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  if (quality >= 90) {
    // no chroma subsampling at high quality (4:4:4), as libjpeg-turbo's cjpeg -quality 90+ advice
    for (int i = 0; i < c->num_components; ++i)
      c->comp_info[i].h_samp_factor = c->comp_info[i].v_samp_factor = 1;
  }
  jpeg_start_compress(c, TRUE);
  const size_t stride = width * channels;
  while (c->next_scanline < c->image_height) {
    const uint8_t* src = px + static_cast<size_t>(c->next_scanline) * stride;
    if (gray_row) {
      for (size_t x = 0; x < width; ++x) gray_row[x] = src[2 * x];
      src = gray_row;
    }
    JSAMPROW row = const_cast<JSAMPROW>(src);
    jpeg_write_scanlines(c, &row, 1);
  }
  jpeg_finish_compress(c);
  return true;
}

struct JpegWriterGuard {
  JpegWriter* w;
  ~JpegWriterGuard() {
    if (w->created) jpeg_destroy_compress(&w->cinfo);
    std::free(w->out);
  }
};

}  // namespace

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, size_t width, size_t height, size_t channels,
                                 const EncodeOptions& opts) {
  detail::check_encode_shape("JPEG", width, height, channels, kMaxSide, "1..");
  // JPEG's own limit is lower than the library's
  detail::check_encode_shape("JPEG", width, height, channels, JPEG_MAX_DIMENSION, "JPEG allows at most ");
  if (opts.jpeg_quality < 1 || opts.jpeg_quality > 100) {
    throw Error(ErrorKind::InvalidArgument,
                "JPEG quality " + std::to_string(opts.jpeg_quality) + " is not in 1-100");
  }
  if (!pixels) throw Error(ErrorKind::InvalidArgument, "JPEG: no pixels");
  std::vector<uint8_t> gray(channels == 2 ? width : 0);
  JpegWriter w;
  JpegWriterGuard guard{&w};
  if (!jpeg_phase_encode(&w, pixels, width, height, channels, opts.jpeg_quality,
                         gray.empty() ? nullptr : gray.data()))
    throw Error(ErrorKind::Internal, std::string("JPEG: cannot encode: ") + w.msg);
  return std::vector<uint8_t>(w.out, w.out + w.out_size);
}

}  // namespace candle::image
