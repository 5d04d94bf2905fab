// PNG decoding for the model tests (candle::image).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "candle/candle.h"

namespace candle::test_models {

// An image file as a [1, 3, h, w] f32 tensor with values 0..255 (alpha dropped).
Tensor load_rgb(const std::string& path);

// Writes raw bytes to a file (for the synthetic models and hostile inputs).
void write_bytes(const std::string& path, const void* data, size_t n);
void write_text(const std::string& path, const std::string& text);
// A PNG of w x h RGB whose IDAT holds a few bytes only (a header that claims the size).
void write_png_header_only(const std::string& path, uint32_t w, uint32_t h);

}  // namespace candle::test_models
