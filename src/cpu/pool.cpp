// CPU pooling and resizing over [b, c, h, w] (and [b, c, l] for nearest 1-D).
//
// Every kernel works output row by output row: the rows (b, c, out_h) are split over threads
// by cpu::parallel_for and each output element is computed by exactly one thread with a fixed
// operation order, so the bytes do not depend on the thread count.
//
// Source rows are read in place when they are contiguous and already in the compute type;
// otherwise (strided / broadcast rows, f16/bf16/f8 inputs) they are first gathered into a
// per-thread buffer in the compute type. The inner loops then only see unit-stride arrays.
//
// Semantics (candle, which follows PyTorch):
//  - pooling: no padding, out = (in - k) / s + 1; avg divides the window sum (summed row by
//    row, left to right, in f32 for the 16/8-bit floats) by k_h * k_w; max propagates NaN as
//    PyTorch does (candle's CPU kernel skips a NaN that is not the first window element: a
//    bug we do not copy);
//  - nearest: src = floor(dst * in / out) exactly (see cpu/resize_index.h for candle's f64 slip);
//  - bilinear: PyTorch's area_pixel_compute_source_index; the scale is (in - 1) / (out - 1)
//    with align_corners, else 1 / scale_factor when given, else in / out, and 1 for a dim whose
//    size does not change (PyTorch 1.13 too). Indices and weights
//    are computed in f64 (candle), the blend in f32 (f64 for f64 inputs).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "candle/backend/cpu_storage.h"
#include "cpu/clones.h"
#include "cpu/max2x2.h"
#include "cpu/parallel.h"
#include "cpu/resize_index.h"

namespace candle {
namespace {

using cpu::LinearTaps;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CANDLE_POOL_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_POOL_CLONES
#endif

// The input viewed as planes (b, c) of h x w elements with arbitrary strides.
struct Planes {
  size_t b, c, h, w;
  size_t sb, sc, sh, sw;
  size_t off;
  size_t plane_offset(size_t p) const { return off + (p / c) * sb + (p % c) * sc; }
};

Planes planes4(const Layout& l, const char* op) {
  auto [b, c, h, w] = l.shape().dims4(op);
  const auto& s = l.stride();
  return Planes{b, c, h, w, s[0], s[1], s[2], s[3], l.start_offset()};
}

Planes planes3(const Layout& l, const char* op) {
  auto [b, c, n] = l.shape().dims3(op);
  const auto& s = l.stride();
  return Planes{b, c, 1, n, s[0], s[1], 0, s[2], l.start_offset()};
}

// Output rows (over all planes) processed per parallel chunk: about kParallelGrain elements.
size_t row_grain(size_t row_len) { return cpu::kParallelGrain / std::max<size_t>(row_len, 1) + 1; }

// The type arithmetic runs in: f32 for the small floats, the type itself otherwise.
template <typename T>
using acc_of = compute_t<T>;

// Reads source row `src` (n elements, element stride `stride`) as a contiguous array of A:
// in place when possible, else into `buf`.
template <typename T, typename A>
const A* load_row(const T* src, size_t n, size_t stride, A* buf) {
  if constexpr (std::is_same_v<T, A>) {
    if (stride == 1) return src;
    for (size_t i = 0; i < n; ++i) buf[i] = src[i * stride];
  } else {
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<A>(src[i * stride]);
  }
  return buf;
}

template <typename T, typename A>
void store_row(const A* src, size_t n, T* dst) {
  if constexpr (std::is_same_v<T, A>) {
    std::memcpy(dst, src, n * sizeof(T));
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  }
}

// ---- pooling ---------------------------------------------------------------------------------

// acc[o] += r[o * SW + kj] for each kernel column (SW == 0: the runtime stride `sw`).
template <typename A, size_t SW>
CANDLE_POOL_CLONES void avg_accumulate(const A* __restrict r, size_t kw, size_t sw, size_t ow,
                                       A* __restrict acc) {
  const size_t s = SW ? SW : sw;
  for (size_t kj = 0; kj < kw; ++kj)
    for (size_t o = 0; o < ow; ++o) acc[o] += r[o * s + kj];
}

template <typename A, size_t SW>
CANDLE_POOL_CLONES void max_accumulate(const A* __restrict r, size_t kw, size_t sw, size_t ow,
                                       A* __restrict acc) {
  const size_t s = SW ? SW : sw;
  for (size_t kj = 0; kj < kw; ++kj) {
    for (size_t o = 0; o < ow; ++o) {
      A v = r[o * s + kj];
      if constexpr (std::is_floating_point_v<A>) {
        acc[o] = (v > acc[o] || v != v) ? v : acc[o];
      } else {
        acc[o] = v > acc[o] ? v : acc[o];
      }
    }
  }
}

// The 2x2, stride 2 window in one pass: ((0 + a) + b + c) + d, the generic order.
template <typename A>
CANDLE_POOL_CLONES void avg_2x2(const A* __restrict r0, const A* __restrict r1, size_t ow,
                                A* __restrict out) {
  for (size_t o = 0; o < ow; ++o) {
    A s = A(0);
    s += r0[2 * o];
    s += r0[2 * o + 1];
    s += r1[2 * o];
    s += r1[2 * o + 1];
    out[o] = s / A(4);
  }
}

template <typename A>
CANDLE_POOL_CLONES void max_2x2(const A* __restrict r0, const A* __restrict r1, size_t ow,
                                A* __restrict out) {
  size_t o = 0;
  if constexpr (std::is_same_v<A, float>) {  // eight windows at a time, same picks
    for (; o + 8 <= ow; o += 8) {
      cpu::max2x2::I8 which;
      cpu::max2x2::V8 m;
      cpu::max2x2::windows(r0 + 2 * o, r1 + 2 * o, m, which);
      std::memcpy(out + o, &m, sizeof(m));
    }
    if (o < ow) {
      cpu::max2x2::I8 which;
      cpu::max2x2::V8 m;
      cpu::max2x2::tail_windows(r0 + 2 * o, r1 + 2 * o, ow - o, m, which);
      std::memcpy(out + o, &m, (ow - o) * sizeof(float));
      return;
    }
  }
  for (; o < ow; ++o) {
    A m = r0[2 * o];
    const A vs[3] = {r0[2 * o + 1], r1[2 * o], r1[2 * o + 1]};
    for (A v : vs) {
      if constexpr (std::is_floating_point_v<A>) {
        m = (v > m || v != v) ? v : m;
      } else {
        m = v > m ? v : m;
      }
    }
    out[o] = m;
  }
}

template <typename A>
void accumulate_row(bool is_max, const A* r, size_t kw, size_t sw, size_t ow, A* acc) {
  if (is_max) {
    if (sw == 1)
      max_accumulate<A, 1>(r, kw, sw, ow, acc);
    else if (sw == 2)
      max_accumulate<A, 2>(r, kw, sw, ow, acc);
    else
      max_accumulate<A, 0>(r, kw, sw, ow, acc);
  } else {
    if (sw == 1)
      avg_accumulate<A, 1>(r, kw, sw, ow, acc);
    else if (sw == 2)
      avg_accumulate<A, 2>(r, kw, sw, ow, acc);
    else
      avg_accumulate<A, 0>(r, kw, sw, ow, acc);
  }
}

template <typename T>
void pool2d_typed(const T* src, const Planes& p, std::array<size_t, 2> k, std::array<size_t, 2> st,
                  bool is_max, T* dst) {
  using A = acc_of<T>;
  const size_t kh = k[0], kw = k[1], sh = st[0], sw = st[1];
  const size_t oh = (p.h - kh) / sh + 1, ow = (p.w - kw) / sw + 1;
  const size_t rows = p.b * p.c * oh;
  // Only the first (ow - 1) * sw + kw columns of a row are read.
  const size_t used_w = (ow - 1) * sw + kw;
  const bool fused = kh == 2 && kw == 2 && sh == 2 && sw == 2;
  cpu::parallel_for(rows, row_grain(ow * kh * kw), [&](size_t begin, size_t end) {
    std::vector<A> rowbuf(kh * used_w);
    std::vector<A> acc(ow);
    std::vector<const A*> rp(kh);
    for (size_t r = begin; r < end; ++r) {
      const size_t plane = r / oh, y = r % oh;
      const T* base = src + p.plane_offset(plane) + y * sh * p.sh;
      for (size_t ki = 0; ki < kh; ++ki)
        rp[ki] = load_row<T, A>(base + ki * p.sh, used_w, p.sw, rowbuf.data() + ki * used_w);
      T* out = dst + r * ow;
      A* res = std::is_same_v<T, A> ? reinterpret_cast<A*>(out) : acc.data();
      if (fused) {
        if (is_max)
          max_2x2<A>(rp[0], rp[1], ow, res);
        else
          avg_2x2<A>(rp[0], rp[1], ow, res);
      } else {
        if (is_max) {
          for (size_t o = 0; o < ow; ++o) res[o] = rp[0][o * sw];
        } else {
          std::fill(res, res + ow, A(0));
        }
        for (size_t ki = 0; ki < kh; ++ki) accumulate_row<A>(is_max, rp[ki], kw, sw, ow, res);
        if (!is_max) {
          const A div = static_cast<A>(kh * kw);
          for (size_t o = 0; o < ow; ++o) res[o] = res[o] / div;
        }
      }
      if constexpr (!std::is_same_v<T, A>) store_row<T, A>(res, ow, out);
    }
  });
}

// ---- nearest ---------------------------------------------------------------------------------

// dst[i * S + j] = src[i] for j < S.
template <typename E, size_t S>
CANDLE_POOL_CLONES void replicate(const E* __restrict src, size_t n, E* __restrict dst) {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < S; ++j) dst[i * S + j] = src[i];
}

template <typename E>
void replicate_n(const E* __restrict src, size_t n, size_t s, E* __restrict dst) {
  for (size_t i = 0; i < n; ++i) std::fill(dst + i * s, dst + (i + 1) * s, src[i]);
}

template <typename E>
CANDLE_POOL_CLONES void gather_row(const E* __restrict src, const size_t* __restrict offs, size_t n,
                                   E* __restrict dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[offs[i]];
}

// Copies n bytes with non-temporal stores where dst is 16-byte aligned: for outputs far larger
// than the caches, this skips the read-for-ownership of every destination line.
void stream_copy(std::byte* dst, const std::byte* src, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (size_t j = 0; j < 64; j += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + j));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + j), v);
    }
  }
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

// Outputs above this many bytes are written around the caches (see stream_copy).
constexpr size_t kStreamBytes = size_t{64} << 20;

// Nearest resizing of `p` to (out_h, out_w); E is an unsigned type of the element's size.
template <typename E>
void nearest_typed(const E* src, const Planes& p, size_t out_h, size_t out_w, E* dst) {
  const std::vector<size_t> hidx = cpu::nearest_indices(p.h, out_h);
  const std::vector<size_t> widx = cpu::nearest_indices(p.w, out_w);
  // Integer upsampling factor along w on a contiguous row: widx[i] == i / s.
  size_t rep = 0;
  if (p.sw == 1 && out_w % p.w == 0) {
    const size_t s = out_w / p.w;
    bool ok = true;
    for (size_t i = 0; i < out_w && ok; ++i) ok = widx[i] == i / s;
    if (ok) rep = s;
  }
  std::vector<size_t> woff(out_w);
  for (size_t i = 0; i < out_w; ++i) woff[i] = widx[i] * p.sw;
  const size_t rows = p.b * p.c * out_h;
  const bool stream = rows * out_w * sizeof(E) > kStreamBytes;
  cpu::parallel_for(rows, row_grain(out_w), [&](size_t begin, size_t end) {
    // With streaming stores the first row of each run is built in `first` (cached), copied
    // out, and the run's repeats are streamed from it.
    std::vector<E> first(stream ? out_w : 0);
    const E* last = nullptr;  // the last row built
    for (size_t r = begin; r < end; ++r) {
      const size_t plane = r / out_h, y = r % out_h;
      E* out = dst + r * out_w;
      // Rows that repeat the previous output row's source row are copies of it.
      if (last && y > 0 && hidx[y] == hidx[y - 1]) {
        if (stream) {
          stream_copy(reinterpret_cast<std::byte*>(out), reinterpret_cast<const std::byte*>(last),
                      out_w * sizeof(E));
        } else {
          std::memcpy(out, out - out_w, out_w * sizeof(E));
        }
        continue;
      }
      E* build = stream ? first.data() : out;
      const E* row = src + p.plane_offset(plane) + hidx[y] * p.sh;
      switch (rep) {
        case 0: gather_row<E>(row, woff.data(), out_w, build); break;
        case 1: std::memcpy(build, row, out_w * sizeof(E)); break;
        case 2: replicate<E, 2>(row, p.w, build); break;
        case 4: replicate<E, 4>(row, p.w, build); break;
        case 8: replicate<E, 8>(row, p.w, build); break;
        default: replicate_n<E>(row, p.w, rep, build); break;
      }
      if (stream) {
        stream_copy(reinterpret_cast<std::byte*>(out), reinterpret_cast<const std::byte*>(build),
                    out_w * sizeof(E));
      }
      last = build;
    }
#if defined(__SSE2__)
    if (stream) _mm_sfence();
#endif
  });
}

std::shared_ptr<CpuStorage> nearest(const CpuStorage& s, const Planes& p, size_t out_h, size_t out_w,
                                    const char* op) {
  const size_t n = p.b * p.c * out_h * out_w;
  auto out = CpuStorage::alloc(s.dtype(), n);
  if (n == 0) return out;
  if (p.h == 0 || p.w == 0) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + ": cannot resize an empty input to a non-empty output");
  }
  switch (dtype_size(s.dtype())) {
    case 1: nearest_typed<uint8_t>(s.data<uint8_t>(), p, out_h, out_w, out->data<uint8_t>()); break;
    case 2: nearest_typed<uint16_t>(s.data<uint16_t>(), p, out_h, out_w, out->data<uint16_t>()); break;
    case 4: nearest_typed<uint32_t>(s.data<uint32_t>(), p, out_h, out_w, out->data<uint32_t>()); break;
    default: nearest_typed<uint64_t>(s.data<uint64_t>(), p, out_h, out_w, out->data<uint64_t>()); break;
  }
  return out;
}

// ---- bilinear --------------------------------------------------------------------------------

// One source row interpolated along w: dst[o] = r[w0[o]] * lw0[o] + r[w1[o]] * lw1[o].
template <typename A>
CANDLE_POOL_CLONES void bilinear_hpass(const A* __restrict r, const size_t* __restrict w0,
                                       const size_t* __restrict w1, const A* __restrict lw0,
                                       const A* __restrict lw1, size_t ow, A* __restrict dst) {
  for (size_t o = 0; o < ow; ++o) dst[o] = r[w0[o]] * lw0[o] + r[w1[o]] * lw1[o];
}

// The blend of two w-interpolated rows: out[o] = top[o] * lh0 + bottom[o] * lh1.
template <typename A>
CANDLE_POOL_CLONES void bilinear_vpass(const A* __restrict top, const A* __restrict bottom, A lh0, A lh1,
                                       size_t ow, A* __restrict out) {
  for (size_t o = 0; o < ow; ++o) out[o] = top[o] * lh0 + bottom[o] * lh1;
}

template <typename T>
void bilinear_typed(const T* src, const Planes& p, size_t out_h, size_t out_w, const LinearTaps& th,
                    const LinearTaps& tw, T* dst) {
  using A = acc_of<T>;
  std::vector<A> lw0(out_w), lw1(out_w);
  for (size_t i = 0; i < out_w; ++i) {
    lw0[i] = static_cast<A>(tw.l0[i]);
    lw1[i] = static_cast<A>(tw.l1[i]);
  }
  const size_t rows = p.b * p.c * out_h;
  constexpr size_t kNone = ~size_t{0};  // an empty slot
  cpu::parallel_for(rows, row_grain(out_w * 4), [&](size_t begin, size_t end) {
    // Two w-interpolated source rows, tagged by (plane, source row): consecutive output rows
    // mostly share them. Each is computed by the same code whether cached or not.
    std::vector<A> buf(p.w), hrows(2 * out_w), res(out_w);
    size_t tag[2] = {kNone, kNone};
    auto hrow = [&](size_t plane, size_t sy, size_t keep) -> const A* {
      const size_t t = plane * p.h + sy;
      for (size_t k = 0; k < 2; ++k)
        if (tag[k] == t) return hrows.data() + k * out_w;
      const size_t k = tag[0] == keep ? 1 : 0;
      const A* r = load_row<T, A>(src + p.plane_offset(plane) + sy * p.sh, p.w, p.sw, buf.data());
      bilinear_hpass<A>(r, tw.i0.data(), tw.i1.data(), lw0.data(), lw1.data(), out_w,
                        hrows.data() + k * out_w);
      tag[k] = t;
      return hrows.data() + k * out_w;
    };
    for (size_t r = begin; r < end; ++r) {
      const size_t plane = r / out_h, y = r % out_h;
      const A* top = hrow(plane, th.i0[y], plane * p.h + th.i1[y]);
      const A* bottom = hrow(plane, th.i1[y], plane * p.h + th.i0[y]);
      T* out = dst + r * out_w;
      A* o = std::is_same_v<T, A> ? reinterpret_cast<A*>(out) : res.data();
      bilinear_vpass<A>(top, bottom, static_cast<A>(th.l0[y]), static_cast<A>(th.l1[y]), out_w, o);
      if constexpr (!std::is_same_v<T, A>) store_row<T, A>(o, out_w, out);
    }
  });
}

void check_pool_args(const Planes& p, std::array<size_t, 2> k, std::array<size_t, 2> s, const char* op) {
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0 || k[0] > p.h || k[1] > p.w) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + ": invalid kernel (" + std::to_string(k[0]) + ", " + std::to_string(k[1]) +
                    ") / stride (" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ") for input " +
                    "height/width " + std::to_string(p.h) + ", " + std::to_string(p.w));
  }
}

std::shared_ptr<CpuStorage> pool2d(const CpuStorage& s, const Layout& l, std::array<size_t, 2> k,
                                   std::array<size_t, 2> st, bool is_max) {
  const char* op = is_max ? "max_pool2d" : "avg_pool2d";
  const Planes p = planes4(l, op);
  check_pool_args(p, k, st, op);
  const size_t oh = (p.h - k[0]) / st[0] + 1, ow = (p.w - k[1]) / st[1] + 1;
  auto out = CpuStorage::alloc(s.dtype(), p.b * p.c * oh * ow);
  if (out->elem_count() == 0) return out;
  auto run = [&]<typename T>() { pool2d_typed<T>(s.data<T>(), p, k, st, is_max, out->data<T>()); };
  if (is_max)
    dispatch(s.dtype(), run);
  else
    dispatch_float(s.dtype(), op, run);
  return out;
}

}  // namespace

StoragePtr CpuStorage::avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                  std::array<size_t, 2> stride) const {
  return pool2d(*this, l, kernel, stride, false);
}

StoragePtr CpuStorage::max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                  std::array<size_t, 2> stride) const {
  return pool2d(*this, l, kernel, stride, true);
}

StoragePtr CpuStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  return nearest(*this, planes3(l, "upsample_nearest1d"), 1, out_l, "upsample_nearest1d");
}

StoragePtr CpuStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  return nearest(*this, planes4(l, "upsample_nearest2d"), out_h, out_w, "upsample_nearest2d");
}

StoragePtr CpuStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                           std::optional<double> scale_h,
                                           std::optional<double> scale_w) const {
  const char* op = "upsample_bilinear2d";
  const Planes p = planes4(l, op);
  if (!dtype_is_float(dtype_)) {
    throw Error(ErrorKind::UnsupportedOp,
                std::string("unsupported dtype ") + std::string(dtype_name(dtype_)) + " for op " + op);
  }
  const size_t n = p.b * p.c * out_h * out_w;
  // The same size is a copy (as in candle and PyTorch; see linear_taps), exact for inf/NaN too.
  if (p.h == out_h && p.w == out_w) {
    auto out = CpuStorage::alloc(dtype_, n);
    if (n) copy_strided_src(*out, 0, l);
    return out;
  }
  auto out = CpuStorage::alloc(dtype_, n);
  if (n == 0) return out;
  if (p.h == 0 || p.w == 0) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + ": cannot resize an empty input to a non-empty output");
  }
  const cpu::LinearTaps th = cpu::linear_taps(p.h, out_h, align_corners, scale_h);
  const cpu::LinearTaps tw = cpu::linear_taps(p.w, out_w, align_corners, scale_w);
  dispatch_float(dtype_, op, [&]<typename T>() {
    bilinear_typed<T>(data<T>(), p, out_h, out_w, th, tw, out->data<T>());
  });
  return out;
}

namespace cpu {

std::vector<size_t> nearest_indices(size_t in, size_t out) {
  std::vector<size_t> idx(out);
  for (size_t i = 0; i < out; ++i) {
    const auto q = static_cast<unsigned __int128>(i) * in / out;
    idx[i] = std::min<size_t>(in - 1, static_cast<size_t>(q));
  }
  return idx;
}

LinearTaps linear_taps(size_t in, size_t out, bool align_corners, std::optional<double> scale_factor) {
  double scale;
  if (in == out) {
    // PyTorch (1.13) maps a dim whose size does not change one to one, whatever the scale
    // factor (in 3, scale 1.2 -> out 3 samples rows 0, 1, 2); candle does the same.
    scale = 1.0;
  } else if (align_corners) {
    scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  } else if (scale_factor) {
    scale = 1.0 / *scale_factor;
  } else {
    scale = static_cast<double>(in) / static_cast<double>(out);
  }
  LinearTaps t;
  t.i0.resize(out);
  t.i1.resize(out);
  t.l0.resize(out);
  t.l1.resize(out);
  for (size_t o = 0; o < out; ++o) {
    const double d = static_cast<double>(o);
    double src = align_corners ? scale * d : scale * (d + 0.5) - 0.5;
    src = std::max(src, 0.0);
    const size_t i0 = std::min(static_cast<size_t>(std::floor(src)), in - 1);
    const double l1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
    t.i0[o] = i0;
    t.i1[o] = std::min(i0 + 1, in - 1);
    t.l1[o] = l1;
    t.l0[o] = 1.0 - l1;
  }
  return t;
}

}  // namespace cpu
}  // namespace candle
