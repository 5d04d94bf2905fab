// CPU conv_transpose1d / conv_transpose2d: GEMM + col2im, in bands of input rows.
//
// For one image and group, cols[c_out_g * k_h * k_w, rows * i_w] = W^T x X[c_in_g, rows * i_w]
// (one GEMM, W read as a transposed view, no copy), then cols is scatter-added into the
// output (col2im). 1-D is the 2-D case with i_w = k_w = 1.
//
// Work split: the input rows of an image are cut into bands; a task is (image, group, band)
// and runs its GEMMs single-threaded on a small cols buffer that stays in cache ("pieces"
// of the band, at most ~1 MiB, at most conv_scratch_limit() / 16). Each band owns the
// output rows from its first input row's position on, so a band writes only into its own
// rows and the next band's (the band height makes bands two apart disjoint): the even
// bands run in parallel first, then the odd ones. Every output element is thus summed by
// one thread in an order fixed by the shape (band and piece boundaries depend only on the
// shape and the scratch limit), which makes the bytes independent of the thread count.
// With few tasks the bands run one after another and the parallelism is inside: the GEMM
// over tiles fixed by the shape (cpu::gemm) and the scatter over output channels, with
// the same per-element order.
//
// The scatter is a vector add per (kernel tap, input row); at stride 2 two neighbouring
// kernel columns are scattered together as one interleaving loop (the U-Net k2/k4 case).
// A sub-pixel decomposition (stride^2 small convolutions) was not tried: here the GEMM is
// ~60% of the time and the scatter ~10% (perf, k2 s2 64->64 on 256x256).
//
// f16/bf16/f8e4m3 are computed in f32 and rounded once at the end (the f32 copies of the
// operands and the f32 output accumulator are not counted in the scratch limit).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/utils.h"
#include "cpu/clones.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "cpu/strided.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
#define CANDLE_CONVT_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_CONVT_CLONES
#endif

namespace candle {
namespace cpu {
namespace {

// conv_scratch_limit() lives with conv2d's im2col; until that is merged it may throw
// "not implemented yet", so fall back to its documented default.
size_t scratch_limit_bytes() {
  try {
    return conv_scratch_limit();
  } catch (const Error&) {
    return size_t{256} << 20;
  }
}

// Both convolutions as 2-D, per axis: stride s, padding p, dilation d.
struct Geometry {
  size_t batch, groups, cin_g, cout_g;
  size_t ih, iw, kh, kw, oh, ow;
  size_t sh, sw, ph, pw, dh, dw;
  size_t c_in() const { return cin_g * groups; }
  size_t c_out() const { return cout_g * groups; }
  size_t m() const { return cout_g * kh * kw; }  // rows of cols
};

// Cut of one image's input rows into bands, and of a band into GEMM pieces.
struct Plan {
  size_t band_rows;  // input rows per band (the last may be shorter)
  size_t n_bands;
  bool two_pass;      // bands overlap their successor's output rows
  size_t piece_rows;  // full input rows per GEMM piece; 0: one row in column chunks
  size_t piece_cols;  // columns per chunk when piece_rows == 0
  size_t piece_n;     // the most GEMM columns of one piece
};

// Tasks below which the bands of a call run serially with parallel GEMMs and scatters.
constexpr size_t kMinParallelTasks = 8;
// cols bytes one piece aims at (the cols of a piece are scattered while still in L2), and
// the least GEMM columns one piece has (each GEMM packs all of W^T, so fewer columns would
// spend more time packing than multiplying).
constexpr size_t kPieceTargetBytes = size_t{1} << 20;
constexpr size_t kPieceMinCols = 256;

Plan make_plan(const Geometry& g, size_t elem_size) {
  Plan pl{};
  const size_t col_bytes = std::max<size_t>(g.m(), 1) * elem_size;  // one GEMM column of cols
  const size_t cap = std::max<size_t>(scratch_limit_bytes() / 16, col_bytes);
  size_t n = std::max(kPieceTargetBytes / col_bytes, kPieceMinCols);
  n = std::max<size_t>(std::min(n, cap / col_bytes), 1);
  // a whole row when it is not much over the target (no awkward column chunks)
  if (n < g.iw && g.iw * col_bytes <= std::min(cap, 4 * kPieceTargetBytes)) n = g.iw;
  if (n >= g.iw) {
    pl.piece_rows = std::min(n / g.iw, g.ih);
    pl.piece_n = pl.piece_rows * g.iw;
  } else {
    pl.piece_rows = 0;
    pl.piece_cols = n;
    pl.piece_n = n;
  }
  // bands two apart must not share output rows: (rows + 1) * s_h > d_h * (k_h - 1)
  const size_t reach = g.dh * (g.kh - 1);
  pl.two_pass = reach >= g.sh;
  const size_t min_rows = std::max<size_t>(1, reach / g.sh);
  size_t rows = std::max<size_t>(pl.piece_rows, 1);
  // shorter bands (less than a piece) when the batch and groups give few tasks
  const size_t per_image = g.batch * g.groups;
  if (per_image < 4 * kMinParallelTasks) {
    const size_t want_bands = (4 * kMinParallelTasks + per_image - 1) / per_image;
    rows = std::min(rows, std::max<size_t>((g.ih + want_bands - 1) / want_bands, 1));
  }
  pl.band_rows = std::max(rows, min_rows);
  pl.n_bands = (g.ih + pl.band_rows - 1) / pl.band_rows;
  return pl;
}

// out_row[o0 + i * s] += col[i] for i in [0, n): the scatter of one cols row into one
// output row (s == 1 is a plain vector add).
template <typename C>
CANDLE_CONVT_CLONES void add_strided(C* __restrict out_row, const C* __restrict col, size_t n, size_t s) {
  if (s == 1) {
    for (size_t i = 0; i < n; ++i) out_row[i] += col[i];
  } else {
    for (size_t i = 0; i < n; ++i) out_row[i * s] += col[i];
  }
}

// out_row[2 i] += even[i], out_row[2 i + 1] += odd[i]: the scatter of two neighbouring
// kernel columns at stride 2 (the U-Net upsampling case) as one interleaving vector loop.
template <typename C>
CANDLE_CONVT_CLONES void add_interleaved2(C* __restrict out_row, const C* __restrict even,
                                          const C* __restrict odd, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out_row[2 * i] += even[i];
    out_row[2 * i + 1] += odd[i];
  }
}

// The range [lo, hi) of i with 0 <= o0 + i * s < len, for i in [0, n).
inline void valid_range(int64_t o0, size_t s, size_t n, size_t len, size_t& lo, size_t& hi) {
  const int64_t si = static_cast<int64_t>(s);
  lo = o0 >= 0 ? 0 : static_cast<size_t>((-o0 + si - 1) / si);
  const int64_t room = static_cast<int64_t>(len) - o0;  // need i * s < room
  hi = room <= 0 ? 0 : std::min<size_t>(n, static_cast<size_t>((room + si - 1) / si));
  if (hi < lo) hi = lo;
}

// One call's data: dense [b, c_in, ih, iw] input, dense [c_in, cout_g, kh, kw] kernel and
// the [b, c_out, oh, ow] output, all in the compute type C.
template <typename C>
struct Job {
  const Geometry& g;
  const Plan& pl;
  const C* x;
  const C* w;
  C* out;

  // First output row owned by band j (band n_bands "starts" at oh).
  size_t band_start(size_t j) const {
    if (j == 0) return 0;
    if (j >= pl.n_bands) return g.oh;
    const int64_t r = static_cast<int64_t>(j * pl.band_rows * g.sh) - static_cast<int64_t>(g.ph);
    return static_cast<size_t>(std::clamp<int64_t>(r, 0, static_cast<int64_t>(g.oh)));
  }

  C* plane(size_t bi, size_t gi, size_t co) const {
    return out + ((bi * g.c_out() + gi * g.cout_g + co) * g.oh) * g.ow;
  }

  // cols[m, (y1 - y0) * nw] of input rows [y0, y1) x columns [x0, x0 + nw) scattered into
  // the output channels of group gi of image bi.
  void scatter(size_t bi, size_t gi, const C* cols, size_t y0, size_t y1, size_t x0, size_t nw) const {
    const size_t np = (y1 - y0) * nw;
    const size_t grain = kParallelGrain / std::max<size_t>(g.kh * g.kw * np, 1) + 1;
    const bool pair_columns = g.sw == 2 && g.dw == 1;
    parallel_for(g.cout_g, grain, [&](size_t c0, size_t c1) {
      for (size_t co = c0; co < c1; ++co) {
        C* pl_out = plane(bi, gi, co);
        for (size_t ky = 0; ky < g.kh; ++ky) {
          for (size_t iy = y0; iy < y1; ++iy) {
            const int64_t oy = static_cast<int64_t>(iy * g.sh + ky * g.dh) - static_cast<int64_t>(g.ph);
            if (oy < 0 || oy >= static_cast<int64_t>(g.oh)) continue;
            C* orow = pl_out + static_cast<size_t>(oy) * g.ow;
            const C* crow0 = cols + (co * g.kh + ky) * g.kw * np + (iy - y0) * nw;
            const int64_t ox0 = static_cast<int64_t>(x0 * g.sw) - static_cast<int64_t>(g.pw);
            size_t kx = 0;
            if (pair_columns) {
              // kernel columns kx, kx + 1 land on neighbouring output columns
              for (; kx + 1 < g.kw; kx += 2) {
                const C* ce = crow0 + kx * np;
                const C* co_ = ce + np;
                const int64_t oe = ox0 + static_cast<int64_t>(kx);
                size_t lo_e, hi_e, lo_o, hi_o;
                valid_range(oe, 2, nw, g.ow, lo_e, hi_e);
                valid_range(oe + 1, 2, nw, g.ow, lo_o, hi_o);
                const size_t lo = std::max(lo_e, lo_o), hi = std::max(lo, std::min(hi_e, hi_o));
                if (lo < hi)
                  add_interleaved2(orow + (oe + static_cast<int64_t>(2 * lo)), ce + lo, co_ + lo, hi - lo);
                // the edges where only one of the two is inside the output
                auto edge = [&](const C* c, int64_t o, size_t a, size_t b) {
                  for (size_t i = a; i < std::min(b, lo); ++i) orow[o + static_cast<int64_t>(2 * i)] += c[i];
                  for (size_t i = std::max(a, hi); i < b; ++i) orow[o + static_cast<int64_t>(2 * i)] += c[i];
                };
                edge(ce, oe, lo_e, hi_e);
                edge(co_, oe + 1, lo_o, hi_o);
              }
            }
            for (; kx < g.kw; ++kx) {
              const C* crow = crow0 + kx * np;
              const int64_t o0 = ox0 + static_cast<int64_t>(kx * g.dw);
              size_t lo, hi;
              valid_range(o0, g.sw, nw, g.ow, lo, hi);
              if (lo < hi)
                add_strided(orow + (o0 + static_cast<int64_t>(lo * g.sw)), crow + lo, hi - lo, g.sw);
            }
          }
        }
      }
    });
  }

  // cols = W_g^T x X[bi, group gi, rows [y0, y1), columns [x0, x0 + nw)], then its scatter.
  void piece(size_t bi, size_t gi, C* cols, size_t y0, size_t y1, size_t x0, size_t nw) const {
    const size_t m = g.m(), k = g.cin_g, n = (y1 - y0) * nw;
    MatRef<C> a{w + gi * k * m, 1, m};
    MatRef<C> b{x + ((bi * g.c_in() + gi * k) * g.ih + y0) * g.iw + x0, g.ih * g.iw, 1};
    gemm_tile_exact(m, n, k, a, b, cols, n, false);
    scatter(bi, gi, cols, y0, y1, x0, nw);
  }

  // Band j of image bi, group gi: zeroes the output rows [band_start(j), band_start(zero_to)),
  // then adds the band's contributions.
  void band(size_t bi, size_t gi, size_t j, size_t zero_to, C* cols) const {
    const size_t r0 = band_start(j), r1 = band_start(zero_to);
    if (r1 > r0) {
      parallel_for(g.cout_g, kParallelGrain / ((r1 - r0) * g.ow) + 1, [&](size_t c0, size_t c1) {
        for (size_t co = c0; co < c1; ++co)
          std::fill_n(plane(bi, gi, co) + r0 * g.ow, (r1 - r0) * g.ow, C(0));
      });
    }
    const size_t y_begin = j * pl.band_rows, y_end = std::min(g.ih, y_begin + pl.band_rows);
    if (pl.piece_rows > 0) {
      for (size_t y0 = y_begin; y0 < y_end; y0 += pl.piece_rows) {
        piece(bi, gi, cols, y0, std::min(y_end, y0 + pl.piece_rows), 0, g.iw);
      }
    } else {
      for (size_t y = y_begin; y < y_end; ++y) {
        for (size_t x0 = 0; x0 < g.iw; x0 += pl.piece_cols)
          piece(bi, gi, cols, y, y + 1, x0, std::min(pl.piece_cols, g.iw - x0));
      }
    }
  }

  void run() const {
    const size_t per_image = g.batch * g.groups;
    const size_t passes = pl.two_pass ? 2 : 1;
    const size_t cols_len = g.m() * pl.piece_n;
    const bool outer_parallel = per_image * pl.n_bands >= kMinParallelTasks;
    std::unique_ptr<C[]> serial_cols;
    if (!outer_parallel) serial_cols.reset(new C[cols_len]);
    for (size_t pass = 0; pass < passes; ++pass) {
      // bands of this pass: all of them, or every other one starting at `pass`
      const size_t step = passes;
      const size_t bands = pl.n_bands > pass ? (pl.n_bands - pass + step - 1) / step : 0;
      auto task = [&](size_t t, C* cols) {
        const size_t j = pass + (t % bands) * step, img = t / bands;
        // the first pass zeroes each band's rows and, when two-pass, its successor's
        const size_t zero_to = pass == 0 ? std::min(j + step, pl.n_bands) : j;
        band(img / g.groups, img % g.groups, j, zero_to, cols);
      };
      const size_t tasks = per_image * bands;
      if (outer_parallel) {
        parallel_for(tasks, 1, [&](size_t t0, size_t t1) {
          std::unique_ptr<C[]> cols(new C[cols_len]);
          for (size_t t = t0; t < t1; ++t) task(t, cols.get());
        });
      } else {
        for (size_t t = 0; t < tasks; ++t) task(t, serial_cols.get());
      }
    }
  }
};

// A dense copy of a strided layout in the compute type.
template <typename T, typename C>
std::unique_ptr<C[]> gather_dense(const T* base, const Layout& l) {
  std::unique_ptr<C[]> buf(new C[l.elem_count()]);
  C* dst = buf.get();
  for_each_block(l, [&](size_t off, size_t di, size_t len) {
    for (size_t i = 0; i < len; ++i) dst[di + i] = static_cast<C>(base[off + i]);
  });
  return buf;
}

template <typename T>
StoragePtr conv_transpose_typed(const CpuStorage& input, const Layout& l, const CpuStorage& kernel,
                                const Layout& kl, const Geometry& g, DType dtype) {
  using C = compute_t<T>;
  const size_t elem = sizeof(C);
  const Plan pl = make_plan(g, elem);
  std::unique_ptr<C[]> x_buf, w_buf;
  const C* x;
  const C* w;
  if constexpr (std::is_same_v<T, C>) {
    if (l.is_contiguous())
      x = input.data<T>() + l.start_offset();
    else
      x = (x_buf = gather_dense<T, C>(input.data<T>(), l)).get();
    if (kl.is_contiguous())
      w = kernel.data<T>() + kl.start_offset();
    else
      w = (w_buf = gather_dense<T, C>(kernel.data<T>(), kl)).get();
  } else {
    x = (x_buf = gather_dense<T, C>(input.data<T>(), l)).get();
    w = (w_buf = gather_dense<T, C>(kernel.data<T>(), kl)).get();
  }
  const size_t n_out = g.batch * g.c_out() * g.oh * g.ow;
  auto out = CpuStorage::alloc(dtype, n_out);
  if constexpr (std::is_same_v<T, C>) {
    Job<C>{g, pl, x, w, out->data<T>()}.run();
  } else {
    std::unique_ptr<C[]> acc(new C[n_out]);
    Job<C>{g, pl, x, w, acc.get()}.run();
    T* dst = out->data<T>();
    const C* src = acc.get();
    parallel_for(n_out, kParallelGrain, [&](size_t i0, size_t i1) {
      for (size_t i = i0; i < i1; ++i) dst[i] = T(src[i]);
    });
  }
  return out;
}

StoragePtr conv_transpose_cpu(const CpuStorage& input, const Layout& l, const BackendStorage& kernel_base,
                              const Layout& kl, const Geometry& g, const char* op) {
  const auto* kernel = dynamic_cast<const CpuStorage*>(&kernel_base);
  if (!kernel || kernel->dtype() != input.dtype()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": kernel is not a cpu storage of the input's dtype");
  }
  if (l.max_offset_exclusive() > input.elem_count() || kl.max_offset_exclusive() > kernel->elem_count()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": layout out of the storage's bounds");
  }
  return dispatch_float(input.dtype(), op, [&]<typename T>() -> StoragePtr {
    return conv_transpose_typed<T>(input, l, *kernel, kl, g, input.dtype());
  });
}

void check_layouts(const char* op, const Layout& l, const Layout& kl, const Shape& want_in,
                   const Shape& want_k) {
  if (l.shape() != want_in || kl.shape() != want_k) {
    throw Error(ErrorKind::Internal, std::string(op) + ": layouts " + l.shape().to_string() + " and " +
                                         kl.shape().to_string() + " do not match the parameters");
  }
}

}  // namespace
}  // namespace cpu

StoragePtr CpuStorage::conv_transpose1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                        const ParamsConv1D& p) const {
  if (p.groups == 0 || p.c_in % p.groups != 0 || p.c_out % p.groups != 0 || p.stride == 0 ||
      p.dilation == 0 || p.k_size == 0 || p.l_in == 0) {
    throw Error(ErrorKind::Internal, "conv_transpose1d: invalid parameters");
  }
  cpu::check_layouts("conv_transpose1d", l, kernel_l, Shape{p.b_size, p.c_in, p.l_in},
                     Shape{p.c_in, p.c_out / p.groups, p.k_size});
  const cpu::Geometry g{p.b_size,
                        p.groups,
                        p.c_in / p.groups,
                        p.c_out / p.groups,
                        p.l_in,
                        1,
                        p.k_size,
                        1,
                        p.l_out_transpose(),
                        1,
                        p.stride,
                        1,
                        p.padding,
                        0,
                        p.dilation,
                        1};
  return cpu::conv_transpose_cpu(*this, l, kernel, kernel_l, g, "conv_transpose1d");
}

StoragePtr CpuStorage::conv_transpose2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                        const ParamsConv2D& p) const {
  if (p.groups != 1 || p.stride == 0 || p.dilation == 0 || p.k_h == 0 || p.k_w == 0 || p.i_h == 0 ||
      p.i_w == 0) {
    throw Error(ErrorKind::Internal, "conv_transpose2d: invalid parameters");
  }
  cpu::check_layouts("conv_transpose2d", l, kernel_l, Shape{p.b_size, p.c_in, p.i_h, p.i_w},
                     Shape{p.c_in, p.c_out, p.k_h, p.k_w});
  const cpu::Geometry g{p.b_size,
                        1,
                        p.c_in,
                        p.c_out,
                        p.i_h,
                        p.i_w,
                        p.k_h,
                        p.k_w,
                        p.out_h_transpose(),
                        p.out_w_transpose(),
                        p.stride,
                        p.stride,
                        p.padding,
                        p.padding,
                        p.dilation,
                        p.dilation};
  return cpu::conv_transpose_cpu(*this, l, kernel, kernel_l, g, "conv_transpose2d");
}

}  // namespace candle
