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

}  // namespace candle::image::detail
