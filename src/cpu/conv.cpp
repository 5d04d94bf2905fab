// CPU conv1d / conv2d: blocks of output positions, each an im2col panel (built under the
// scratch cap of candle::conv_scratch_limit()) times the kernel through the GEMM, written
// straight into the output planes, with the bias/activation epilogue applied while the block
// is in cache. 1x1 stride-1 unpadded convs multiply the input directly (no panel); 3x3
// stride-1 f32 convs with enough channels take the Winograd path (conv_winograd.cpp).
// f16/bf16/f8: f32 panels and an f32 accumulator tile, rounded once into the output.
//
// Work split: tasks are (image, group, block of output positions) with a block size that
// depends only on the shape (and the scratch cap), and each task runs one serial GEMM, so
// every output value has the same operation order for any thread count.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/utils.h"
#include "core/sanitizer.h"
#include "cpu/clones.h"
#include "cpu/conv_kernels.h"
#include "cpu/gemm.h"
#include "cpu/im2col.h"
#include "cpu/parallel.h"
#include "cpu/unary_ops.h"

namespace candle {
namespace cpu {
namespace {

// Target bytes of one im2col panel: about half of a core's L2, so the GEMM's packed B
// stays close.
constexpr size_t kPanelBytes = size_t{512} << 10;
// Output positions per block of a 1x1 conv (no panel): large enough for an efficient GEMM.
constexpr size_t kPointwiseCols = 1024;
// Blocks are not made narrower than this to create parallelism.
constexpr size_t kMinCols = 128;
// Below this many multiply-adds a conv runs on the calling thread (waking the pool costs more).
constexpr double kParallelMacs = double(1 << 21);

template <typename A>
void epilogue(A* x, size_t n, A bias, bool has_bias, std::optional<UnaryOp> act) {
  if (has_bias) {
    for (size_t i = 0; i < n; ++i) x[i] += bias;
  }
  if (act) {
    ops::with_unary_op(*act, [&]<UnaryOp OP>() {
      const ops::UnaryFn<OP> f;
      for (size_t i = 0; i < n; ++i) x[i] = f(x[i]);
    });
  }
}

// Uninitialised per-worker scratch.
// CANDLE_CONV_C_SCRATCH=1 (a tuning experiment; no effect on the bits): f32 / f64 convolutions
// accumulate each block in a scratch tile and copy it out, instead of in the output itself.
bool conv_c_scratch_tune() {
  static const bool on = [] {
    const char* v = std::getenv("CANDLE_CONV_C_SCRATCH");
    return v && v[0] == '1';
  }();
  return on;
}

template <typename A>
struct ConvScratch {
  std::unique_ptr<A[]> panel, tile;
};

template <typename T>
void conv2d_gemm(const ConvGeom& g, const T* in, const T* ker_t, const compute_t<T>* bias,
                 std::optional<UnaryOp> act, T* out) {
  using A = compute_t<T>;
  constexpr bool direct_out = std::is_same_v<A, T>;
  const size_t cin_g = g.cin_g(), cout_g = g.cout_g(), kdim = g.kdim();
  const size_t ihw = g.ih * g.iw, ohw = g.oh * g.ow;
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.s_h == 1 && g.s_w == 1 && g.pad_h == 0 && g.pad_w == 0;
  const bool need_panel = !(pointwise && direct_out);

  // the kernel in the accumulator type: [c_out, kdim] row-major
  std::vector<A> ker_conv;
  const A* ker;
  if constexpr (direct_out) {
    ker = ker_t;
  } else {
    ker_conv.resize(g.c_out * kdim);
    for (size_t i = 0; i < ker_conv.size(); ++i) ker_conv[i] = im2col_detail::convert<A>(ker_t[i]);
    ker = ker_conv.data();
  }

  // block size: from the shape and the scratch cap only
  const size_t limit = conv_scratch_limit();
  size_t cols = need_panel ? std::max<size_t>(kMinCols, kPanelBytes / (std::max<size_t>(kdim, 1) * sizeof(A)))
                           : kPointwiseCols;
  // C in a scratch tile (rows n apart) rather than in the output (rows ohw apart): always for
  // f16 / bf16 (converted on the way out); for f32 / f64 when CANDLE_CONV_C_SCRATCH=1 (tuning)
  const bool c_scratch = !direct_out || conv_c_scratch_tune();
  const size_t per_col = (need_panel ? kdim : 0) + (c_scratch ? cout_g : 0);
  if (per_col > 0) cols = std::min(cols, std::max<size_t>(1, limit / (per_col * sizeof(A))));
  cols = std::min(cols, ohw);
  // spread small images over a few blocks (never narrower than kMinCols)
  const size_t img_groups = g.b * g.groups;
  if (img_groups * ((ohw + cols - 1) / cols) < 16 && ohw > kMinCols) {
    const size_t want = (16 + img_groups - 1) / img_groups;
    cols = std::max(std::min(cols, (ohw + want - 1) / want), std::min(kMinCols, cols));
  }
  cols = std::max<size_t>(cols, 1);
  const size_t nblocks = (ohw + cols - 1) / cols;
  cols = (ohw + nblocks - 1) / nblocks;  // balanced blocks (never wider than before)
  const size_t ntasks = img_groups * nblocks;
  const size_t worker_bytes = std::max<size_t>(per_col * cols * sizeof(A), 1);
  size_t workers =
      std::max<size_t>(1, std::min({get_num_threads(), ntasks, std::max<size_t>(1, limit / worker_bytes)}));
  if (double(g.b) * double(g.c_out) * double(ohw) * double(kdim) < kParallelMacs) workers = 1;

  // each group's kernel packed once for all its blocks
  std::vector<PackedA<A>> packed(g.groups);
  for (size_t grp = 0; grp < g.groups; ++grp)
    packed[grp] = pack_a(cout_g, kdim, MatRef<A>{ker + grp * cout_g * kdim, kdim, 1});

  parallel_for(workers, 1, [&](size_t w0, size_t w1) {
    ConvScratch<A> s;
    if (need_panel) s.panel.reset(new A[kdim * cols]);
    if (c_scratch) s.tile.reset(new A[cout_g * cols]);
    for (size_t w = w0; w < w1; ++w) {
      for (size_t t = w; t < ntasks; t += workers) {
        const size_t blk = t % nblocks, ig = t / nblocks;
        const size_t grp = ig % g.groups, bi = ig / g.groups;
        const size_t p0 = blk * cols, p1 = std::min(ohw, p0 + cols), n = p1 - p0;
        const T* in_g = in + (bi * g.c_in + grp * cin_g) * ihw;
        MatRef<A> bmat;
        if (need_panel) {
          im2col(g, in_g, p0, p1, s.panel.get(), n);
          bmat = {s.panel.get(), n, 1};
        } else {
          bmat = {reinterpret_cast<const A*>(in_g) + p0, ihw, 1};
        }
        const size_t co0 = grp * cout_g;
        T* out_blk = out + (bi * g.c_out + co0) * ohw + p0;
        A* c = c_scratch ? s.tile.get() : reinterpret_cast<A*>(out_blk);
        const size_t ldc = c_scratch ? n : ohw;
        // an output's bits must not depend on the block it falls in
        gemm_tile_exact(packed[grp], n, bmat, c, ldc, false);
        for (size_t co = 0; co < cout_g; ++co) {
          A* row = c + co * ldc;
          epilogue(row, n, bias ? bias[co0 + co] : A(0), bias != nullptr, act);
          if (c_scratch) {
            T* dst = out_blk + co * ohw;
            if constexpr (direct_out)
              std::memcpy(dst, row, n * sizeof(T));
            else
              for (size_t i = 0; i < n; ++i) dst[i] = T(row[i]);
          }
        }
      }
    }
  });
}

// conv2d of a batch of small maps (f32/f64, one group): each im2col panel spans several whole
// images so that the GEMMs are wide enough to be efficient (a 64-position MNIST map alone
// makes a 64-column GEMM). The images per block follow from the shape alone, so the bytes do
// not depend on the thread count. False when the maps are too large for two per panel.
template <typename T>
bool conv2d_gemm_images(const ConvGeom& g, const T* in, const T* ker, const T* bias,
                        std::optional<UnaryOp> act, T* out) {
  if (g.groups != 1 || g.b < 2) return false;
  const size_t kdim = g.kdim(), cout = g.c_out, ihw = g.ih * g.iw, ohw = g.oh * g.ow;
  const size_t limit = conv_scratch_limit();
  size_t cols = std::max<size_t>(kMinCols, kPanelBytes / (std::max<size_t>(kdim, 1) * sizeof(T)));
  cols = std::min(cols, limit / ((kdim + cout) * sizeof(T)));
  const size_t ipb_max = ohw ? cols / ohw : 0;
  if (ipb_max < 2) return false;
  size_t nblocks = (g.b + ipb_max - 1) / ipb_max;
  const size_t ipb = (g.b + nblocks - 1) / nblocks;
  nblocks = (g.b + ipb - 1) / ipb;
  size_t workers = std::min(get_num_threads(), nblocks);
  if (double(g.b) * double(cout) * double(ohw) * double(kdim) < kParallelMacs) workers = 1;
  const PackedA<T> packed = pack_a(cout, kdim, MatRef<T>{ker, kdim, 1});
  parallel_for(workers, 1, [&](size_t w0, size_t w1) {
    std::unique_ptr<T[]> panel(new T[kdim * ipb * ohw]), tile(new T[cout * ipb * ohw]);
    for (size_t w = w0; w < w1; ++w) {
      for (size_t blk = w; blk < nblocks; blk += workers) {
        const size_t b0 = blk * ipb, nb = std::min(ipb, g.b - b0), n = nb * ohw;
        for (size_t i = 0; i < nb; ++i)
          im2col(g, in + (b0 + i) * g.c_in * ihw, 0, ohw, panel.get() + i * ohw, n);
        gemm_tile_exact(packed, n, MatRef<T>{panel.get(), n, 1}, tile.get(), n, false);
        for (size_t i = 0; i < nb; ++i) {
          for (size_t co = 0; co < cout; ++co) {
            T* dst = out + ((b0 + i) * cout + co) * ohw;
            std::memcpy(dst, tile.get() + co * n + i * ohw, ohw * sizeof(T));
            epilogue(dst, ohw, bias ? bias[co] : T(0), bias != nullptr, act);
          }
        }
      }
    }
  });
  return true;
}

#if defined(__x86_64__) && !CANDLE_ASAN
#define CANDLE_CONV_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_CONV_CLONES
#endif

// One output row of a direct conv with CO (<= 8) output channels into acc [CO][ow]: L outputs at
// a time (one GCC vector: L = 16 only where the clone has 512-bit registers; GCC kept 16-float
// vectors of the AVX2 clone on the stack, 4-13x slower than 8-float ones there, bits the same), their
// CO sums in vector registers, over every (c_in, ky, kx) in that order. Out-of-image taps read 0,
// which adds exactly what skipping them would.
template <size_t CO, size_t L>
CANDLE_CONV_CLONES void direct_row(const float* __restrict in_b, const float* __restrict ker, size_t cin,
                                   size_t kh, size_t kw, ptrdiff_t ih, ptrdiff_t iw, ptrdiff_t ph,
                                   ptrdiff_t pw, size_t y, size_t ow, float* __restrict acc) {
  typedef float V __attribute__((vector_size(L * sizeof(float))));
  const size_t ihw = static_cast<size_t>(ih * iw), ktaps = kh * kw, wstride = cin * ktaps;
  for (size_t x0 = 0; x0 < ow; x0 += L) {
    const size_t n = std::min(L, ow - x0);
    V a[CO];
    for (size_t co = 0; co < CO; ++co) a[co] = V{};
    for (size_t ci = 0; ci < cin; ++ci) {
      const float* plane = in_b + ci * ihw;
      const float* wc = ker + ci * ktaps;
      for (size_t ky = 0; ky < kh; ++ky) {
        const ptrdiff_t iy = static_cast<ptrdiff_t>(y + ky) - ph;
        if (iy < 0 || iy >= ih) continue;
        const float* row = plane + iy * iw;
        for (size_t kx = 0; kx < kw; ++kx) {
          const ptrdiff_t ix0 = static_cast<ptrdiff_t>(x0 + kx) - pw;
          V v;
          if (ix0 >= 0 && ix0 + static_cast<ptrdiff_t>(L) <= iw) {
            std::memcpy(&v, row + ix0, sizeof(v));
          } else {
            float t[L];
            for (size_t j = 0; j < L; ++j) {
              const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(j);
              t[j] = ix >= 0 && ix < iw ? row[ix] : 0.0f;
            }
            std::memcpy(&v, t, sizeof(v));
          }
          const float* wt = wc + ky * kw + kx;
          for (size_t co = 0; co < CO; ++co) a[co] += wt[co * wstride] * v;
        }
      }
    }
    for (size_t co = 0; co < CO; ++co) {
      float t[L];
      std::memcpy(t, &a[co], sizeof(t));
      std::memcpy(acc + co * ow + x0, t, n * sizeof(float));
    }
  }
}

// direct_row for cout output channels (1 to 8)
template <size_t L>
void direct_rows(size_t cout, const float* in_b, const float* ker, size_t cin, size_t kh, size_t kw,
                 ptrdiff_t ih, ptrdiff_t iw, ptrdiff_t ph, ptrdiff_t pw, size_t y, size_t ow, float* acc) {
  switch (cout) {
    case 1: direct_row<1, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 2: direct_row<2, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 3: direct_row<3, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 4: direct_row<4, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 5: direct_row<5, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 6: direct_row<6, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    case 7: direct_row<7, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
    default: direct_row<8, L>(in_b, ker, cin, kh, kw, ih, iw, ph, pw, y, ow, acc); break;
  }
}

// A direct conv for few output channels (stride 1, dilation 1, one group, f32). Im2col + GEMM
// makes a GEMM of c_out rows (3x3 64 -> 4 at 512² ran at 8 GFLOP/s); here each input row is
// read once per tap for all output channels, whose sums stay in registers. An output's bits do
// not depend on where the image ends (tiles give the whole image's bits).
bool conv2d_direct_few_outputs(const ConvGeom& g, const float* in, const float* ker, const float* bias,
                               std::optional<UnaryOp> act, float* out) {
  constexpr size_t kMaxOut = 8;
  if (g.c_out > kMaxOut || g.groups != 1 || g.s_h != 1 || g.s_w != 1 || g.d_h != 1 || g.d_w != 1)
    return false;
  const size_t cin = g.c_in, cout = g.c_out, ow = g.ow, oh = g.oh, ohw = oh * ow;
  const auto ih = static_cast<ptrdiff_t>(g.ih), iw = static_cast<ptrdiff_t>(g.iw);
  const auto ph = static_cast<ptrdiff_t>(g.pad_h), pw = static_cast<ptrdiff_t>(g.pad_w);
  const size_t rows = g.b * oh;
  const double macs = double(g.b) * double(cout) * double(ohw) * double(cin * g.kh * g.kw);
  const size_t grain = macs < kParallelMacs ? rows : 1;
  const bool wide = has_avx512f();
  parallel_for(rows, grain, [&](size_t r0, size_t r1) {
    std::vector<float> acc(cout * ow);
    for (size_t r = r0; r < r1; ++r) {
      const size_t bi = r / oh, y = r % oh;
      const float* in_b = in + bi * cin * g.ih * g.iw;
      if (wide)
        direct_rows<16>(cout, in_b, ker, cin, g.kh, g.kw, ih, iw, ph, pw, y, ow, acc.data());
      else
        direct_rows<8>(cout, in_b, ker, cin, g.kh, g.kw, ih, iw, ph, pw, y, ow, acc.data());
      for (size_t co = 0; co < cout; ++co) {
        float* dst = out + (bi * cout + co) * ohw + y * ow;
        std::memcpy(dst, acc.data() + co * ow, ow * sizeof(float));
        epilogue(dst, ow, bias ? bias[co] : 0.0f, bias != nullptr, act);
      }
    }
  });
  return true;
}

// A conv with few output channels (the 64 -> 4 growth convs of a residual dense block) makes
// thin GEMMs (M = c_out) in im2col form: 3x3 64 -> 4 at 512x512 ran at 8 GFLOP/s. Run it as
// Winograd on the kernel padded with zero output channels to 16, into a scratch map whose
// first c_out channels are the result (each output's bits are those of its own channel).
bool conv2d_winograd_few_outputs(const ConvGeom& g, const float* in, const float* ker, const float* bias,
                                 std::optional<UnaryOp> act, float* out) {
  constexpr size_t kPad = 16;
  if (g.c_out >= kPad || g.groups != 1 || g.c_in < kPad) return false;
  ConvGeom gp = g;
  gp.c_out = kPad;
  const size_t kn = g.c_in * g.kh * g.kw, ohw = g.oh * g.ow;
  std::vector<float> kp(kPad * kn, 0.0f), bp(kPad, 0.0f);
  std::memcpy(kp.data(), ker, g.c_out * kn * sizeof(float));
  if (bias) std::memcpy(bp.data(), bias, g.c_out * sizeof(float));
  const double scratch = double(g.b) * double(kPad) * double(ohw) * sizeof(float);
  if (scratch > double(conv_scratch_limit())) return false;
  std::unique_ptr<float[]> tmp(new float[g.b * kPad * ohw]);
  if (!conv2d_winograd_f32(gp, in, kp.data(), bias ? bp.data() : nullptr, act, tmp.get())) return false;
  parallel_for(g.b * g.c_out, kParallelGrain / std::max<size_t>(ohw, 1) + 1, [&](size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) {
      const size_t bi = p / g.c_out, co = p % g.c_out;
      std::memcpy(out + p * ohw, tmp.get() + (bi * kPad + co) * ohw, ohw * sizeof(float));
    }
  });
  return true;
}

// A contiguous copy of a layout's elements, or a pointer into the storage when it already is.
template <typename T>
const T* contiguous_data(const CpuStorage& s, const Layout& l, std::shared_ptr<CpuStorage>& keep) {
  if (l.is_contiguous()) return s.data<T>() + l.start_offset();
  keep = CpuStorage::alloc(s.dtype(), l.elem_count());
  s.copy_strided_src(*keep, 0, l);
  return keep->data<T>();
}

StoragePtr run_conv(const CpuStorage& input, const Layout& l, const BackendStorage& kernel_base,
                    const Layout& kl, const ConvGeom& g, const ConvEpilogue* ep, const char* op) {
  const auto* kernel = dynamic_cast<const CpuStorage*>(&kernel_base);
  if (!kernel || kernel->dtype() != input.dtype()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": kernel is not a cpu storage of the input's dtype");
  }
  if (l.max_offset_exclusive() > input.elem_count() || kl.max_offset_exclusive() > kernel->elem_count()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": layout out of the storage's bounds");
  }
  const size_t total = g.b * g.c_out * g.oh * g.ow;
  return dispatch_float(input.dtype(), op, [&]<typename T>() -> StoragePtr {
    using A = compute_t<T>;
    auto out = CpuStorage::alloc(input.dtype(), total);
    if (total == 0) return out;
    std::shared_ptr<CpuStorage> in_keep, k_keep;
    const T* in = contiguous_data<T>(input, l, in_keep);
    const T* ker = contiguous_data<T>(*kernel, kl, k_keep);
    std::vector<A> bias;
    std::optional<UnaryOp> act;
    if (ep) {
      act = ep->activation;
      if (ep->bias) {
        const auto* bs = dynamic_cast<const CpuStorage*>(ep->bias);
        if (!bs || bs->dtype() != input.dtype() || ep->bias_layout.elem_count() != g.c_out) {
          throw Error(ErrorKind::Internal, std::string(op) + ": bad bias storage");
        }
        std::shared_ptr<CpuStorage> b_keep;
        const T* bp = contiguous_data<T>(*bs, ep->bias_layout, b_keep);
        bias.resize(g.c_out);
        for (size_t i = 0; i < g.c_out; ++i) bias[i] = im2col_detail::convert<A>(bp[i]);
      }
    }
    T* o = out->template data<T>();
    const A* bias_p = bias.empty() ? nullptr : bias.data();
    if constexpr (std::is_same_v<T, float>) {
      if (conv2d_winograd_f32(g, in, ker, bias_p, act, o)) return out;
      if (conv2d_direct_few_outputs(g, in, ker, bias_p, act, o)) return out;
      if (conv2d_winograd_few_outputs(g, in, ker, bias_p, act, o)) return out;
    }
    if constexpr (std::is_same_v<A, T>) {
      if (conv2d_gemm_images<T>(g, in, ker, bias_p, act, o)) return out;
    }
    conv2d_gemm<T>(g, in, ker, bias_p, act, o);
    return out;
  });
}

}  // namespace

void conv_epilogue_f32(float* x, size_t n, float bias, bool has_bias, std::optional<UnaryOp> act) {
  epilogue(x, n, bias, has_bias, act);
}
void conv_epilogue_f64(double* x, size_t n, double bias, bool has_bias, std::optional<UnaryOp> act) {
  epilogue(x, n, bias, has_bias, act);
}

}  // namespace cpu

StoragePtr CpuStorage::conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                              const ParamsConv1D& p) const {
  cpu::ConvGeom g{p.b_size,  p.c_in, 1,        p.l_in, p.c_out,    1,        p.k_size, 0,
                  p.padding, 1,      p.stride, 1,      p.dilation, p.groups, 1,        p.l_out()};
  return cpu::run_conv(*this, l, kernel, kernel_l, g, nullptr, "conv1d");
}

StoragePtr CpuStorage::conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                              const ParamsConv2D& p, const ConvEpilogue& epilogue) const {
  cpu::ConvGeom g{p.b_size,  p.c_in,   p.i_h,    p.i_w,      p.c_out,    p.k_h,    p.k_w,     p.padding,
                  p.padding, p.stride, p.stride, p.dilation, p.dilation, p.groups, p.out_h(), p.out_w()};
  return cpu::run_conv(*this, l, kernel, kernel_l, g, &epilogue, "conv2d");
}

}  // namespace candle
