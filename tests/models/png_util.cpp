#include "png_util.h"

#include <zlib.h>

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

void write_png_header_only(const std::string& path, uint32_t w, uint32_t h) {
  std::vector<uint8_t> f = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto be32 = [&](std::vector<uint8_t>& v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
  };
  auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    be32(f, uint32_t(data.size()));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    f.insert(f.end(), body.begin(), body.end());
    be32(f, uint32_t(crc32(0, body.data(), uInt(body.size()))));
  };
  std::vector<uint8_t> ihdr;
  be32(ihdr, w);
  be32(ihdr, h);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter method, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", {0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01});  // an empty zlib stream
  chunk("IEND", {});
  write_bytes(path, f.data(), f.size());
}

}  // namespace candle::test_models
