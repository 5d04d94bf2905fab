// Pooling and resizing: avg/max_pool2d and upsample_bilinear2d (resize.comp),
// upsample_nearest1d/2d (nearest.comp). Index and weight tables are computed on the host with
// the CPU backend's rules and uploaded, so the sampled positions are the CPU's exactly.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/resize_index.h"
#include "storage.h"

namespace candle::vk_backend {
namespace {

struct ResizePush {
  uint32_t n, first;
  uint32_t in_off, sb, sc, sh, sw;
  uint32_t c, oh, ow;
  uint32_t kh, kw, s_h, s_w;
  uint32_t out_off, mode;
};

// The input as planes of [b, c, h, w] with strides (1-D: h = 1, sh = 0).
struct Planes {
  size_t b, c, h, w, sb, sc, sh, sw;
};

Planes planes(const Layout& l) {
  const auto& d = l.dims();
  const auto& s = l.stride();
  if (d.size() == 3) return {d[0], d[1], 1, d[2], s[0], s[1], 0, s[2]};
  return {d[0], d[1], d[2], d[3], s[0], s[1], s[2], s[3]};
}

// Runs `kernel` over an output of [b, c, oh, ow] elements. An input beyond one binding is
// taken in runs of whole planes of one image whose extent fits (each run bound on its own, its
// output elements a sub-range of the output); nullptr when one plane does not fit.
StoragePtr run_resize(const VulkanStorage& x, const Layout& l, const char* kernel, const Planes& p, size_t oh,
                      size_t ow, ResizePush pc, const VulkanStorage* tab) {
  Context& ctx = x.ctx();
  const size_t n_out = p.b * p.c * oh * ow, plane_out = oh * ow;
  const size_t budget = bind_budget(ctx, dtype_size(x.dtype()));
  const auto [lo, hi] = layout_span(l);
  // the extent of k planes of one image, from the first one's start
  const size_t plane_ext = (p.h - 1) * p.sh + (p.w - 1) * p.sw + 1;
  auto run_extent = [&](size_t k) { return (k - 1) * p.sc + plane_ext; };
  const bool whole = hi - lo <= budget && hi <= 0xffffffffull && n_out <= 0xffffffffull;
  if (!whole && (p.h == 0 || p.w == 0 || plane_ext > budget || plane_out > 0xffffffffull)) return nullptr;
  auto out = x.vdev().make(x.dtype(), n_out);
  if (n_out == 0) return out;
  Binding bt = tab ? bind_range(*tab, 0, tab->elem_count()).b : Binding{};
  // planes [plane0, plane0 + count) of the dispatch's view q of the input, bound from in_lo
  auto run = [&](size_t in_lo, size_t in_hi, const Planes& q, size_t out_first, size_t count) {
    auto bx = bind_range(x, in_lo, in_hi);
    pc.in_off = bx.first;
    pc.sb = static_cast<uint32_t>(q.sb);
    pc.sc = static_cast<uint32_t>(q.sc);
    pc.sh = static_cast<uint32_t>(q.sh);
    pc.sw = static_cast<uint32_t>(q.sw);
    pc.c = static_cast<uint32_t>(q.c);
    pc.oh = static_cast<uint32_t>(oh);
    pc.ow = static_cast<uint32_t>(ow);
    const size_t n_run = count * plane_out;
    for (size_t first = 0; first < n_run; first += budget) {
      const size_t n = std::min(budget, n_run - first);
      auto bo = bind_range(*out, out_first + first, out_first + first + n);
      pc.n = static_cast<uint32_t>(n);
      pc.first = static_cast<uint32_t>(first);
      pc.out_off = bo.first;
      uint32_t gx, gy;
      grid_for(ctx, n, kWorkGroup, gx, gy);
      ctx.dispatch(kernel, {bx.b, bo.b, tab ? bt : bx.b}, &pc, sizeof(pc), gx, gy);
    }
  };
  if (whole) {
    run(lo, hi, p, 0, p.b * p.c);
    return out;
  }
  // planes per run: run_extent(k) <= budget and k * plane_out < 2^32
  const size_t k_in = p.sc == 0 ? p.c : (budget - plane_ext) / p.sc + 1;
  const size_t k =
      std::max<size_t>(1, std::min<size_t>({p.c, k_in, 0xffffffffull / std::max<size_t>(plane_out, 1)}));
  for (size_t b = 0; b < p.b; ++b) {
    for (size_t c0 = 0; c0 < p.c; c0 += k) {
      const size_t cnt = std::min(k, p.c - c0), start = lo + b * p.sb + c0 * p.sc;
      run(start, start + run_extent(cnt), Planes{1, cnt, p.h, p.w, 0, p.sc, p.sh, p.sw},
          (b * p.c + c0) * plane_out, cnt);
    }
  }
  return out;
}

StoragePtr pool(const VulkanStorage& x, const Layout& l, std::array<size_t, 2> k, std::array<size_t, 2> s,
                bool is_max) {
  const char* sfx = float_suffix(x.ctx(), x.dtype());
  if (!sfx || l.dims().size() != 4) return nullptr;
  Planes p = planes(l);
  // invalid windows: the CPU path raises the error
  if (k[0] == 0 || k[1] == 0 || s[0] == 0 || s[1] == 0 || k[0] > p.h || k[1] > p.w) return nullptr;
  const size_t oh = (p.h - k[0]) / s[0] + 1, ow = (p.w - k[1]) / s[1] + 1;
  ResizePush pc{};
  pc.kh = static_cast<uint32_t>(k[0]);
  pc.kw = static_cast<uint32_t>(k[1]);
  pc.s_h = static_cast<uint32_t>(s[0]);
  pc.s_w = static_cast<uint32_t>(s[1]);
  pc.mode = is_max ? 1 : 0;
  std::string kn = std::string("resize_") + sfx;
  return run_resize(x, l, kn.c_str(), p, oh, ow, pc, nullptr);
}

// The CPU's source indices (cpu/resize_index.h), as a u32 table.
void nearest_table(size_t in, size_t out, std::vector<uint32_t>& t) {
  for (size_t i : cpu::nearest_indices(in, out)) t.push_back(static_cast<uint32_t>(i));
}

StoragePtr nearest(const VulkanStorage& x, const Layout& l, size_t oh, size_t ow) {
  const char* sfx = bytes_suffix(x.ctx(), x.dtype());
  Planes p = planes(l);
  if (!sfx || p.h == 0 || p.w == 0) return nullptr;
  std::vector<uint32_t> t;
  nearest_table(p.h, oh, t);
  nearest_table(p.w, ow, t);
  auto tab = upload_u32(x.vdev(), t);
  ResizePush pc{};
  std::string kn = std::string("nearest_") + sfx;
  return run_resize(x, l, kn.c_str(), p, oh, ow, pc, tab.get());
}

// The CPU's linear taps (cpu/resize_index.h): i0, i1, bits of the f32 weights l0, l1 per output.
void linear_table(size_t in, size_t out, bool align_corners, std::optional<double> scale_factor,
                  std::vector<uint32_t>& t) {
  const cpu::LinearTaps taps = cpu::linear_taps(in, out, align_corners, scale_factor);
  for (size_t o = 0; o < out; ++o) {
    t.push_back(static_cast<uint32_t>(taps.i0[o]));
    t.push_back(static_cast<uint32_t>(taps.i1[o]));
    t.push_back(f32_bits(static_cast<float>(taps.l0[o])));
    t.push_back(f32_bits(static_cast<float>(taps.l1[o])));
  }
}

}  // namespace

StoragePtr VulkanStorage::avg_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                     std::array<size_t, 2> stride) const {
  if (auto r = pool(*this, l, kernel, stride, false)) return r;
  note_round_trip("avg_pool2d");
  return BackendStorage::avg_pool2d(l, kernel, stride);
}

StoragePtr VulkanStorage::max_pool2d(const Layout& l, std::array<size_t, 2> kernel,
                                     std::array<size_t, 2> stride) const {
  if (auto r = pool(*this, l, kernel, stride, true)) return r;
  note_round_trip("max_pool2d");
  return BackendStorage::max_pool2d(l, kernel, stride);
}

StoragePtr VulkanStorage::upsample_nearest1d(const Layout& l, size_t out_l) const {
  if (l.dims().size() == 3) {
    if (auto r = nearest(*this, l, 1, out_l)) return r;
  }
  note_round_trip("upsample_nearest1d");
  return BackendStorage::upsample_nearest1d(l, out_l);
}

StoragePtr VulkanStorage::upsample_nearest2d(const Layout& l, size_t out_h, size_t out_w) const {
  if (l.dims().size() == 4) {
    if (auto r = nearest(*this, l, out_h, out_w)) return r;
  }
  note_round_trip("upsample_nearest2d");
  return BackendStorage::upsample_nearest2d(l, out_h, out_w);
}

StoragePtr VulkanStorage::upsample_bilinear2d(const Layout& l, size_t out_h, size_t out_w, bool align_corners,
                                              std::optional<double> scale_h,
                                              std::optional<double> scale_w) const {
  const char* sfx = float_suffix(ctx(), dtype_);
  if (sfx && l.dims().size() == 4) {
    Planes p = planes(l);
    const size_t n = p.b * p.c * out_h * out_w;
    if (p.h == out_h && p.w == out_w) {  // a copy, as the CPU (exact for inf/NaN too)
      auto out = vdev().make(dtype_, n);
      if (n) copy_strided_src(*out, 0, l);
      return out;
    }
    if (p.h > 0 && p.w > 0) {
      std::vector<uint32_t> t;
      linear_table(p.h, out_h, align_corners, scale_h, t);
      linear_table(p.w, out_w, align_corners, scale_w, t);
      auto tab = upload_u32(vdev(), t);
      ResizePush pc{};
      pc.mode = 2;
      std::string kn = std::string("resize_") + sfx;
      if (auto r = run_resize(*this, l, kn.c_str(), p, out_h, out_w, pc, tab.get())) return r;
    }
  }
  note_round_trip("upsample_bilinear2d");
  return BackendStorage::upsample_bilinear2d(l, out_h, out_w, align_corners, scale_h, scale_w);
}

}  // namespace candle::vk_backend
