// matmul: batched strided GEMM (matmul.comp) and a GEMV path for m == 1 (gemv.comp).
#include <algorithm>
#include <string>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct MatmulPush {
  uint32_t m, n, k;
  uint32_t a_off, a_bs, a_sm, a_sk;
  uint32_t b_off, b_bs, b_sk, b_sn;
  uint32_t c_off;
  uint32_t batch0;
  uint32_t mode;
};

// The product on the GPU when every operand fits one binding; nullptr otherwise.
StoragePtr run_matmul(const VulkanStorage& a, const Layout& lhs_l, const VulkanStorage& b,
                      const Layout& rhs_l, MatmulDims d) {
  Context& ctx = a.ctx();
  const char* sfx = float_suffix(ctx, a.dtype());
  const size_t n_out = d.batch * d.m * d.n;
  const size_t budget = bind_budget(ctx, dtype_size(a.dtype()));
  auto [alo, ahi] = layout_span(lhs_l);
  auto [blo, bhi] = layout_span(rhs_l);
  if (ahi - alo > budget || bhi - blo > budget || n_out > budget || d.m * d.n > 0xffffffffull) return nullptr;
  auto out = a.vdev().make(a.dtype(), n_out);
  auto ba = bind_range(a, alo, ahi);
  auto bb = bind_range(b, blo, bhi);
  auto bc = bind_range(*out, 0, n_out);
  MatmulPush pc{};
  pc.m = static_cast<uint32_t>(d.m);
  pc.n = static_cast<uint32_t>(d.n);
  pc.k = static_cast<uint32_t>(d.k);
  pc.a_off = ba.first;
  pc.a_bs = static_cast<uint32_t>(lhs_l.stride()[0]);
  pc.a_sm = static_cast<uint32_t>(lhs_l.stride()[1]);
  pc.a_sk = static_cast<uint32_t>(lhs_l.stride()[2]);
  pc.b_off = bb.first;
  pc.b_bs = static_cast<uint32_t>(rhs_l.stride()[0]);
  pc.b_sk = static_cast<uint32_t>(rhs_l.stride()[1]);
  pc.b_sn = static_cast<uint32_t>(rhs_l.stride()[2]);
  pc.c_off = bc.first;
  const bool gemv = d.m == 1;
  pc.mode = gemv && pc.b_sk == 1 && d.k >= 64 ? 1 : 0;
  std::string kname = std::string(gemv ? "gemv_" : "matmul_") + sfx;
  uint32_t gx, gy;
  if (gemv) {
    grid_for(ctx, d.n, pc.mode == 1 ? 1 : kWorkGroup, gx, gy);
  } else {
    gx = static_cast<uint32_t>((d.n + 63) / 64);
    gy = static_cast<uint32_t>((d.m + 63) / 64);
  }
  const auto& f = ctx.features();
  if (gx > f.max_groups[0] || gy > f.max_groups[1]) return nullptr;
  for (size_t b0 = 0; b0 < d.batch; b0 += f.max_groups[2]) {
    pc.batch0 = static_cast<uint32_t>(b0);
    uint32_t gz = static_cast<uint32_t>(std::min<size_t>(d.batch - b0, f.max_groups[2]));
    ctx.dispatch(kname.c_str(), {ba.b, bb.b, bc.b}, &pc, sizeof(pc), gx, gy, gz);
  }
  return out;
}

// A product with an operand past one binding: per batch, blocks of C (rows [m0, m1) x columns
// [n0, n1)) whose rows of A and columns of B (made dense when their strided extent is still
// too big) fit; each block's result copied into place. nullptr when one row of A (k elements)
// does not fit.
StoragePtr run_matmul_blocked(const VulkanStorage& a, const Layout& al, const VulkanStorage& b,
                              const Layout& bl, MatmulDims d) {
  const size_t budget = bind_budget(a.ctx(), dtype_size(a.dtype()));
  if (d.k > budget) return nullptr;
  const size_t mb = std::min(d.m, budget / d.k);
  const size_t nb = std::min({d.n, budget / d.k, budget / mb});
  const auto &sa = al.stride(), &sb = bl.stride();
  auto out = a.vdev().make(a.dtype(), d.batch * d.m * d.n);
  auto fitted = [&](const VulkanStorage& s, const Layout& l) {
    auto [lo, hi] = layout_span(l);
    if (hi - lo <= budget) return Dense{&s, 0, nullptr};
    return dense(s, l);
  };
  for (size_t bi = 0; bi < d.batch; ++bi) {
    for (size_t m0 = 0; m0 < d.m; m0 += mb) {
      const size_t mh = std::min(mb, d.m - m0);
      Layout ab(Shape{1, mh, d.k}, {sa[0], sa[1], sa[2]}, al.start_offset() + bi * sa[0] + m0 * sa[1]);
      Dense ad = fitted(a, ab);
      const Layout abl = ad.keep ? Layout::contiguous(ab.shape()) : ab;
      for (size_t n0 = 0; n0 < d.n; n0 += nb) {
        const size_t nw = std::min(nb, d.n - n0);
        Layout bb(Shape{1, d.k, nw}, {sb[0], sb[1], sb[2]}, bl.start_offset() + bi * sb[0] + n0 * sb[2]);
        Dense bd = fitted(b, bb);
        const Layout bbl = bd.keep ? Layout::contiguous(bb.shape()) : bb;
        auto part = run_matmul(*ad.s, abl, *bd.s, bbl, MatmulDims{1, mh, nw, d.k});
        if (!part) return nullptr;
        part->copy2d(*out, mh, nw, nw, d.n, 0, (bi * d.m + m0) * d.n + n0);
      }
    }
  }
  return out;
}

}  // namespace

StoragePtr VulkanStorage::matmul(const Layout& lhs_l, const BackendStorage& rhs_base, const Layout& rhs_l,
                                 MatmulDims d) const {
  const auto& rhs = as_vk(rhs_base, "matmul");
  if (float_suffix(ctx(), dtype_) && rhs.dtype() == dtype_ && lhs_l.dims().size() == 3 &&
      rhs_l.dims().size() == 3) {
    const size_t n_out = d.batch * d.m * d.n;
    if (n_out == 0) return vdev().make(dtype_, 0);
    if (d.k == 0) {
      auto out = vdev().make(dtype_, n_out);
      out->const_set(Scalar(0.0), Layout::contiguous(Shape{n_out}));
      return out;
    }
    if (auto r = run_matmul(*this, lhs_l, rhs, rhs_l, d)) return r;
    if (auto r = run_matmul_blocked(*this, lhs_l, rhs, rhs_l, d)) return r;
  }
  // other dtypes, a row of A past one binding
  note_round_trip("matmul");
  return BackendStorage::matmul(lhs_l, rhs_base, rhs_l, d);
}

}  // namespace candle::vk_backend
