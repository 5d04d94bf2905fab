// The tile geometry shared by Rdn::forward_tiled and Rdn::upscale.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

namespace candle::models::detail {

// The extended range [e0, e1) that core [c0, c1) of an axis of n pixels is computed from: `halo`
// more on each side, clipped to the axis, its start aligned down to a multiple of `align`.
inline std::pair<size_t, size_t> tile_extent(size_t c0, size_t c1, size_t n, size_t halo, size_t align) {
  size_t e0 = c0 > halo ? c0 - halo : 0;
  e0 -= e0 % align;
  return {e0, std::min(n, c1 + halo)};
}

}  // namespace candle::models::detail
