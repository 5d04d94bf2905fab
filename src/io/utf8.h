// UTF-8 validation shared by the file readers and writers (safetensors headers, GGUF keys and
// tensor names): well-formed sequences only (no overlong forms, surrogates or code points past
// U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace candle::io {

inline bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (len > s.size() - i) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinCodePoint[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace candle::io
