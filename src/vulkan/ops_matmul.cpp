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

// [min, max) storage elements of a [batch, r, c] layout.
std::pair<size_t, size_t> extent(const Layout& l) { return {l.start_offset(), l.max_offset_exclusive()}; }

}  // namespace

StoragePtr VulkanStorage::matmul(const Layout& lhs_l, const BackendStorage& rhs_base, const Layout& rhs_l,
                                 MatmulDims d) const {
  const auto& rhs = as_vk(rhs_base, "matmul");
  const char* sfx = float_suffix(ctx(), dtype_);
  const size_t n_out = d.batch * d.m * d.n;
  auto fits32 = [](size_t v) { return v <= 0xffffffffull; };
  if (sfx && rhs.dtype() == dtype_ && lhs_l.dims().size() == 3 && rhs_l.dims().size() == 3) {
    auto out = vdev().make(dtype_, n_out);
    if (n_out == 0) return out;
    if (d.k == 0) {
      out->const_set(Scalar(0.0), Layout::contiguous(Shape{n_out}));
      return out;
    }
    const size_t es = dtype_size(dtype_);
    const size_t budget = bind_budget(ctx(), es);
    auto [alo, ahi] = extent(lhs_l);
    auto [blo, bhi] = extent(rhs_l);
    if (ahi - alo <= budget && bhi - blo <= budget && n_out <= budget && fits32(d.m * d.n)) {
      auto ba = bind_range(*this, alo, ahi);
      auto bb = bind_range(rhs, blo, bhi);
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
      if (gemv)
        grid_for(ctx(), d.n, pc.mode == 1 ? 1 : kWorkGroup, gx, gy);
      else {
        gx = static_cast<uint32_t>((d.n + 63) / 64);
        gy = static_cast<uint32_t>((d.m + 63) / 64);
      }
      const auto& f = ctx().features();
      if (gx <= f.max_groups[0] && gy <= f.max_groups[1]) {
        for (size_t b0 = 0; b0 < d.batch; b0 += f.max_groups[2]) {
          pc.batch0 = static_cast<uint32_t>(b0);
          uint32_t gz = static_cast<uint32_t>(std::min<size_t>(d.batch - b0, f.max_groups[2]));
          ctx().dispatch(kname.c_str(), {ba.b, bb.b, bc.b}, &pc, sizeof(pc), gx, gy, gz);
        }
        return out;
      }
    }
  }
  // other dtypes, operands larger than a binding
  note_round_trip("matmul");
  return BackendStorage::matmul(lhs_l, rhs_base, rhs_l, d);
}

}  // namespace candle::vk_backend
