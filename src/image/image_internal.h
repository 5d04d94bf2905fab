// Shared by the image library's sources.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "candle/error.h"

namespace candle::image::detail {

[[noreturn]] inline void fail(ErrorKind kind, std::string_view name, const std::string& what) {
  throw Error(kind, std::string(name) + ": " + what);
}

// a * b, or false when it does not fit in size_t
inline bool mul_ok(size_t a, size_t b, size_t& out) { return !__builtin_mul_overflow(a, b, &out); }

// The checks every encoder makes first: 1..max_side pixels on a side, 1-4 channels; `format`
// ("PNG", "JPEG") and `limit` (what sets max_side) name them in the error.
inline void check_encode_shape(const char* format, size_t width, size_t height, size_t channels,
                               size_t max_side, const char* limit) {
  if (width == 0 || height == 0 || width > max_side || height > max_side) {
    throw Error(ErrorKind::InvalidArgument, std::string(format) + ": cannot encode " + std::to_string(width) +
                                                "x" + std::to_string(height) + " (" + limit +
                                                std::to_string(max_side) + " pixels on a side)");
  }
  if (channels < 1 || channels > 4) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(format) + ": cannot encode " + std::to_string(channels) + " channels (1-4)");
  }
}

}  // namespace candle::image::detail
