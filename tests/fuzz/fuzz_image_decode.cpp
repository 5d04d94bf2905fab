// libFuzzer: candle::image::decode on arbitrary bytes. Any input must give an image or a
// candle::Error: no crash, no leak, no sanitizer report, no allocation beyond the pixel limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "candle/error.h"
#include "candle/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  candle::image::DecodeOptions opts;
  opts.max_pixels = 4u << 20;  // 4M pixels: 16 MiB of RGBA at most
  try {
    const std::span<const uint8_t> bytes(data, size);
    const candle::image::Info info = candle::image::probe(bytes, opts);
    const candle::image::Image img = candle::image::decode(bytes, opts);
    // what probe said is what decode gives
    if (img.width != info.width || img.height != info.height || img.channels != info.channels ||
        img.pixels.size() != img.width * img.height * img.channels ||
        img.width * img.height > opts.max_pixels)
      std::abort();
  } catch (const candle::Error&) {
  }
  return 0;
}
