// index_select, gather, index_add, scatter_set, scatter_add_set (kernels/cuda/index.cu). The
// checks and their messages are the CPU's (src/cpu/index.cpp); an out-of-range id is found by
// a check kernel before the op runs (nothing is written then) and thrown at the next
// synchronisation or download, by Context::throw_fault.
#include <optional>

#include "core/index_split.h"
#include "launch_reduce.h"
#include "storage.h"

namespace candle::cuda_backend {
namespace {

using index_util::internal_check;
using index_util::same_dims_except;
using index_util::Split;
using index_util::split_at;

void check_index_dtype(DType dt, const char* op) {
  switch (dt) {
    case DType::U8:
    case DType::U32:
    case DType::I16:
    case DType::I32:
    case DType::I64: return;
    default:
      throw Error(ErrorKind::DTypeMismatch, std::string("unexpected dtype in ") + op +
                                                ": indices must be an integer dtype, got " +
                                                std::string(dtype_name(dt)));
  }
}

void check_layout(const CudaStorage& s, const Layout& l, const char* op) {
  internal_check(l.elem_count() == 0 || l.max_offset_exclusive() <= s.elem_count(), op,
                 "layout out of the storage's bounds");
}

// The elements of (s, l) contiguously, copied when `force_copy` (an operand sharing the
// destination's memory) or when l is strided.
Dense dense_input(const CudaStorage& s, const Layout& l, const char* op, bool force_copy = false) {
  check_layout(s, l, op);
  if (!force_copy || l.elem_count() == 0) return dense(s, l);
  auto out = s.cdev().make(s.dtype(), l.elem_count());
  s.copy_strided_src(*out, 0, l);
  return {out.get(), 0, out};
}

// Runs the ids check of `op` (n ids against [0, limit)); the op's kernel then takes `bad`.
struct IdsChecked {
  CuStoragePtr bad;  // one 8-byte word
  const unsigned long long* word() const { return bad->ptr<unsigned long long>(); }
};

IdsChecked check_ids(const CudaStorage& self, const Dense& ids, DType idt, size_t n, size_t limit,
                     const char* op, size_t dim, const Shape& shape) {
  IdsChecked c{self.cdev().make(DType::I64, 1)};
  auto chk = self.ctx().register_id_check(op, dim, limit, shape.to_string());
  self.ctx().launched(cuda_k::check_ids(dt_of(idt), ids.s->at(ids.first), static_cast<int64_t>(n),
                                        static_cast<int64_t>(limit), chk.tag, chk.fault,
                                        c.bad->ptr<unsigned long long>(), self.stream()),
                      op);
  return c;
}

}  // namespace

StoragePtr CudaStorage::index_select(const Layout& l, const BackendStorage& ids_b, const Layout& ids_l,
                                     size_t dim) const {
  const char* op = "index_select";
  const CudaStorage& ids = as_cuda(ids_b, op);
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(ids_l.shape().rank() == 1, op, "ids must be 1-D, got " + ids_l.shape().to_string());
  check_index_dtype(ids.dtype(), op);
  const size_t n = ids_l.shape()[0];
  const Split sp = split_at(l.shape(), dim);
  auto out = cdev().make(dtype_, sp.left * n * sp.right);
  if (n == 0) return out;
  const Dense id = dense_input(ids, ids_l, op);
  IdsChecked c = check_ids(*this, id, ids.dtype(), n, sp.dim, op, dim, l.shape());
  if (out->elem_count() == 0) return out;
  const Dense src = dense_input(*this, l, op);
  ctx().launched(
      cuda_k::index_select(dtype_size(dtype_), dt_of(ids.dtype()), src.s->at(src.first), id.s->at(id.first),
                           out->at(0), static_cast<int64_t>(sp.left), static_cast<int64_t>(sp.dim),
                           static_cast<int64_t>(n), static_cast<int64_t>(sp.right), c.word(), stream()),
      op);
  return out;
}

StoragePtr CudaStorage::gather(const Layout& l, const BackendStorage& ids_b, const Layout& ids_l,
                               size_t dim) const {
  const char* op = "gather";
  const CudaStorage& ids = as_cuda(ids_b, op);
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(
      same_dims_except(l.shape(), ids_l.shape(), dim), op,
      "shapes do not match, self: " + l.shape().to_string() + ", ids: " + ids_l.shape().to_string());
  const size_t count = ids_l.elem_count();
  auto out = cdev().make(dtype_, count);
  if (count == 0) return out;
  check_index_dtype(ids.dtype(), op);
  const Split sp = split_at(l.shape(), dim);
  const size_t n = ids_l.shape()[dim];
  const Dense id = dense_input(ids, ids_l, op);
  IdsChecked c = check_ids(*this, id, ids.dtype(), count, sp.dim, op, dim, l.shape());
  const Dense src = dense_input(*this, l, op);
  ctx().launched(
      cuda_k::gather(dtype_size(dtype_), dt_of(ids.dtype()), src.s->at(src.first), id.s->at(id.first),
                     out->at(0), static_cast<int64_t>(sp.left), static_cast<int64_t>(sp.dim),
                     static_cast<int64_t>(n), static_cast<int64_t>(sp.right), c.word(), stream()),
      op);
  return out;
}

StoragePtr CudaStorage::index_add(const Layout& l, const BackendStorage& ids_b, const Layout& ids_l,
                                  const BackendStorage& src_b, const Layout& src_l, size_t dim) const {
  const char* op = "index_add";
  const CudaStorage& ids = as_cuda(ids_b, op);
  const CudaStorage& src = as_cuda(src_b, op);
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(src.dtype() == dtype_, op, "source dtype differs from self's");
  internal_check(ids_l.shape().rank() == 1 && same_dims_except(l.shape(), src_l.shape(), dim) &&
                     src_l.shape()[dim] == ids_l.shape()[0],
                 op,
                 "shapes do not match, self: " + l.shape().to_string() +
                     ", ids: " + ids_l.shape().to_string() + ", src: " + src_l.shape().to_string());
  check_index_dtype(ids.dtype(), op);
  const size_t n = ids_l.shape()[0];
  const Split sp = split_at(l.shape(), dim);
  auto out = cdev().make(dtype_, l.elem_count());
  std::optional<IdsChecked> c;
  Dense id{nullptr, 0, nullptr};
  if (n > 0) {
    id = dense_input(ids, ids_l, op);
    c = check_ids(*this, id, ids.dtype(), n, sp.dim, op, dim, l.shape());
  }
  if (out->elem_count() == 0) return out;
  check_layout(*this, l, op);
  copy_strided_src(*out, 0, l);
  if (src_l.elem_count() == 0) return out;
  const Dense s = dense_input(src, src_l, op);
  ctx().launched(
      cuda_k::scatter(true, false, dt_of(dtype_), dt_of(ids.dtype()), out->at(0), s.s->at(s.first),
                      id.s->at(id.first), static_cast<int64_t>(sp.left), static_cast<int64_t>(sp.dim),
                      static_cast<int64_t>(n), static_cast<int64_t>(sp.right), c->word(), stream()),
      op);
  return out;
}

namespace {

// whether the ids of layout l take the same value at every position but along dim (stride 0 or
// extent 1 elsewhere) and lie there as a row (stride 1, or one id)
bool ids_vary_only_along(const Layout& l, size_t dim) {
  const auto& shape = l.shape();
  const auto& stride = l.stride();
  for (size_t i = 0; i < shape.rank(); ++i)
    if (i != dim && shape[i] != 1 && stride[i] != 0) return false;
  return shape[dim] == 1 || stride[dim] == 1;
}

void scatter_in_place(CudaStorage& self, bool add, const Layout& l, const BackendStorage& ids_b,
                      const Layout& ids_l, const BackendStorage& src_b, const Layout& src_l, size_t dim,
                      const char* op) {
  const CudaStorage& ids = as_cuda(ids_b, op);
  const CudaStorage& src = as_cuda(src_b, op);
  internal_check(dim < l.shape().rank(), op, "dim out of range");
  internal_check(src.dtype() == self.dtype(), op, "source dtype differs from the destination's");
  internal_check(same_dims_except(l.shape(), src_l.shape(), dim) && ids_l.shape() == src_l.shape(), op,
                 "shapes do not match, dst: " + l.shape().to_string() +
                     ", ids: " + ids_l.shape().to_string() + ", src: " + src_l.shape().to_string());
  if (!l.is_contiguous())
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + " requires a contiguous destination, got shape " + l.shape().to_string());
  check_layout(self, l, op);
  const size_t n_src = src_l.elem_count();
  if (n_src == 0) return;
  check_index_dtype(ids.dtype(), op);
  const Split sp = split_at(l.shape(), dim);
  const size_t n = src_l.shape()[dim];
  // ids that vary only along dim (a decode step's KV write: one position broadcast over the heads
  // and the head dim) are read as the row of their n values: n ids checked, none read per element
  const bool along = !ids.shares_memory_with(self) && ids_vary_only_along(ids_l, dim);
  // ids and src are read while self is written: copied when they share its memory
  const Dense id = along ? Dense{&ids, ids_l.start_offset(), nullptr}
                         : dense_input(ids, ids_l, op, ids.shares_memory_with(self));
  const Dense s = dense_input(src, src_l, op, src.shares_memory_with(self));
  // the ids check and the writes: one launch for a small scatter (cuda_k::scatter_checked)
  CuStoragePtr bad = self.cdev().make(DType::I64, 1);
  auto chk = self.ctx().register_id_check(op, dim, sp.dim, l.shape().to_string());
  const cuda_k::IdCheckArgs args{static_cast<int64_t>(along ? n : n_src), static_cast<int64_t>(sp.dim),
                                 chk.tag, chk.fault, bad->ptr<unsigned long long>()};
  self.ctx().launched(
      cuda_k::scatter_checked(add, !along, dt_of(self.dtype()), dt_of(ids.dtype()), self.at(l.start_offset()),
                              s.s->at(s.first), id.s->at(id.first), static_cast<int64_t>(sp.left),
                              static_cast<int64_t>(sp.dim), static_cast<int64_t>(n),
                              static_cast<int64_t>(sp.right), args, self.stream()),
      op);
}

}  // namespace

void CudaStorage::scatter_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                              const BackendStorage& src, const Layout& src_l, size_t dim) {
  written();
  scatter_in_place(*this, false, l, ids, ids_l, src, src_l, dim, "scatter");
}

void CudaStorage::scatter_add_set(const Layout& l, const BackendStorage& ids, const Layout& ids_l,
                                  const BackendStorage& src, const Layout& src_l, size_t dim) {
  written();
  scatter_in_place(*this, true, l, ids, ids_l, src, src_l, dim, "scatter_add");
}

}  // namespace candle::cuda_backend
