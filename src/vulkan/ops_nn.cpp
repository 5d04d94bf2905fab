// The fused last-dim ops of candle::nn: softmax_last_dim (softmax.comp), rms_norm / layer_norm
// (norm.comp) and rope / rope_i / rope_thd (rope.comp), reached through BackendStorage's hooks
// from the forwards of candle::nn's custom ops. Semantics are those of the CPU kernels
// (src/cpu/nn_fused.cpp): f32 compute for f16, the output dense. A case without a kernel
// returns nullptr and the op composes tensor ops instead (operands beyond one binding, dtypes
// without float kernels, mixed dtypes).
#include <algorithm>
#include <optional>
#include <string>

#include "core/row_layout.h"
#include "storage.h"

namespace candle::vk_backend {
namespace {

struct RowPush {
  uint32_t n_rows, d, row_stride, x_off, y_off, tpr_log2;
  uint32_t a_off, a_st, b_off, b_st, eps_bits, layer;
};

struct RopePush {
  uint32_t n, half, d1, d2, kind;
  uint32_t x_off, xs0, xs1, xs2, xs3;
  uint32_t c_off, cs0, cs1, cs2;
  uint32_t s_off, ss0, ss1, ss2;
  uint32_t y_off;
};
static_assert(sizeof(RopePush) <= 128);

constexpr size_t kU32 = 0xffffffffull;
// lavapipe ends a shader loop after 65535 iterations: rows up to this many per thread
constexpr size_t kMaxLoop = 65535;

// The rows of xs as a kernel reads them: a storage, its first element and the distance
// between rows. xs is read in place when its last dim is dense (or of length 1) and its other
// dims fold into one row stride (narrowed last dims, broadcast rows); else densified first.
struct Rows {
  Dense src;
  size_t n_rows, d, row_stride;
};

Rows rows_of(const VulkanStorage& x, const Layout& l) {
  const size_t d = l.dims().back();
  const size_t n_rows = d ? l.elem_count() / d : 0;
  if (auto rs = uniform_row_stride(l)) return {{&x, l.start_offset(), nullptr}, n_rows, d, *rs};
  return {dense(x, l), n_rows, d, d};
}

// Threads per row: about 8 elements each, a power of two up to the work-group.
uint32_t tpr_log2_for(size_t d) {
  uint32_t k = 0;
  while (k < 8 && (size_t(1) << k) * 8 < d) ++k;
  return k;
}

// Whether the op's dtype has kernels and every operand is a storage of this device and dtype.
const VulkanStorage* same_kind(const VulkanStorage& x, const BackendStorage& o) {
  auto* v = dynamic_cast<const VulkanStorage*>(&o);
  if (!v || &v->vdev() != &x.vdev() || v->dtype() != x.dtype()) return nullptr;
  return v;
}

// A 1-D vector [d] (alpha/beta) as (binding, offset, stride); nullopt when it does not fit.
struct Vec {
  RangeBinding rb;
  uint32_t stride;
};
std::optional<Vec> vec_of(const VulkanStorage& v, const Layout& l, size_t d, size_t budget) {
  if (l.dims().size() != 1 || l.dims()[0] != d) return std::nullopt;
  auto [lo, hi] = layout_span(l);
  if (hi - lo > budget || hi > v.elem_count()) return std::nullopt;
  return Vec{bind_range(v, lo, hi), d > 1 ? static_cast<uint32_t>(l.stride()[0]) : 0u};
}

// One dispatch of a row kernel over every row; nullptr when an operand does not fit one
// binding or the shape exceeds the kernel's 32-bit indexing.
StoragePtr run_rows(const VulkanStorage& x, const Layout& l, const char* stem, RowPush pc, const Vec* alpha,
                    const Vec* beta) {
  const char* sfx = float_suffix(x.ctx(), x.dtype());
  if (!sfx || l.dims().empty()) return nullptr;
  Context& ctx = x.ctx();
  const size_t n = l.elem_count();
  if (n == 0) return x.vdev().make(x.dtype(), 0);
  const size_t budget = bind_budget(ctx, dtype_size(x.dtype()));
  const size_t d = l.dims().back();
  const uint32_t tl = tpr_log2_for(d);
  if (n > budget || n > kU32 || (d >> tl) >= kMaxLoop) return nullptr;
  Rows rows = rows_of(x, l);
  const size_t span = (rows.n_rows - 1) * rows.row_stride + rows.d;
  if (span > budget || rows.row_stride > kU32) return nullptr;
  auto out = x.vdev().make(x.dtype(), n);
  auto bx = bind_range(*rows.src.s, rows.src.first, rows.src.first + span);
  auto by = bind_range(*out, 0, n);
  pc.n_rows = static_cast<uint32_t>(rows.n_rows);
  pc.d = static_cast<uint32_t>(d);
  pc.row_stride = static_cast<uint32_t>(rows.row_stride);
  pc.x_off = bx.first;
  pc.y_off = by.first;
  pc.tpr_log2 = tl;
  uint32_t gx, gy;
  grid_for(ctx, rows.n_rows, size_t(256) >> tl, gx, gy);
  const std::string k = std::string(stem) + "_" + sfx;
  if (alpha) {
    pc.a_off = alpha->rb.first;
    pc.a_st = alpha->stride;
    const Vec& b = beta ? *beta : *alpha;
    pc.b_off = b.rb.first;
    pc.b_st = b.stride;
    ctx.dispatch(k.c_str(), {bx.b, alpha->rb.b, b.rb.b, by.b}, &pc, sizeof(pc), gx, gy);
  } else {
    ctx.dispatch(k.c_str(), {bx.b, by.b}, &pc, sizeof(pc), gx, gy);
  }
  return out;
}

StoragePtr norm(const VulkanStorage& x, const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                const BackendStorage* beta, const Layout* beta_l, float eps) {
  if (l.dims().empty() || !float_suffix(x.ctx(), x.dtype())) return nullptr;
  const size_t d = l.dims().back();
  const size_t budget = bind_budget(x.ctx(), dtype_size(x.dtype()));
  const VulkanStorage* a = same_kind(x, alpha);
  const VulkanStorage* b = beta ? same_kind(x, *beta) : nullptr;
  if (!a || (beta && !b)) return nullptr;
  auto av = vec_of(*a, alpha_l, d, budget);
  std::optional<Vec> bv;
  if (b) bv = vec_of(*b, *beta_l, d, budget);
  if (!av || (b && !bv)) return nullptr;
  RowPush pc{};
  pc.eps_bits = f32_bits(eps);
  pc.layer = b ? 1 : 0;
  return run_rows(x, l, "norm", pc, &*av, bv ? &*bv : nullptr);
}

}  // namespace

StoragePtr VulkanStorage::softmax_last_dim(const Layout& l) const {
  return run_rows(*this, l, "softmax", RowPush{}, nullptr, nullptr);
}

StoragePtr VulkanStorage::rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                   float eps) const {
  return norm(*this, l, alpha, alpha_l, nullptr, nullptr, eps);
}

StoragePtr VulkanStorage::layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                     const BackendStorage& beta, const Layout& beta_l, float eps) const {
  return norm(*this, l, alpha, alpha_l, &beta, &beta_l, eps);
}

StoragePtr VulkanStorage::rope(RopeKind kind, const Layout& l, const BackendStorage& cos_s,
                               const Layout& cos_l, const BackendStorage& sin_s, const Layout& sin_l) const {
  const char* sfx = float_suffix(ctx(), dtype_);
  const VulkanStorage* c = same_kind(*this, cos_s);
  const VulkanStorage* s = same_kind(*this, sin_s);
  if (!sfx || !c || !s || l.dims().size() != 4 || cos_l.dims() != sin_l.dims()) return nullptr;
  const auto& xd = l.dims();
  const size_t b = xd[0], d1 = xd[1], d2 = xd[2], d = xd[3], half = d / 2;
  const size_t t = kind == RopeKind::HalvesThd ? d1 : d2;
  const auto& cd = cos_l.dims();
  const bool batched = cd.size() == 3;
  if (d % 2 != 0 || (cd.size() != 2 && !batched) || cd.back() != half || cd[batched ? 1 : 0] < t ||
      (batched && cd[0] != b))
    return nullptr;
  const size_t n = l.elem_count();
  if (n == 0) return vdev().make(dtype_, 0);
  const size_t budget = bind_budget(ctx(), dtype_size(dtype_));
  auto [xlo, xhi] = layout_span(l);
  auto [clo, chi] = layout_span(cos_l);
  auto [slo, shi] = layout_span(sin_l);
  if (n > budget || n > kU32 || xhi - xlo > budget || chi - clo > budget || shi - slo > budget)
    return nullptr;
  auto out = vdev().make(dtype_, n);
  auto bx = bind_range(*this, xlo, xhi);
  auto bc = bind_range(*c, clo, chi);
  auto bs = bind_range(*s, slo, shi);
  auto by = bind_range(*out, 0, n);
  // strides of size-1 dims are never multiplied by a non-zero index: 0 keeps them in range
  auto st = [](const Layout& ly, size_t i) {
    return ly.dims()[i] > 1 ? static_cast<uint32_t>(ly.stride()[i]) : 0u;
  };
  const size_t o = batched ? 1 : 0;
  RopePush pc{};
  pc.n = static_cast<uint32_t>(n / 2);
  pc.half = static_cast<uint32_t>(half);
  pc.d1 = static_cast<uint32_t>(d1);
  pc.d2 = static_cast<uint32_t>(d2);
  pc.kind = static_cast<uint32_t>(kind);
  pc.x_off = bx.first;
  pc.xs0 = st(l, 0);
  pc.xs1 = st(l, 1);
  pc.xs2 = st(l, 2);
  pc.xs3 = st(l, 3);
  pc.c_off = bc.first;
  pc.cs0 = batched ? st(cos_l, 0) : 0u;
  pc.cs1 = st(cos_l, o);
  pc.cs2 = st(cos_l, o + 1);
  pc.s_off = bs.first;
  pc.ss0 = batched ? st(sin_l, 0) : 0u;
  pc.ss1 = st(sin_l, o);
  pc.ss2 = st(sin_l, o + 1);
  pc.y_off = by.first;
  uint32_t gx, gy;
  grid_for(ctx(), n / 2, kWorkGroup, gx, gy);
  const std::string k = std::string("rope_") + sfx;
  ctx().dispatch(k.c_str(), {bx.b, bc.b, bs.b, by.b}, &pc, sizeof(pc), gx, gy);
  return out;
}

}  // namespace candle::vk_backend
