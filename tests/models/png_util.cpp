#include "png_util.h"

#include <fstream>
#include <stdexcept>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace candle::test_models {

Tensor load_rgb(const std::string& path) {
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(path.c_str(), &w, &h, &n, 3);
  if (!px) throw std::runtime_error("cannot read " + path);
  const size_t hw = size_t(w) * size_t(h);
  std::vector<float> planar(3 * hw);
  for (size_t i = 0; i < hw; ++i)
    for (size_t c = 0; c < 3; ++c) planar[c * hw + i] = px[3 * i + c];
  stbi_image_free(px);
  return Tensor::from_vec(planar, {1, 3, size_t(h), size_t(w)}, Device::cpu());
}

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, text.data(), text.size());
}

}  // namespace candle::test_models
