// index_select and gather (index.comp) over a contiguous source.
#include <algorithm>
#include <string>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct IndexPush {
  uint32_t n, first, src_dim, n_ids, right, src_off, ids_off, out_off, mode, tag, id_lo, id_n;
};

// out [left, n_ids, right] from src [left, src_dim, right]; mode 0 index_select, 1 gather.
// The output is written in chunks that fit a binding; a source past one binding is bound in
// ranges of rows when left == 1 (an embedding table). Returns nullptr when there is no kernel
// for the dtypes or an operand cannot be bound.
StoragePtr run_index(const VulkanStorage& self, const Layout& l, const VulkanStorage& ids,
                     const Layout& ids_l, size_t dim, uint32_t mode, const Shape& out_shape) {
  Context& ctx = self.ctx();
  const char* vs = bytes_suffix(ctx, self.dtype());
  const char* is = ids.dtype() == DType::U32 ? "u32" : ids.dtype() == DType::I64 ? "i64" : nullptr;
  if (!vs || !is || dim >= l.dims().size()) return nullptr;
  size_t left = 1, right = 1;
  for (size_t d = 0; d < dim; ++d) left *= l.dims()[d];
  for (size_t d = dim + 1; d < l.dims().size(); ++d) right *= l.dims()[d];
  const size_t src_dim = l.dims()[dim];
  const size_t n_ids = mode == 0 ? ids_l.elem_count() : ids_l.dims()[dim];
  const size_t n = out_shape.elem_count();
  const size_t es = dtype_size(self.dtype()), budget = bind_budget(ctx, es);
  const size_t n_src = l.elem_count();
  // source rows per binding: all, or (left == 1) as many as fit
  const size_t rows = n_src <= budget ? src_dim : left == 1 && right <= budget ? budget / right : 0;
  if (rows == 0 || ids_l.elem_count() > bind_budget(ctx, 8) || n > 0xffffffffull || n_src > 0xffffffffull)
    return nullptr;
  auto out = self.vdev().make(self.dtype(), n);
  if (n == 0) return out;
  Dense src = dense(self, l);
  Dense id = dense(ids, ids_l);
  auto bi = bind_range(*id.s, id.first, id.first + ids_l.elem_count());
  const char* op = mode == 0 ? "index_select" : "gather";
  const uint32_t tag = check_ids(ctx, ids.dtype(), bi, ids_l.elem_count(), src_dim, op, dim, l.shape());
  std::string k = std::string("index_") + vs + "_" + is;
  for (size_t lo = 0; lo < src_dim; lo += rows) {
    const size_t hi = std::min(src_dim, lo + rows);
    // rows [lo, hi) of every left block: the whole source unless split (left == 1)
    auto bs = rows == src_dim ? bind_range(*src.s, src.first, src.first + n_src)
                              : bind_range(*src.s, src.first + lo * right, src.first + hi * right);
    for (size_t first = 0; first < n; first += budget) {
      const size_t cnt = std::min(budget, n - first);
      auto bo = bind_range(*out, first, first + cnt);
      IndexPush pc{static_cast<uint32_t>(cnt),
                   static_cast<uint32_t>(first),
                   static_cast<uint32_t>(src_dim),
                   static_cast<uint32_t>(n_ids),
                   static_cast<uint32_t>(right),
                   bs.first,
                   bi.first,
                   bo.first,
                   mode,
                   tag,
                   static_cast<uint32_t>(lo),
                   static_cast<uint32_t>(hi - lo)};
      uint32_t gx, gy;
      grid_for(ctx, cnt, kWorkGroup, gx, gy);
      ctx.dispatch(k.c_str(), {bs.b, bi.b, bo.b, ctx.fault_binding()}, &pc, sizeof(pc), gx, gy);
    }
  }
  return out;
}

}  // namespace

StoragePtr VulkanStorage::index_select(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                                       size_t dim) const {
  const auto& ids = as_vk(ids_base, "index_select");
  if (ids_l.dims().size() == 1 && dim < l.dims().size()) {
    std::vector<size_t> od = l.dims();
    od[dim] = ids_l.elem_count();
    if (auto r = run_index(*this, l, ids, ids_l, dim, 0, Shape(od))) return r;
  }
  note_round_trip("index_select");
  return BackendStorage::index_select(l, ids_base, ids_l, dim);
}

StoragePtr VulkanStorage::gather(const Layout& l, const BackendStorage& ids_base, const Layout& ids_l,
                                 size_t dim) const {
  const auto& ids = as_vk(ids_base, "gather");
  bool same = ids_l.dims().size() == l.dims().size() && dim < l.dims().size();
  for (size_t d = 0; same && d < l.dims().size(); ++d) same = d == dim || ids_l.dims()[d] == l.dims()[d];
  if (same) {
    if (auto r = run_index(*this, l, ids, ids_l, dim, 1, ids_l.shape())) return r;
  }
  note_round_trip("gather");
  return BackendStorage::gather(l, ids_base, ids_l, dim);
}

}  // namespace candle::vk_backend
