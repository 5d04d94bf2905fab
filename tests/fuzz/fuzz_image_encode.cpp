// libFuzzer: the PNG encoder (strips, threads, levels) and the decoder agree. The first bytes pick
// the width, height, channels, level, threads and rows per strip; the rest are the pixels (repeated
// to fill the image). Encoded to memory and decoded back, the pixels must be equal: abort otherwise.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "candle/error.h"
#include "candle/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return 0;
  const size_t w = 1 + (size_t(data[0]) | size_t(data[1] & 1) << 8);  // 1..512
  const size_t h = 1 + (data[2] & 127);                               // 1..128 (data[3]: spare)
  const size_t channels = 1 + (data[4] & 3);
  candle::image::EncodeOptions opts;
  opts.png_level = (data[4] >> 2) % 10;
  opts.threads = 1 + (data[5] & 3);
  opts.strip_rows = data[6] & 15;                                                       // 0: automatic
  if (opts.png_level >= 4 && w * h > 32 * 32) opts.png_level = 1 + opts.png_level % 3;  // keep it fast
  const uint8_t* src = data + 7;
  const size_t n = size - 7;
  std::vector<uint8_t> px(w * h * channels);
  for (size_t i = 0; i < px.size(); ++i) px[i] = n ? uint8_t(src[i % n] + (i / n) * 17) : uint8_t(i);
  try {
    const std::vector<uint8_t> png = candle::image::encode_png(px.data(), w, h, channels, opts);
    const candle::image::Image img = candle::image::decode(png);
    if (img.width != w || img.height != h) std::abort();
    const size_t out_c = channels == 2 || channels == 4 ? 4 : 3;
    if (img.channels != out_c) std::abort();
    for (size_t i = 0; i < w * h; ++i) {
      const uint8_t* p = &px[i * channels];
      const uint8_t* q = &img.pixels[i * out_c];
      if (channels >= 3) {
        for (size_t c = 0; c < channels; ++c)
          if (p[c] != q[c]) std::abort();
      } else {
        if (q[0] != p[0] || q[1] != p[0] || q[2] != p[0]) std::abort();
        if (channels == 2 && q[3] != p[1]) std::abort();
      }
    }
  } catch (const candle::Error&) {
    std::abort();  // every input here is a valid image
  }
  return 0;
}
