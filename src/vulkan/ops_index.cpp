// index_select and gather (index.comp) over a contiguous source.
#include <string>

#include "storage.h"

namespace candle::vk_backend {
namespace {

struct IndexPush {
  uint32_t n, first, src_dim, n_ids, right, src_off, ids_off, out_off, mode, tag;
};

// out [left, n_ids, right] from src [left, src_dim, right]; mode 0 index_select, 1 gather.
// Returns nullptr when there is no kernel for the dtypes or the operands exceed a binding.
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
  auto out = self.vdev().make(self.dtype(), n);
  if (n == 0) return out;
  // contiguous operands (copies when strided)
  std::shared_ptr<VulkanStorage> src_tmp, ids_tmp;
  const VulkanStorage* src = &self;
  size_t src_o = l.start_offset();
  if (!l.is_contiguous()) {
    src_tmp = self.vdev().make(self.dtype(), l.elem_count());
    self.copy_strided_src(*src_tmp, 0, l);
    src = src_tmp.get();
    src_o = 0;
  }
  const VulkanStorage* id = &ids;
  size_t ids_o = ids_l.start_offset();
  if (!ids_l.is_contiguous()) {
    ids_tmp = self.vdev().make(ids.dtype(), ids_l.elem_count());
    ids.copy_strided_src(*ids_tmp, 0, ids_l);
    id = ids_tmp.get();
    ids_o = 0;
  }
  const size_t es = dtype_size(self.dtype());
  if (l.elem_count() > bind_budget(ctx, es) || ids_l.elem_count() > bind_budget(ctx, 8) ||
      n > bind_budget(ctx, es) || n > 0xffffffffull)
    return nullptr;
  auto bs = bind_range(*src, src_o, src_o + l.elem_count());
  auto bi = bind_range(*id, ids_o, ids_o + ids_l.elem_count());
  auto bo = bind_range(*out, 0, n);
  const char* op = mode == 0 ? "index_select" : "gather";
  const uint32_t tag = check_ids(ctx, ids.dtype(), bi, ids_l.elem_count(), src_dim, op, dim, l.shape());
  IndexPush pc{static_cast<uint32_t>(n),
               0,
               static_cast<uint32_t>(src_dim),
               static_cast<uint32_t>(n_ids),
               static_cast<uint32_t>(right),
               bs.first,
               bi.first,
               bo.first,
               mode,
               tag};
  (void)left;
  uint32_t gx, gy;
  grid_for(ctx, n, kWorkGroup, gx, gy);
  std::string k = std::string("index_") + vs + "_" + is;
  ctx.dispatch(k.c_str(), {bs.b, bi.b, bo.b, ctx.fault_binding()}, &pc, sizeof(pc), gx, gy);
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
