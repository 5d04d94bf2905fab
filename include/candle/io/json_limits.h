// Guards for loaders of untrusted JSON (safetensors headers, model.json, graph topologies):
// a nesting-depth check that runs before any parser sees the text (a deep document would
// otherwise overflow the stack of whatever recurses over it: dump(), copies, comparisons),
// and a short excerpt of untrusted text for error messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "candle/error.h"

namespace candle::io {

// The deepest nesting of arrays and objects in `text` (brackets outside strings), counting
// no further than `limit` + 1. Linear time, constant memory, no recursion.
inline size_t json_nesting_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// Throws Error(Parse) "<label>: JSON nests deeper than <max_depth> levels" when it does.
inline void check_json_depth(std::string_view text, size_t max_depth, const std::string& label) {
  if (json_nesting_depth(text, max_depth) > max_depth) {
    throw Error(ErrorKind::Parse,
                label + ": JSON nests deeper than " + std::to_string(max_depth) + " levels");
  }
}

// At most `max` bytes of `s` for an error message, "..." marking a cut.
inline std::string excerpt(std::string_view s, size_t max = 64) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + "...";
}

}  // namespace candle::io
