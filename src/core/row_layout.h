// For backends' row kernels (softmax, norms, ...): whether the rows of a layout (its last dim)
// can be read in place, as rows of `d` elements `row_stride` apart.
#pragma once

#include <cstddef>
#include <optional>

#include "candle/layout.h"

namespace candle {

// The distance between consecutive rows of l when its last dim is dense (or of length 1) and
// its other dims fold into one row stride (narrowed last dims, broadcast rows); nullopt when
// the rows must be made dense first.
inline std::optional<size_t> uniform_row_stride(const Layout& l) {
  const auto& dims = l.dims();
  const auto& st = l.stride();
  const size_t r = dims.size(), d = dims.back();
  if (!(d == 1 || st[r - 1] == 1)) return std::nullopt;
  size_t row_stride = d, expect = 0;
  bool have = false;
  for (size_t i = r - 1; i-- > 0;) {
    if (dims[i] == 1) continue;
    if (!have) {
      row_stride = st[i];
      have = true;
    } else if (st[i] != expect) {
      return std::nullopt;
    }
    expect = st[i] * dims[i];
  }
  return row_stride;
}

}  // namespace candle
