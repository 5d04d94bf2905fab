// im2col and its adjoint col2im: the one definition used by the conv forward (conv.cpp) and
// the conv gradients (conv_grad.cpp).
//
// The panel of output positions [p0, p1) (flattened oy * ow + ox) of one image and group has
// row r = (ci * kh + ky) * kw + kx and column p - p0; rows are `ld` apart. Per panel row the
// positions are walked output row by output row (no division per run), and the part of a row
// whose input column lies inside the image is found once per kernel column, so a run costs a
// short copy loop and nothing else. This matters for the small maps of a training step (an
// 8-wide output row makes runs of 8 values).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpu/conv_kernels.h"

namespace candle::cpu::im2col_detail {

// The output columns [lo, hi) of a row whose input column ox * s + off lies in [0, len).
inline void inside(ptrdiff_t off, size_t s, size_t len, size_t n, size_t& lo, size_t& hi) {
  const auto si = static_cast<ptrdiff_t>(s), li = static_cast<ptrdiff_t>(len);
  const ptrdiff_t a = off >= 0 ? 0 : (-off + si - 1) / si;
  const ptrdiff_t b = li - off <= 0 ? 0 : (li - off + si - 1) / si;
  lo = static_cast<size_t>(std::min<ptrdiff_t>(a, static_cast<ptrdiff_t>(n)));
  hi = static_cast<size_t>(std::clamp<ptrdiff_t>(b, static_cast<ptrdiff_t>(lo), static_cast<ptrdiff_t>(n)));
}

template <typename A, typename S>
inline A convert(S v) {
  if constexpr (std::is_same_v<A, S>)
    return v;
  else
    return static_cast<A>(static_cast<float>(v));
}

// d[0..n) = s[0..n). f32 runs of 8 or more go as 32-byte blocks (the last one overlapping)
// written out as fixed-size copies: GCC turns a plain copy loop into a call to memmove, which
// for the 8-value runs of small maps cost more than the copy.
template <typename A, typename S>
inline void copy_run(const S* __restrict s, A* __restrict d, size_t n) {
  if constexpr (std::is_same_v<S, A> && sizeof(A) == 4) {
    if (n >= 8) {
      for (size_t i = 0; i + 8 <= n; i += 8) std::memcpy(d + i, s + i, 32);
      if (n % 8) std::memcpy(d + n - 8, s + n - 8, 32);
      return;
    }
  }
  for (size_t i = 0; i < n; ++i) d[i] = convert<A>(s[i]);
}

// Calls f(oy, ox0, ox1, col) for the runs of output row segments covering [p0, p1): col is the
// panel column of (oy, ox0).
template <typename F>
inline void for_each_run(size_t ow, size_t p0, size_t p1, F&& f) {
  if (p1 <= p0 || ow == 0) return;
  size_t oy = p0 / ow, ox0 = p0 - oy * ow, col = 0;
  while (col < p1 - p0) {
    const size_t ox1 = std::min(ow, ox0 + (p1 - p0 - col));
    f(oy, ox0, ox1, col);
    col += ox1 - ox0;
    ox0 = 0;
    ++oy;
  }
}

}  // namespace candle::cpu::im2col_detail

namespace candle::cpu {

// Writes the im2col panel of positions [p0, p1) of the image `in` (the group's first input
// channel), converting S to A.
template <typename S, typename A>
void im2col(const ConvGeom& g, const S* __restrict in, size_t p0, size_t p1, A* __restrict panel, size_t ld) {
  using namespace im2col_detail;
  const size_t cin = g.cin_g(), ihw = g.ih * g.iw;
  const auto ih = static_cast<ptrdiff_t>(g.ih);
  for (size_t ci = 0; ci < cin; ++ci) {
    const S* chan = in + ci * ihw;
    for (size_t ky = 0; ky < g.kh; ++ky) {
      const ptrdiff_t off_y = static_cast<ptrdiff_t>(ky * g.d_h) - static_cast<ptrdiff_t>(g.pad_h);
      for (size_t kx = 0; kx < g.kw; ++kx) {
        A* dst = panel + ((ci * g.kh + ky) * g.kw + kx) * ld;
        const ptrdiff_t off_x = static_cast<ptrdiff_t>(kx * g.d_w) - static_cast<ptrdiff_t>(g.pad_w);
        size_t lo_all, hi_all;
        inside(off_x, g.s_w, g.iw, g.ow, lo_all, hi_all);
        for_each_run(g.ow, p0, p1, [&](size_t oy, size_t ox0, size_t ox1, size_t col) {
          A* d = dst + col - ox0;  // d[ox]
          const ptrdiff_t iy = static_cast<ptrdiff_t>(oy * g.s_h) + off_y;
          if (iy < 0 || iy >= ih) {
            for (size_t ox = ox0; ox < ox1; ++ox) d[ox] = A(0);
            return;
          }
          const size_t lo = std::clamp(lo_all, ox0, ox1), hi = std::clamp(hi_all, lo, ox1);
          for (size_t ox = ox0; ox < lo; ++ox) d[ox] = A(0);
          const S* r = chan + iy * static_cast<ptrdiff_t>(g.iw) + off_x;  // r[ox * s_w]
          if (g.s_w == 1) {
            if (hi > lo) copy_run(r + lo, d + lo, hi - lo);
          } else {
            for (size_t ox = lo; ox < hi; ++ox) d[ox] = convert<A>(r[ox * g.s_w]);
          }
          for (size_t ox = hi; ox < ox1; ++ox) d[ox] = A(0);
        });
      }
    }
  }
}

// The adjoint of im2col: adds the panel of positions [p0, p1) (rows `ld` apart) into input
// channels [ci0, ci1) of the image `in`. Each input value receives its terms in the fixed order
// (kx, ky, position), whatever the caller's split of the channels.
template <typename C>
void col2im(const ConvGeom& g, const C* __restrict panel, size_t p0, size_t p1, size_t ld, size_t ci0,
            size_t ci1, C* __restrict in) {
  using namespace im2col_detail;
  const size_t ihw = g.ih * g.iw;
  const auto ih = static_cast<ptrdiff_t>(g.ih);
  for (size_t ci = ci0; ci < ci1; ++ci) {
    C* chan = in + ci * ihw;
    // kx outside ky: consecutive passes add rows one input row apart at the same columns, so
    // a pass reads back what the previous one stored at the same addresses (store forwarding
    // works); with kx inside, the next pass re-read stores shifted by one value, which stalled
    // every load
    for (size_t kx = 0; kx < g.kw; ++kx) {
      const ptrdiff_t off_x = static_cast<ptrdiff_t>(kx * g.d_w) - static_cast<ptrdiff_t>(g.pad_w);
      size_t lo_all, hi_all;
      inside(off_x, g.s_w, g.iw, g.ow, lo_all, hi_all);
      for (size_t ky = 0; ky < g.kh; ++ky) {
        const ptrdiff_t off_y = static_cast<ptrdiff_t>(ky * g.d_h) - static_cast<ptrdiff_t>(g.pad_h);
        const C* src = panel + ((ci * g.kh + ky) * g.kw + kx) * ld;
        for_each_run(g.ow, p0, p1, [&](size_t oy, size_t ox0, size_t ox1, size_t col) {
          const ptrdiff_t iy = static_cast<ptrdiff_t>(oy * g.s_h) + off_y;
          if (iy < 0 || iy >= ih) return;
          const C* s = src + col - ox0;  // s[ox]
          const size_t lo = std::clamp(lo_all, ox0, ox1), hi = std::clamp(hi_all, lo, ox1);
          C* r = chan + iy * static_cast<ptrdiff_t>(g.iw) + off_x;  // r[ox * s_w]
          if (g.s_w == 1) {
            for (size_t ox = lo; ox < hi; ++ox) r[ox] += s[ox];
          } else {
            for (size_t ox = lo; ox < hi; ++ox) r[ox * g.s_w] += s[ox];
          }
        });
      }
    }
  }
}

}  // namespace candle::cpu
