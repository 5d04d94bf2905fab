#include "png_util.h"

#include <fstream>

#include "candle/image.h"

namespace candle::test_models {

Tensor load_rgb(const std::string& path) {
  const image::Image img = image::read(path);
  const size_t hw = img.width * img.height, n = img.channels;
  std::vector<float> planar(3 * hw);
  for (size_t i = 0; i < hw; ++i)
    for (size_t c = 0; c < 3; ++c) planar[c * hw + i] = img.pixels[n * i + c];
  return Tensor::from_vec(planar, {1, 3, img.height, img.width}, Device::cpu());
}

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, text.data(), text.size());
}

}  // namespace candle::test_models
