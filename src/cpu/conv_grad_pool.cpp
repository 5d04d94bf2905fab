// CPU gradients of pooling, resizing and the conv bias.
//
// Pooling and resizing work plane by plane ((b, c) pairs, split over threads): each plane of
// the input gradient is zeroed and then receives the adds of the output cells in row-major
// order, all by one thread, so the bytes do not depend on the thread count. The bias gradient
// is parallel over channels, each channel summed by one thread in a fixed order.
//
// Rules (those of the forwards in src/cpu/pool.cpp, which follow PyTorch):
//  - max_pool2d: an output's gradient goes to the first maximal position of its window
//    (row-major, strict >); a NaN takes the place of the maximum, and of two NaNs the later one
//    wins, as in PyTorch 1.13's CPU kernel (`val > max || isnan(val)`); a window of -inf
//    gives its first position. Overlapping windows add.
//  - avg_pool2d: each input cell gets grad / (k_h * k_w) of every window covering it.
//  - nearest: src = floor(dst * in / out) exactly (the forward's mapping).
//  - bilinear: the forward's taps (PyTorch's area_pixel_compute_source_index), weights in
//    f64 rounded to the compute type; the same size is the identity.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "cpu/clones.h"
#include "cpu/dense.h"
#include "cpu/max2x2.h"
#include "cpu/parallel.h"
#include "cpu/resize_index.h"
#include "cpu/strided.h"

namespace candle {
namespace cpu {
namespace {

void check_bounds(const char* op, const Layout& l, const CpuStorage& s) {
  if (l.max_offset_exclusive() > s.elem_count()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": layout out of the storage's bounds");
  }
}

// Per-thread scratch of the plane kernels.
template <typename C>
struct PlaneScratch {
  std::vector<C> a, b;
  std::vector<uint32_t> idx;
};

// Runs fn(plane, C* dx_plane, const C* gy_plane, PlaneScratch<C>&) over the planes of a [planes, in_n] result
// from a dense gy [planes, out_n] (dtype of `gs`), and returns the result in gs's dtype.
template <typename Fn>
StoragePtr per_plane(const CpuStorage& gs, const Layout& gl, size_t planes, size_t in_n, size_t out_n,
                     const char* op, Fn&& fn, bool zero_fill = true) {
  check_bounds(op, gl, gs);
  return dispatch_float(gs.dtype(), op, [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    auto out = CpuStorage::alloc(gs.dtype(), planes * in_n);
    if (planes * in_n == 0) return out;
    std::unique_ptr<C[]> gk;
    const C* gy = dense_as<T, C>(gs, gl, gk);
    const size_t grain = kParallelGrain / std::max<size_t>(in_n + out_n, 1) + 1;
    parallel_for(planes, grain, [&](size_t p0, size_t p1) {
      std::vector<C> buf(std::is_same_v<T, C> ? 0 : in_n);
      PlaneScratch<C> scratch;
      for (size_t p = p0; p < p1; ++p) {
        C* dx = std::is_same_v<T, C> ? reinterpret_cast<C*>(out->template data<T>() + p * in_n) : buf.data();
        if (zero_fill) std::fill(dx, dx + in_n, C(0));
        fn.template operator()<T, C>(p, dx, gy + p * out_n, scratch);
        if constexpr (!std::is_same_v<T, C>) {
          T* dst = out->template data<T>() + p * in_n;
          for (size_t i = 0; i < in_n; ++i) dst[i] = T(dx[i]);
        }
      }
    });
    return out;
  });
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CANDLE_POOLGRAD_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_POOLGRAD_CLONES
#endif

// One kernel tap for a row of windows: m[o], at[o] become r[o * s], base + o * s where that
// is larger or NaN (the PyTorch rule, evaluated in row-major window order by the caller).
// Branch-free (bit masks): the outcome of each comparison is data-dependent, and as branches
// they mispredicted on half of the elements.
template <typename C, size_t SW>
CANDLE_POOLGRAD_CLONES void max_tap(const C* __restrict r, size_t sw, size_t ow, uint32_t base,
                                    C* __restrict m, uint32_t* __restrict at) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  const size_t s = SW ? SW : sw;
  for (size_t o = 0; o < ow; ++o) {
    const C v = r[o * s], cur = m[o];
    const uint32_t take = static_cast<uint32_t>(v > cur) | static_cast<uint32_t>(v != v);
    const Bits mask = Bits(0) - Bits(take);
    const Bits mb = std::bit_cast<Bits>(cur), vb = std::bit_cast<Bits>(v);
    m[o] = std::bit_cast<C>((mb & ~mask) | (vb & mask));
    const uint32_t imask = 0u - take;
    at[o] = (at[o] & ~imask) | ((base + static_cast<uint32_t>(o * s)) & imask);
  }
}

// The gradient of one row of 2x2 stride-2 windows tiling rows r0, r1 (f32): each window's
// gradient g[o] goes to the element the forward picked, the other three get 0; d0, d1 are the
// gradient rows of r0, r1, every element written.
CANDLE_POOLGRAD_CLONES void max_2x2_grad_row(const float* __restrict r0, const float* __restrict r1,
                                             const float* __restrict g, size_t ow, float* __restrict d0,
                                             float* __restrict d1) {
  using max2x2::I8;
  using max2x2::V8;
  size_t o = 0;
  for (; o + 8 <= ow; o += 8) {
    I8 k;
    V8 m;
    max2x2::windows(r0 + 2 * o, r1 + 2 * o, m, k);
    V8 gv;
    std::memcpy(&gv, g + o, sizeof(gv));
    const V8 z{};
    max2x2::join(k == 0 ? gv : z, k == 1 ? gv : z, d0 + 2 * o);
    max2x2::join(k == 2 ? gv : z, k == 3 ? gv : z, d1 + 2 * o);
  }
  if (o < ow) {
    const size_t n = ow - o;
    I8 k;
    V8 m, gv{};
    max2x2::tail_windows(r0 + 2 * o, r1 + 2 * o, n, m, k);
    std::memcpy(&gv, g + o, n * sizeof(float));
    const V8 z{};
    float t0[16], t1[16];
    max2x2::join(k == 0 ? gv : z, k == 1 ? gv : z, t0);
    max2x2::join(k == 2 ? gv : z, k == 3 ? gv : z, t1);
    std::memcpy(d0 + 2 * o, t0, 2 * n * sizeof(float));
    std::memcpy(d1 + 2 * o, t1, 2 * n * sizeof(float));
  }
}

// The same step for one candidate (the fused 2x2 stride-2 path).
template <typename C>
inline void max_pick(C v, uint32_t idx, C& m, uint32_t& at) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  const uint32_t take = static_cast<uint32_t>(v > m) | static_cast<uint32_t>(v != v);
  const Bits mask = Bits(0) - Bits(take);
  m = std::bit_cast<C>((std::bit_cast<Bits>(m) & ~mask) | (std::bit_cast<Bits>(v) & mask));
  const uint32_t imask = 0u - take;
  at = (at & ~imask) | (idx & imask);
}

template <typename C>
void max_tap_any(const C* r, size_t sw, size_t ow, uint32_t base, C* m, uint32_t* at) {
  if (sw == 1)
    max_tap<C, 1>(r, sw, ow, base, m, at);
  else if (sw == 2)
    max_tap<C, 2>(r, sw, ow, base, m, at);
  else
    max_tap<C, 0>(r, sw, ow, base, m, at);
}

void check_pool(const char* op, size_t h, size_t w, std::array<size_t, 2> k, std::array<size_t, 2> s) {
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0 || k[0] > h || k[1] > w) {
    throw Error(ErrorKind::Internal, std::string(op) + ": invalid kernel (" + std::to_string(k[0]) + ", " +
                                         std::to_string(k[1]) + ") / stride (" + std::to_string(s[0]) + ", " +
                                         std::to_string(s[1]) + ") for input " + std::to_string(h) + "x" +
                                         std::to_string(w));
  }
}

}  // namespace
}  // namespace cpu

StoragePtr CpuStorage::conv_bias_grad(const Layout& g_l) const {
  const char* op = "conv_bias_grad";
  const auto& d = g_l.dims();
  if (d.size() < 2) throw Error(ErrorKind::Internal, std::string(op) + ": grad_out must have rank >= 2");
  cpu::check_bounds(op, g_l, *this);
  const size_t b = d[0], c = d[1], r = g_l.elem_count() / std::max<size_t>(b * c, 1);
  return dispatch_float(dtype_, op, [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    auto out = CpuStorage::alloc(dtype_, c);
    std::unique_ptr<C[]> gk;
    const C* gy = b * c * r == 0 ? nullptr : cpu::dense_as<T, C>(*this, g_l, gk);
    T* o = out->template data<T>();
    constexpr size_t L = 16;  // independent partial sums (vectorizes; fixed order)
    cpu::parallel_for(c, cpu::kParallelGrain / std::max<size_t>(b * r, 1) + 1, [&](size_t c0, size_t c1) {
      for (size_t ch = c0; ch < c1; ++ch) {
        C lanes[L] = {};
        C tail = C(0);
        for (size_t bi = 0; bi < b; ++bi) {
          const C* row = gy + (bi * c + ch) * r;
          size_t i = 0;
          for (; i + L <= r; i += L)
            for (size_t j = 0; j < L; ++j) lanes[j] += row[i + j];
          for (; i < r; ++i) tail += row[i];
        }
        C s = C(0);
        for (size_t j = 0; j < L; ++j) s += lanes[j];
        o[ch] = T(s + tail);
      }
    });
    return out;
  });
}

StoragePtr CpuStorage::max_pool2d_grad(const Layout& x_l, const BackendStorage& grad_out, const Layout& g_l,
                                       std::array<size_t, 2> k, std::array<size_t, 2> st) const {
  const char* op = "max_pool2d_grad";
  const auto* gsp = dynamic_cast<const CpuStorage*>(&grad_out);
  if (!gsp || gsp->dtype() != dtype_) {
    throw Error(ErrorKind::Internal,
                std::string(op) + ": grad_out is not a cpu storage of the input's dtype");
  }
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto d4 = x_l.shape().dims4(op);
  const size_t b = d4[0], c = d4[1], h = d4[2], w = d4[3];
  cpu::check_pool(op, h, w, k, st);
  cpu::check_bounds(op, x_l, *this);
  const size_t oh = (h - k[0]) / st[0] + 1, ow = (w - k[1]) / st[1] + 1;
  if (g_l.shape() != Shape{b, c, oh, ow}) {
    throw Error(ErrorKind::Internal, std::string(op) + ": grad_out layout " + g_l.shape().to_string() +
                                         " does not match the pooled shape");
  }
  const auto& xs = x_l.stride();
  const size_t xoff = x_l.start_offset();
  const size_t kh = k[0], kw = k[1], sh = st[0], sw = st[1];
  if (h * w > UINT32_MAX)
    throw Error(ErrorKind::UnsupportedOp, std::string(op) + ": planes of 2^32 elements or more");
  const size_t used_w = (ow - 1) * sw + kw;  // the columns windows read
  const bool exact = kh == 2 && kw == 2 && sh == 2 && sw == 2 && xs[3] == 1 && h == 2 * oh && w == 2 * ow &&
                     dtype_ != DType::F16 && dtype_ != DType::BF16 && dtype_ != DType::F8E4M3;
  return cpu::per_plane(
      *gsp, g_l, b * c, h * w, oh * ow, op,
      [&]<typename T, typename C>(size_t p, C* dx, const C* gy, cpu::PlaneScratch<C>& s) {
        const T* xp = data<T>() + xoff + (p / c) * xs[0] + (p % c) * xs[1];
        s.a.resize(ow);
        s.b.resize(used_w);
        s.idx.resize(ow);
        C* m = s.a.data();
        uint32_t* at = s.idx.data();
        const bool fused = kh == 2 && kw == 2 && sh == 2 && sw == 2 && xs[3] == 1 && std::is_same_v<T, C>;
        // 2x2 windows tiling the plane exactly: every element is written once (no zero fill)
        for (size_t oy = 0; exact && oy < oh; ++oy) {
          const auto* r0 = reinterpret_cast<const C*>(xp + 2 * oy * xs[2]);
          const C* r1 = reinterpret_cast<const C*>(reinterpret_cast<const T*>(r0) + xs[2]);
          C* d0 = dx + 2 * oy * w;
          C* d1 = d0 + w;
          const C* g = gy + oy * ow;
          if constexpr (std::is_same_v<T, float>) {
            cpu::max_2x2_grad_row(r0, r1, g, ow, d0, d1);
            continue;
          }
          for (size_t o = 0; o < ow; ++o) {
            C mo = r0[2 * o];
            uint32_t k = 0;
            cpu::max_pick(r0[2 * o + 1], 1u, mo, k);
            cpu::max_pick(r1[2 * o], 2u, mo, k);
            cpu::max_pick(r1[2 * o + 1], 3u, mo, k);
            const C gv = g[o];
            d0[2 * o] = k == 0 ? gv : C(0);
            d0[2 * o + 1] = k == 1 ? gv : C(0);
            d1[2 * o] = k == 2 ? gv : C(0);
            d1[2 * o + 1] = k == 3 ? gv : C(0);
          }
        }
        for (size_t oy = 0; fused && !exact && oy < oh; ++oy) {
          const auto* r0 = reinterpret_cast<const C*>(xp + 2 * oy * xs[2]);
          const C* r1 = reinterpret_cast<const C*>(reinterpret_cast<const T*>(r0) + xs[2]);
          const auto i0 = static_cast<uint32_t>(2 * oy * w), i1 = static_cast<uint32_t>(i0 + w);
          const C* g = gy + oy * ow;
          for (size_t o = 0; o < ow; ++o) {
            C mo = r0[2 * o];
            uint32_t ao = i0 + static_cast<uint32_t>(2 * o);
            cpu::max_pick(r0[2 * o + 1], ao + 1, mo, ao);
            cpu::max_pick(r1[2 * o], i1 + static_cast<uint32_t>(2 * o), mo, ao);
            cpu::max_pick(r1[2 * o + 1], i1 + static_cast<uint32_t>(2 * o + 1), mo, ao);
            dx[ao] += g[o];
          }
        }
        for (size_t oy = 0; !fused && oy < oh; ++oy) {
          for (size_t ki = 0; ki < kh; ++ki) {
            const size_t iy = oy * sh + ki;
            const T* src = xp + iy * xs[2];
            const C* row;
            if (std::is_same_v<T, C> && xs[3] == 1) {
              row = reinterpret_cast<const C*>(src);
            } else {
              for (size_t i = 0; i < used_w; ++i) s.b[i] = static_cast<C>(src[i * xs[3]]);
              row = s.b.data();
            }
            if (ki == 0) {  // the window's first element starts the search
              for (size_t o = 0; o < ow; ++o) {
                m[o] = row[o * sw];
                at[o] = static_cast<uint32_t>(iy * w + o * sw);
              }
            }
            for (size_t kj = ki == 0 ? 1 : 0; kj < kw; ++kj)
              cpu::max_tap_any<C>(row + kj, sw, ow, static_cast<uint32_t>(iy * w + kj), m, at);
          }
          const C* g = gy + oy * ow;
          for (size_t o = 0; o < ow; ++o) dx[at[o]] += g[o];
        }
      },
      !exact);
}

StoragePtr CpuStorage::avg_pool2d_grad(const Layout& g_l, size_t in_h, size_t in_w, std::array<size_t, 2> k,
                                       std::array<size_t, 2> st) const {
  const char* op = "avg_pool2d_grad";
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto d4 = g_l.shape().dims4(op);
  const size_t b = d4[0], c = d4[1], oh = d4[2], ow = d4[3];
  cpu::check_pool(op, in_h, in_w, k, st);
  if (oh != (in_h - k[0]) / st[0] + 1 || ow != (in_w - k[1]) / st[1] + 1) {
    throw Error(ErrorKind::Internal, std::string(op) + ": grad_out layout " + g_l.shape().to_string() +
                                         " does not match the pooled shape");
  }
  const size_t kh = k[0], kw = k[1], sh = st[0], sw = st[1];
  return cpu::per_plane(*this, g_l, b * c, in_h * in_w, oh * ow, op,
                        [&]<typename T, typename C>(size_t, C* dx, const C* gy, cpu::PlaneScratch<C>&) {
                          const C div = static_cast<C>(kh * kw);
                          for (size_t oy = 0; oy < oh; ++oy) {
                            for (size_t ki = 0; ki < kh; ++ki) {
                              C* row = dx + (oy * sh + ki) * in_w;
                              for (size_t ox = 0; ox < ow; ++ox) {
                                const C v = gy[oy * ow + ox] / div;
                                C* r = row + ox * sw;
                                for (size_t kj = 0; kj < kw; ++kj) r[kj] += v;
                              }
                            }
                          }
                        });
}

namespace {
StoragePtr nearest_grad(const CpuStorage& s, const Layout& g_l, size_t b, size_t c, size_t in_h, size_t in_w,
                        size_t out_h, size_t out_w, const char* op) {
  if ((in_h == 0 || in_w == 0) && out_h * out_w != 0) {
    throw Error(ErrorKind::Internal, std::string(op) + ": empty input with a non-empty output");
  }
  const std::vector<size_t> hi = in_h ? cpu::nearest_indices(in_h, out_h) : std::vector<size_t>{};
  const std::vector<size_t> wi = in_w ? cpu::nearest_indices(in_w, out_w) : std::vector<size_t>{};
  return cpu::per_plane(s, g_l, b * c, in_h * in_w, out_h * out_w, op,
                        [&]<typename T, typename C>(size_t, C* dx, const C* gy, cpu::PlaneScratch<C>&) {
                          for (size_t y = 0; y < out_h; ++y) {
                            C* row = dx + hi[y] * in_w;
                            const C* g = gy + y * out_w;
                            for (size_t x = 0; x < out_w; ++x) row[wi[x]] += g[x];
                          }
                        });
}
}  // namespace

StoragePtr CpuStorage::upsample_nearest1d_grad(const Layout& g_l, size_t in_l) const {
  const char* op = "upsample_nearest1d_grad";
  auto [b, c, out_l] = g_l.shape().dims3(op);
  return nearest_grad(*this, g_l, b, c, 1, in_l, 1, out_l, op);
}

StoragePtr CpuStorage::upsample_nearest2d_grad(const Layout& g_l, size_t in_h, size_t in_w) const {
  const char* op = "upsample_nearest2d_grad";
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto d4 = g_l.shape().dims4(op);
  const size_t b = d4[0], c = d4[1], out_h = d4[2], out_w = d4[3];
  return nearest_grad(*this, g_l, b, c, in_h, in_w, out_h, out_w, op);
}

StoragePtr CpuStorage::upsample_bilinear2d_grad(const Layout& g_l, size_t in_h, size_t in_w,
                                                bool align_corners, std::optional<double> scale_h,
                                                std::optional<double> scale_w) const {
  const char* op = "upsample_bilinear2d_grad";
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto d4 = g_l.shape().dims4(op);
  const size_t b = d4[0], c = d4[1], out_h = d4[2], out_w = d4[3];
  if ((in_h == 0 || in_w == 0) && out_h * out_w != 0) {
    throw Error(ErrorKind::Internal, std::string(op) + ": empty input with a non-empty output");
  }
  if (in_h == out_h && in_w == out_w) {  // the forward is a copy
    cpu::check_bounds(op, g_l, *this);
    dispatch_float(dtype_, op, [&]<typename T>() {});
    auto out = CpuStorage::alloc(dtype_, g_l.elem_count());
    if (out->elem_count()) copy_strided_src(*out, 0, g_l);
    return out;
  }
  const cpu::LinearTaps th = in_h ? cpu::linear_taps(in_h, out_h, align_corners, scale_h) : cpu::LinearTaps{};
  const cpu::LinearTaps tw = in_w ? cpu::linear_taps(in_w, out_w, align_corners, scale_w) : cpu::LinearTaps{};
  return cpu::per_plane(*this, g_l, b * c, in_h * in_w, out_h * out_w, op,
                        [&]<typename T, typename C>(size_t, C* dx, const C* gy, cpu::PlaneScratch<C>& s) {
                          s.a.resize(2 * out_w);
                          s.b.resize(in_w);
                          C* lw0 = s.a.data();
                          C* lw1 = lw0 + out_w;
                          C* tmp = s.b.data();
                          for (size_t x = 0; x < out_w; ++x) {
                            lw0[x] = static_cast<C>(tw.l0[x]);
                            lw1[x] = static_cast<C>(tw.l1[x]);
                          }
                          for (size_t y = 0; y < out_h; ++y) {
                            std::fill(tmp, tmp + in_w, C(0));
                            const C* g = gy + y * out_w;
                            for (size_t x = 0; x < out_w; ++x) {
                              tmp[tw.i0[x]] += lw0[x] * g[x];
                              tmp[tw.i1[x]] += lw1[x] * g[x];
                            }
                            C* r0 = dx + th.i0[y] * in_w;
                            C* r1 = dx + th.i1[y] * in_w;
                            const C l0 = static_cast<C>(th.l0[y]), l1 = static_cast<C>(th.l1[y]);
                            for (size_t i = 0; i < in_w; ++i) r0[i] += l0 * tmp[i];
                            for (size_t i = 0; i < in_w; ++i) r1[i] += l1 * tmp[i];
                          }
                        });
}

}  // namespace candle
