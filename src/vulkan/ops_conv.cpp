// Convolutions: conv2d / conv1d as an implicit GEMM (conv2d.comp; the bias + activation
// epilogue in the kernel) and conv_transpose2d / conv_transpose1d (conv_transpose2d.comp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct ConvPush {
  uint32_t in_off, sb, sc, sh, sw;
  uint32_t ih, iw;
  uint32_t w_off, out_off, bias_off, bias_st;
  uint32_t ci_g, co_g, groups, K;
  uint32_t oh, ow;
  uint32_t stride_h, stride_w, pad_h, pad_w;
  uint32_t act, has_bias, tile0, bg0;
};
static_assert(sizeof(ConvPush) <= 128);

struct ConvTPush {
  uint32_t n, first;
  uint32_t in_off, sb, sc, sh, sw;
  uint32_t ih, iw;
  uint32_t w_off, out_off;
  uint32_t ci_g, co_g, groups;
  uint32_t kh, kw, oh, ow;
  uint32_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
};
static_assert(sizeof(ConvTPush) <= 128);

// A 2-D convolution problem; 1-D ones have ih = kh = 1, stride_h = 1, pad_h = 0 and sh = 0.
struct Conv {
  size_t b, ci, co, ih, iw, kh, kw, oh, ow;
  size_t pad_h, pad_w, s_h, s_w, d_h, d_w, groups;
  size_t sb, sc, sh, sw;  // input strides
};

bool fits32(size_t v) { return v <= 0xffffffffull; }

// The work-group tile (output channels x pixels) of conv2d.comp for co_g output channels per
// group and N output pixels: the larger tiles where there is enough work.
// CANDLE_VULKAN_CONV_TILE=BMxBN (one of the kernel's variants) forces one (for tuning).
std::pair<size_t, size_t> conv_tile(size_t co_g, size_t N) {
  static const std::pair<size_t, size_t> forced = [] {
    const char* e = std::getenv("CANDLE_VULKAN_CONV_TILE");
    size_t m = 0, n = 0;
    if (e && std::sscanf(e, "%zux%zu", &m, &n) == 2) {
      for (auto [vm, vn] : {std::pair<size_t, size_t>{32, 128}, {64, 64}, {64, 128}, {128, 128}, {64, 256}})
        if (vm == m && vn == n) return std::pair<size_t, size_t>{m, n};
    }
    return std::pair<size_t, size_t>{0, 0};
  }();
  if (forced.first) return forced;
  // H200 (tools/vulkan_gpu_run.sh's sweep at 512x512): 32x128 for few output channels
  // (3->64: 0.17 ms), 64x64 otherwise (64->64: 1.09 ms against 8.9 ms for 64x128 and 17 ms for
  // 128x128, whose accumulators spill)
  (void)N;
  return co_g <= 32 ? std::pair<size_t, size_t>{32, 128} : std::pair<size_t, size_t>{64, 64};
}

StoragePtr run_conv(const VulkanStorage& x, const Layout& l, const VulkanStorage& k, const Layout& kl,
                    const Conv& c, const ConvEpilogue* ep, bool may_band = true);
StoragePtr run_conv_banded(const VulkanStorage& x, const Layout& l, const VulkanStorage& k, const Layout& kl,
                           const Conv& c, const ConvEpilogue* ep);

StoragePtr run_conv(const VulkanStorage& x, const Layout& l, const VulkanStorage& k, const Layout& kl,
                    const Conv& c, const ConvEpilogue* ep, bool may_band) {
  Context& ctx = x.ctx();
  const char* sfx = float_suffix(ctx, x.dtype());
  if (!sfx || k.dtype() != x.dtype()) return nullptr;
  const size_t ci_g = c.ci / c.groups, co_g = c.co / c.groups;
  const size_t K = ci_g * c.kh * c.kw, N = c.oh * c.ow;
  const size_t n_out = c.b * c.co * N;
  const size_t es = dtype_size(x.dtype());
  const size_t budget = bind_budget(ctx, es);
  auto [xlo, xhi] = layout_span(l);
  const VulkanStorage* bias = nullptr;
  if (ep && ep->bias) {
    bias = &as_vk(*ep->bias, "conv2d");
    if (bias->dtype() != x.dtype()) return nullptr;
  }
  if (K == 0) return nullptr;
  if (c.co * K > budget || (c.kh - 1) * c.d_h >= 65536 || (c.kw - 1) * c.d_w >= 65536) return nullptr;
  if (xhi - xlo > budget || n_out > budget || !fits32(n_out) || !fits32(xhi))
    return may_band ? run_conv_banded(x, l, k, kl, c, ep) : nullptr;
  auto out = x.vdev().make(x.dtype(), n_out);
  if (n_out == 0) return out;
  Dense w = dense(k, kl);
  // per k = (ci, ky, kx): the tap's input offset and (dy, dx)
  std::vector<uint32_t> tab(2 * K);
  for (size_t i = 0; i < ci_g; ++i)
    for (size_t ky = 0; ky < c.kh; ++ky)
      for (size_t kx = 0; kx < c.kw; ++kx) {
        const size_t kk = (i * c.kh + ky) * c.kw + kx;
        const size_t dy = ky * c.d_h, dx = kx * c.d_w;
        tab[2 * kk] = static_cast<uint32_t>(i * c.sc + dy * c.sh + dx * c.sw);
        tab[2 * kk + 1] = static_cast<uint32_t>(dy << 16 | dx);
      }
  auto ktab = upload_u32(x.vdev(), tab);
  auto bx = bind_range(x, xlo, xhi);
  auto bw = bind_range(*w.s, w.first, w.first + c.co * K);
  auto bo = bind_range(*out, 0, n_out);
  auto bt = bind_range(*ktab, 0, tab.size());
  ConvPush pc{};
  pc.in_off = bx.first;
  pc.sb = static_cast<uint32_t>(c.sb);
  pc.sc = static_cast<uint32_t>(c.sc);
  pc.sh = static_cast<uint32_t>(c.sh);
  pc.sw = static_cast<uint32_t>(c.sw);
  pc.ih = static_cast<uint32_t>(c.ih);
  pc.iw = static_cast<uint32_t>(c.iw);
  pc.w_off = bw.first;
  pc.out_off = bo.first;
  pc.ci_g = static_cast<uint32_t>(ci_g);
  pc.co_g = static_cast<uint32_t>(co_g);
  pc.groups = static_cast<uint32_t>(c.groups);
  pc.K = static_cast<uint32_t>(K);
  pc.oh = static_cast<uint32_t>(c.oh);
  pc.ow = static_cast<uint32_t>(c.ow);
  pc.stride_h = static_cast<uint32_t>(c.s_h);
  pc.stride_w = static_cast<uint32_t>(c.s_w);
  pc.pad_h = static_cast<uint32_t>(c.pad_h);
  pc.pad_w = static_cast<uint32_t>(c.pad_w);
  pc.act = ep && ep->activation ? static_cast<uint32_t>(*ep->activation) : 255u;
  Binding bb = bw.b;
  if (bias) {
    const Layout& blay = ep->bias_layout;
    auto [blo, bhi] = layout_span(blay);
    auto rb = bind_range(*bias, blo, bhi);
    bb = rb.b;
    pc.bias_off = rb.first;
    pc.bias_st = static_cast<uint32_t>(blay.stride().empty() ? 0 : blay.stride()[0]);
    pc.has_bias = 1;
  }
  auto [bm, bn] = conv_tile(co_g, N);
  std::string kname = std::string("conv2d_") + sfx + "_" + std::to_string(bm) + "x" + std::to_string(bn);
  const auto& f = ctx.features();
  const size_t tiles = (N + bn - 1) / bn, gy = (co_g + bm - 1) / bm, bgs = c.b * c.groups;
  if (gy > f.max_groups[1]) return nullptr;
  for (size_t t0 = 0; t0 < tiles; t0 += f.max_groups[0]) {
    for (size_t g0 = 0; g0 < bgs; g0 += f.max_groups[2]) {
      pc.tile0 = static_cast<uint32_t>(t0);
      pc.bg0 = static_cast<uint32_t>(g0);
      ctx.dispatch(kname.c_str(), {bx.b, bw.b, bo.b, bb, bt.b}, &pc, sizeof(pc),
                   static_cast<uint32_t>(std::min<size_t>(tiles - t0, f.max_groups[0])),
                   static_cast<uint32_t>(gy),
                   static_cast<uint32_t>(std::min<size_t>(bgs - g0, f.max_groups[2])));
    }
  }
  return out;
}

// Input rows [iy0, iy1) a band of output rows [y0, y1) reads, and the top padding that maps
// the band's first output row onto row iy0 (pad_h of the band's problem).
struct BandRows {
  size_t iy0, iy1, pad;
};

// A conv2d or conv_transpose2d whose input or output exceeds one binding (maxStorageBufferRange:
// 128 MiB on lavapipe, 4 GiB on most GPUs; a 4k feature map of 64 channels is 2 GiB): per
// image, bands of `band` output rows; each band's input rows (`rows`) are copied dense, `run`
// convolves them (with the band's own top padding) and its output rows are copied into place.
template <typename Rows, typename Run>
StoragePtr run_in_bands(const VulkanStorage& x, const Layout& l, const Conv& c, size_t band, Rows rows,
                        Run run) {
  const size_t plane = c.oh * c.ow;
  auto out = x.vdev().make(x.dtype(), c.b * c.co * plane);
  for (size_t bi = 0; bi < c.b; ++bi) {
    for (size_t y0 = 0; y0 < c.oh; y0 += band) {
      const size_t y1 = std::min(c.oh, y0 + band);
      const BandRows r = rows(y0, y1);
      Conv cb = c;
      cb.b = 1;
      cb.ih = r.iy1 > r.iy0 ? r.iy1 - r.iy0 : 1;  // one zero row when the band reads none
      cb.oh = y1 - y0;
      cb.pad_h = r.pad;
      cb.sb = c.ci * cb.ih * c.iw, cb.sc = cb.ih * c.iw, cb.sh = c.iw, cb.sw = 1;
      auto xin = x.vdev().make(x.dtype(), c.ci * cb.ih * c.iw);
      if (r.iy1 > r.iy0) {
        Layout band_l(Shape{1, c.ci, cb.ih, c.iw}, {c.sb, c.sc, c.sh, c.sw},
                      l.start_offset() + bi * c.sb + r.iy0 * c.sh);
        x.copy_strided_src(*xin, 0, band_l);
      } else {
        xin->const_set(Scalar(0.0), Layout::contiguous(Shape{xin->elem_count()}));
      }
      StoragePtr part = run(*xin, Layout::contiguous(Shape{1, c.ci, cb.ih, c.iw}), cb);
      if (!part) return nullptr;
      part->copy2d(*out, c.co, cb.oh * c.ow, cb.oh * c.ow, plane, 0, bi * c.co * plane + y0 * c.ow);
    }
  }
  return out;
}

// conv2d in bands: output row oy reads padded rows [oy * s, oy * s + reach).
StoragePtr run_conv_banded(const VulkanStorage& x, const Layout& l, const VulkanStorage& k, const Layout& kl,
                           const Conv& c, const ConvEpilogue* ep) {
  const size_t budget = bind_budget(x.ctx(), dtype_size(x.dtype()));
  const size_t reach = (c.kh - 1) * c.d_h + 1;
  if (c.ci * c.iw == 0 || c.co * c.ow == 0 || c.oh == 0) return nullptr;
  const size_t rows_in = budget / (c.ci * c.iw);
  if (rows_in < reach) return nullptr;
  const size_t band = std::min({(rows_in - reach) / c.s_h + 1, budget / (c.co * c.ow), c.oh});
  if (band == 0) return nullptr;
  auto rows = [&](size_t y0, size_t y1) {
    const size_t top = y0 * c.s_h, bottom = (y1 - 1) * c.s_h + reach;  // padded coordinates
    const size_t iy0 = top > c.pad_h ? top - c.pad_h : 0;
    const size_t iy1 = std::min(c.ih, bottom > c.pad_h ? bottom - c.pad_h : 0);
    if (iy1 <= iy0) return BandRows{0, 0, 0};  // only padding rows (a zero row reads the same)
    return BandRows{iy0, iy1, c.pad_h + iy0 - top};
  };
  return run_in_bands(x, l, c, band, rows, [&](const VulkanStorage& xb, const Layout& lb, const Conv& cb) {
    return run_conv(xb, lb, k, kl, cb, ep, false);
  });
}

StoragePtr run_conv_transpose(const VulkanStorage& x, const Layout& l, const VulkanStorage& k,
                              const Layout& kl, const Conv& c, bool may_band = true);

// conv_transpose2d in bands: output row oy reads input rows iy with iy * s = oy + pad - ky * d.
StoragePtr run_conv_transpose_banded(const VulkanStorage& x, const Layout& l, const VulkanStorage& k,
                                     const Layout& kl, const Conv& c) {
  const size_t budget = bind_budget(x.ctx(), dtype_size(x.dtype()));
  const size_t reach = (c.kh - 1) * c.d_h;
  if (c.ci * c.iw == 0 || c.co * c.ow == 0 || c.oh == 0) return nullptr;
  const size_t rows_in = budget / (c.ci * c.iw);
  // a band of n output rows reads at most (n - 1 + reach) / s + 2 input rows
  if (rows_in < (reach + c.s_h - 1) / c.s_h + 2) return nullptr;
  const size_t band = std::min({(rows_in - 2) * c.s_h - reach + 1, budget / (c.co * c.ow), c.oh});
  if (band == 0) return nullptr;
  auto rows = [&](size_t y0, size_t y1) {
    const size_t lo = y0 + c.pad_h, hi = y1 - 1 + c.pad_h;  // iy * s in [lo - reach, hi]
    size_t iy0 = lo > reach ? (lo - reach + c.s_h - 1) / c.s_h : 0;
    iy0 = std::min(iy0, lo / c.s_h);  // pad = lo - iy0 * s >= 0
    const size_t iy1 = std::min(c.ih, hi / c.s_h + 1);
    if (iy1 <= iy0) return BandRows{0, 0, 0};  // no input row lands in the band
    return BandRows{iy0, iy1, lo - iy0 * c.s_h};
  };
  return run_in_bands(x, l, c, band, rows, [&](const VulkanStorage& xb, const Layout& lb, const Conv& cb) {
    return run_conv_transpose(xb, lb, k, kl, cb, false);
  });
}

StoragePtr run_conv_transpose(const VulkanStorage& x, const Layout& l, const VulkanStorage& k,
                              const Layout& kl, const Conv& c, bool may_band) {
  Context& ctx = x.ctx();
  const char* sfx = float_suffix(ctx, x.dtype());
  if (!sfx || k.dtype() != x.dtype()) return nullptr;
  const size_t ci_g = c.ci / c.groups, co_g = c.co / c.groups;
  const size_t n_out = c.b * c.co * c.oh * c.ow;
  const size_t es = dtype_size(x.dtype());
  const size_t budget = bind_budget(ctx, es);
  auto [xlo, xhi] = layout_span(l);
  if (c.ci * co_g * c.kh * c.kw > budget) return nullptr;
  if (xhi - xlo > budget || !fits32(n_out) || !fits32(xhi))
    return may_band ? run_conv_transpose_banded(x, l, k, kl, c) : nullptr;
  auto out = x.vdev().make(x.dtype(), n_out);
  if (n_out == 0) return out;
  Dense w = dense(k, kl);
  auto bx = bind_range(x, xlo, xhi);
  auto bw = bind_range(*w.s, w.first, w.first + c.ci * co_g * c.kh * c.kw);
  ConvTPush pc{};
  pc.in_off = bx.first;
  pc.sb = static_cast<uint32_t>(c.sb);
  pc.sc = static_cast<uint32_t>(c.sc);
  pc.sh = static_cast<uint32_t>(c.sh);
  pc.sw = static_cast<uint32_t>(c.sw);
  pc.ih = static_cast<uint32_t>(c.ih);
  pc.iw = static_cast<uint32_t>(c.iw);
  pc.w_off = bw.first;
  pc.ci_g = static_cast<uint32_t>(ci_g);
  pc.co_g = static_cast<uint32_t>(co_g);
  pc.groups = static_cast<uint32_t>(c.groups);
  pc.kh = static_cast<uint32_t>(c.kh);
  pc.kw = static_cast<uint32_t>(c.kw);
  pc.oh = static_cast<uint32_t>(c.oh);
  pc.ow = static_cast<uint32_t>(c.ow);
  pc.stride_h = static_cast<uint32_t>(c.s_h);
  pc.stride_w = static_cast<uint32_t>(c.s_w);
  pc.pad_h = static_cast<uint32_t>(c.pad_h);
  pc.pad_w = static_cast<uint32_t>(c.pad_w);
  pc.dil_h = static_cast<uint32_t>(c.d_h);
  pc.dil_w = static_cast<uint32_t>(c.d_w);
  std::string kname = std::string("conv_transpose2d_") + sfx;
  const size_t chunk = budget;
  for (size_t first = 0; first < n_out; first += chunk) {
    const size_t n = std::min(chunk, n_out - first);
    auto bo = bind_range(*out, first, first + n);
    pc.n = static_cast<uint32_t>(n);
    pc.first = static_cast<uint32_t>(first);
    pc.out_off = bo.first;
    uint32_t gx, gy;
    grid_for(ctx, n, kWorkGroup, gx, gy);
    ctx.dispatch(kname.c_str(), {bx.b, bw.b, bo.b}, &pc, sizeof(pc), gx, gy);
  }
  return out;
}

Conv conv2d_problem(const Layout& l, const ParamsConv2D& p, bool transpose) {
  const auto& st = l.stride();
  Conv c{};
  c.b = p.b_size, c.ci = p.c_in, c.co = p.c_out, c.ih = p.i_h, c.iw = p.i_w, c.kh = p.k_h, c.kw = p.k_w;
  c.oh = transpose ? p.out_h_transpose() : p.out_h();
  c.ow = transpose ? p.out_w_transpose() : p.out_w();
  c.pad_h = c.pad_w = p.padding;
  c.s_h = c.s_w = p.stride;
  c.d_h = c.d_w = p.dilation;
  c.groups = p.groups;
  c.sb = st[0], c.sc = st[1], c.sh = st[2], c.sw = st[3];
  return c;
}

Conv conv1d_problem(const Layout& l, const ParamsConv1D& p, bool transpose) {
  const auto& st = l.stride();
  Conv c{};
  c.b = p.b_size, c.ci = p.c_in, c.co = p.c_out, c.ih = 1, c.iw = p.l_in, c.kh = 1, c.kw = p.k_size;
  c.oh = 1;
  c.ow = transpose ? p.l_out_transpose() : p.l_out();
  c.pad_h = 0, c.pad_w = p.padding;
  c.s_h = 1, c.s_w = p.stride;
  c.d_h = 1, c.d_w = p.dilation;
  c.groups = p.groups;
  c.sb = st[0], c.sc = st[1], c.sh = 0, c.sw = st[2];
  return c;
}

}  // namespace

StoragePtr VulkanStorage::conv2d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                 const ParamsConv2D& p, const ConvEpilogue& epilogue) const {
  if (l.dims().size() == 4 && p.groups > 0) {
    if (auto r =
            run_conv(*this, l, as_vk(kernel, "conv2d"), kernel_l, conv2d_problem(l, p, false), &epilogue))
      return r;
  }
  note_round_trip("conv2d");
  return BackendStorage::conv2d(l, kernel, kernel_l, p, epilogue);
}

StoragePtr VulkanStorage::conv1d(const Layout& l, const BackendStorage& kernel, const Layout& kernel_l,
                                 const ParamsConv1D& p) const {
  if (l.dims().size() == 3 && p.groups > 0) {
    if (auto r = run_conv(*this, l, as_vk(kernel, "conv1d"), kernel_l, conv1d_problem(l, p, false), nullptr))
      return r;
  }
  note_round_trip("conv1d");
  return BackendStorage::conv1d(l, kernel, kernel_l, p);
}

StoragePtr VulkanStorage::conv_transpose2d(const Layout& l, const BackendStorage& kernel,
                                           const Layout& kernel_l, const ParamsConv2D& p) const {
  if (l.dims().size() == 4 && p.groups > 0 && p.stride > 0) {
    if (auto r = run_conv_transpose(*this, l, as_vk(kernel, "conv_transpose2d"), kernel_l,
                                    conv2d_problem(l, p, true)))
      return r;
  }
  note_round_trip("conv_transpose2d");
  return BackendStorage::conv_transpose2d(l, kernel, kernel_l, p);
}

StoragePtr VulkanStorage::conv_transpose1d(const Layout& l, const BackendStorage& kernel,
                                           const Layout& kernel_l, const ParamsConv1D& p) const {
  if (l.dims().size() == 3 && p.groups > 0 && p.stride > 0) {
    if (auto r = run_conv_transpose(*this, l, as_vk(kernel, "conv_transpose1d"), kernel_l,
                                    conv1d_problem(l, p, true)))
      return r;
  }
  note_round_trip("conv_transpose1d");
  return BackendStorage::conv_transpose1d(l, kernel, kernel_l, p);
}

}  // namespace candle::vk_backend
