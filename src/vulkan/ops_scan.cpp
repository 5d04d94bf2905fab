// cumsum (cumsum.comp), arg_sort_last_dim (argsort.comp), index_add / scatter_set /
// scatter_add_set (scatter.comp). cumsum, index_add and scatter_add also on u8/u32/i64
// (wrapping sums in the CPU's order: bit-identical).
#include <algorithm>
#include <string>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct CumsumPush {
  uint32_t cols, len, right, in_off, out_off, i0, i1;
};
// Positions one dispatch of a serial loop walks (lavapipe stops a loop after 65535 iterations).
constexpr size_t kSegment = 32768;
struct SortPush {
  uint32_t len, row0, descending, in_off, out_off;
};
struct ScatterPush {
  uint32_t cols, n, dst_dim, right, dst_off, ids_off, src_off, ids_1d, k0, k1, tag;
};

bool fits(const Context& ctx, DType dt, size_t n) {
  return n <= bind_budget(ctx, dtype_size(dt)) && n <= 0xffffffffull;
}

const char* id_suffix(DType dt) { return dt == DType::U32 ? "u32" : dt == DType::I64 ? "i64" : nullptr; }

// dst [left, dst_dim, right] (op)= src [left, n, right] along ids (1-D when ids_1d); dst is
// dense from element dst_first of `dst`. False when there is no kernel for the case.
bool run_scatter(VulkanStorage& dst, size_t dst_first, const Shape& dst_shape, const VulkanStorage& ids,
                 const Layout& ids_l, const VulkanStorage& src, const Layout& src_l, size_t dim, bool add,
                 bool ids_1d) {
  Context& ctx = dst.ctx();
  const char* is = id_suffix(ids.dtype());
  const char* vs = add ? num_suffix(ctx, dst.dtype()) : bytes_suffix(ctx, dst.dtype());
  if (!is || !vs || src.dtype() != dst.dtype() || dim >= dst_shape.rank()) return false;
  size_t left = 1, right = 1;
  for (size_t d = 0; d < dim; ++d) left *= dst_shape[d];
  for (size_t d = dim + 1; d < dst_shape.rank(); ++d) right *= dst_shape[d];
  const size_t dst_dim = dst_shape[dim], n = src_l.dims()[dim];
  const size_t nd = dst_shape.elem_count(), ns = src_l.elem_count();
  if (!fits(ctx, dst.dtype(), dst_first + nd) || !fits(ctx, dst.dtype(), ns) ||
      !fits(ctx, DType::I64, ids_l.elem_count()))
    return false;
  if (nd == 0 || ns == 0) return true;
  // ids and src are read while dst is written: copies when they share its memory
  auto own = [&](const VulkanStorage& v, const Layout& vl) {
    if (&v.block() != &dst.block()) return dense(v, vl);
    auto tmp = v.vdev().make(v.dtype(), vl.elem_count());
    v.copy_strided_src(*tmp, 0, vl);
    return Dense{tmp.get(), 0, tmp};
  };
  Dense s = own(src, src_l);
  Dense id = own(ids, ids_l);
  auto bd = bind_range(dst, dst_first, dst_first + nd);
  auto bi = bind_range(*id.s, id.first, id.first + ids_l.elem_count());
  auto bs = bind_range(*s.s, s.first, s.first + ns);
  const char* op = ids_1d ? "index_add" : add ? "scatter_add" : "scatter";
  const uint32_t tag = check_ids(ctx, ids.dtype(), bi, ids_l.elem_count(), dst_dim, op, dim, dst_shape);
  ScatterPush pc{static_cast<uint32_t>(left * right),
                 static_cast<uint32_t>(n),
                 static_cast<uint32_t>(dst_dim),
                 static_cast<uint32_t>(right),
                 bd.first,
                 bi.first,
                 bs.first,
                 ids_1d ? 1u : 0u,
                 0,
                 0,
                 tag};
  uint32_t gx, gy;
  grid_for(ctx, left * right, kWorkGroup, gx, gy);
  std::string k = std::string("scatter_") + (add ? "add_" : "set_") + vs + "_" + is;
  for (size_t k0 = 0; k0 < n; k0 += kSegment) {  // in order: dispatches run one after another
    pc.k0 = static_cast<uint32_t>(k0);
    pc.k1 = static_cast<uint32_t>(std::min(n, k0 + kSegment));
    ctx.dispatch(k.c_str(), {bd.b, bi.b, bs.b, ctx.fault_binding()}, &pc, sizeof(pc), gx, gy);
  }
  return true;
}

}  // namespace

StoragePtr VulkanStorage::cumsum(const Layout& l, size_t dim) const {
  const char* sfx = num_suffix(ctx(), dtype_);
  if (sfx && dim < l.dims().size() && fits(ctx(), dtype_, l.elem_count())) {
    const size_t n = l.elem_count();
    auto out = vdev().make(dtype_, n);
    if (n == 0) return out;
    Dense x = dense(*this, l);
    size_t left = 1, right = 1;
    for (size_t d = 0; d < dim; ++d) left *= l.dims()[d];
    for (size_t d = dim + 1; d < l.dims().size(); ++d) right *= l.dims()[d];
    auto bx = bind_range(*x.s, x.first, x.first + n);
    auto bo = bind_range(*out, 0, n);
    const size_t len = l.dims()[dim];
    CumsumPush pc{static_cast<uint32_t>(left * right),
                  static_cast<uint32_t>(len),
                  static_cast<uint32_t>(right),
                  bx.first,
                  bo.first,
                  0,
                  0};
    uint32_t gx, gy;
    grid_for(ctx(), left * right, kWorkGroup, gx, gy);
    std::string k = std::string("cumsum_") + sfx;
    auto state = vdev().make(DType::F32, len > kSegment ? 2 * left * right : 1);
    auto bst = bind_range(*state, 0, state->elem_count());
    for (size_t i0 = 0; i0 < len; i0 += kSegment) {
      pc.i0 = static_cast<uint32_t>(i0);
      pc.i1 = static_cast<uint32_t>(std::min(len, i0 + kSegment));
      ctx().dispatch(k.c_str(), {bx.b, bo.b, bst.b}, &pc, sizeof(pc), gx, gy);
    }
    return out;
  }
  note_round_trip("cumsum");
  return BackendStorage::cumsum(l, dim);
}

StoragePtr VulkanStorage::arg_sort_last_dim(const Layout& l, bool ascending) const {
  const char* sfx = float_suffix(ctx(), dtype_);
  if (sfx && !l.dims().empty() && fits(ctx(), dtype_, l.elem_count())) {
    const size_t n = l.elem_count(), len = l.dims().back();
    auto out = vdev().make(DType::U32, n);
    if (n == 0) return out;
    Dense x = dense(*this, l);
    auto bx = bind_range(*x.s, x.first, x.first + n);
    auto bo = bind_range(*out, 0, n);
    const size_t rows = n / len;
    const auto& f = ctx().features();
    const size_t gx = (len + 255) / 256;
    if (gx <= f.max_groups[0]) {
      std::string k = std::string("argsort_") + sfx;
      for (size_t r0 = 0; r0 < rows; r0 += f.max_groups[1]) {
        SortPush pc{static_cast<uint32_t>(len), static_cast<uint32_t>(r0), ascending ? 0u : 1u, bx.first,
                    bo.first};
        ctx().dispatch(k.c_str(), {bx.b, bo.b}, &pc, sizeof(pc), static_cast<uint32_t>(gx),
                       static_cast<uint32_t>(std::min<size_t>(rows - r0, f.max_groups[1])));
      }
      return out;
    }
  }
  note_round_trip("arg_sort_last_dim");
  return BackendStorage::arg_sort_last_dim(l, ascending);
}

StoragePtr VulkanStorage::index_add(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                                    const BackendStorage& src_base, const Layout& src_l, size_t dim) const {
  const auto& ids = as_vk(ids_base, "index_add");
  const auto& src = as_vk(src_base, "index_add");
  if (num_suffix(ctx(), dtype_) && id_suffix(ids.dtype()) && ids_l.dims().size() == 1 &&
      src.dtype() == dtype_ && dim < l.dims().size() && fits(ctx(), dtype_, l.elem_count())) {
    auto out = vdev().make(dtype_, l.elem_count());
    if (l.elem_count()) copy_strided_src(*out, 0, l);
    if (run_scatter(*out, 0, l.shape(), ids, ids_l, src, src_l, dim, true, true)) return out;
  }
  note_round_trip("index_add");
  return BackendStorage::index_add(l, ids_base, ids_l, src_base, src_l, dim);
}

void VulkanStorage::scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                const BackendStorage& src, const Layout& src_l, size_t dim) {
  if (l.is_contiguous() && run_scatter(*this, l.start_offset(), l.shape(), as_vk(ids, "scatter"), ids_l,
                                       as_vk(src, "scatter"), src_l, dim, false, false))
    return;
  note_round_trip("scatter_set");
  BackendStorage::scatter_set(l, ids, ids_l, src, src_l, dim);
}

void VulkanStorage::scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                    const BackendStorage& src, const Layout& src_l, size_t dim) {
  if (l.is_contiguous() && run_scatter(*this, l.start_offset(), l.shape(), as_vk(ids, "scatter_add"), ids_l,
                                       as_vk(src, "scatter_add"), src_l, dim, true, false))
    return;
  note_round_trip("scatter_add_set");
  BackendStorage::scatter_add_set(l, ids, ids_l, src, src_l, dim);
}

}  // namespace candle::vk_backend
