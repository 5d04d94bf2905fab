// The default implementations of the BackendStorage methods that have a composed form: they
// run the device's own kernels through tensor ops on untracked views of the operands, so a
// backend with sum / max / affine / exp / index_select / ... gets mean, var, log_sum_exp,
// norm and flip without a CPU round-trip. The CPU overrides them with single-pass kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/tensor.h"

namespace candle {
namespace {

// The device of `s` as a Device value (not owning: the storage keeps its device alive).
Device device_of(const BackendStorage& s) {
  return Device(std::shared_ptr<BackendDevice>(&s.device(), [](BackendDevice*) {}));
}

// An untracked tensor over `s` with layout l, borrowed for the call (the caller holds `s`).
Tensor borrow(const BackendStorage& s, const Layout& l) {
  StoragePtr p(const_cast<BackendStorage*>(&s), [](BackendStorage*) {});
  return Tensor::from_storage(std::move(p), l, s.dtype(), device_of(s));
}

// The result's storage; never the borrowed one (whose handle does not own it).
StoragePtr result_of(const Tensor& r, const BackendStorage& self) {
  if (r.storage().get() == &self) return r.copy().storage();
  if (!r.is_contiguous()) return r.contiguous().storage();
  return r.storage();
}

// f16 / bf16 / f8 compute in f32, f64 in f64 (as the CPU kernels accumulate).
DType compute_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

std::vector<int64_t> signed_dims(const std::vector<size_t>& dims) { return {dims.begin(), dims.end()}; }

size_t reduced_count(const Layout& l, const std::vector<size_t>& dims) {
  size_t n = 1;
  for (size_t d : dims) n *= l.dims()[d];
  return n;
}

// The output (l's shape with `dims` set to 1) filled with v.
StoragePtr filled(const BackendStorage& self, const Layout& l, const std::vector<size_t>& dims, double v) {
  std::vector<size_t> shape = l.dims();
  for (size_t d : dims) shape[d] = 1;
  return Tensor::full(Scalar(v), Shape(std::move(shape)), self.dtype(), device_of(self)).storage();
}

}  // namespace

StoragePtr BackendStorage::reduce_mean(const Layout& l, const std::vector<size_t>& dims) const {
  const Tensor x = borrow(*this, l);
  const DType dt = dtype();
  const size_t n = reduced_count(l, dims);
  if (dtype_is_float(dt)) {
    Tensor sum = x.to_dtype(compute_dtype(dt)).sum_keepdim(signed_dims(dims));
    return result_of(sum.affine(1.0 / static_cast<double>(n), 0.0).to_dtype(dt), *this);
  }
  // integers: the exact sum in i64, divided with truncation toward zero
  Tensor sum = x.to_dtype(DType::I64).sum_keepdim(signed_dims(dims));
  Tensor count = Tensor::full(Scalar(static_cast<int64_t>(n)), Shape{}, DType::I64, device_of(*this));
  return result_of(sum.broadcast_div(count).to_dtype(dt), *this);
}

StoragePtr BackendStorage::reduce_var(const Layout& l, size_t dim) const {
  const size_t n = l.dims()[dim];
  if (n == 0) return filled(*this, l, {dim}, std::numeric_limits<double>::quiet_NaN());
  const auto d = static_cast<int64_t>(dim);
  const Tensor x = borrow(*this, l).to_dtype(compute_dtype(dtype()));
  Tensor ss = x.broadcast_sub(x.mean_keepdim(d)).sqr().sum_keepdim(d);
  // n == 1: 0 * (1 / 0) gives NaN, as the CPU kernel, candle and PyTorch
  return result_of(ss.affine(1.0 / (static_cast<double>(n) - 1.0), 0.0).to_dtype(dtype()), *this);
}

StoragePtr BackendStorage::reduce_log_sum_exp(const Layout& l, const std::vector<size_t>& dims) const {
  if (reduced_count(l, dims) == 0) return filled(*this, l, dims, -std::numeric_limits<double>::infinity());
  const Tensor x = borrow(*this, l).to_dtype(compute_dtype(dtype()));
  Tensor m = x;
  for (size_t d : dims) m = m.max_keepdim(static_cast<int64_t>(d));
  // an infinite (or NaN) max is not subtracted: (m - m) == 0 holds only for a finite m
  Tensor shift = m.sub(m).eq(Scalar(0)).where_cond(m, m.zeros_like());
  Tensor lse = x.broadcast_sub(shift).exp().sum_keepdim(signed_dims(dims)).log() + shift;
  return result_of(lse.to_dtype(dtype()), *this);
}

StoragePtr BackendStorage::reduce_norm(const Layout& l) const {
  const Tensor x = borrow(*this, l).to_dtype(compute_dtype(dtype()));
  return result_of(x.sqr().sum_all().sqrt().to_dtype(dtype()), *this);
}

StoragePtr BackendStorage::flip(const Layout& l, const std::vector<size_t>& dims) const {
  Tensor t = borrow(*this, l);
  for (size_t d : dims) {
    const size_t n = l.dims()[d];
    if (n <= 1) continue;
    Tensor ids;
    if (n <= std::numeric_limits<uint32_t>::max()) {
      std::vector<uint32_t> rev(n);
      for (size_t i = 0; i < n; ++i) rev[i] = static_cast<uint32_t>(n - 1 - i);
      ids = Tensor::from_vec(rev, Shape{n}, t.device());
    } else {
      std::vector<int64_t> rev(n);
      for (size_t i = 0; i < n; ++i) rev[i] = static_cast<int64_t>(n - 1 - i);
      ids = Tensor::from_vec(rev, Shape{n}, t.device());
    }
    t = t.index_select(ids, static_cast<int64_t>(d));
  }
  return result_of(t, *this);
}

void BackendStorage::copy_strided_rows(BackendStorage& dst, const Layout& l, size_t row_len, size_t dst_s,
                                       size_t dst_o) const {
  const size_t n = l.elem_count();
  if (n == 0) return;
  StoragePtr tmp = device().alloc(dtype(), n);
  copy_strided_src(*tmp, 0, l);
  tmp->copy2d(dst, n / row_len, row_len, row_len, dst_s, 0, dst_o);
}

bool BackendStorage::adamw_step_set(const Layout&, BackendStorage&, const Layout&, BackendStorage&,
                                    const Layout&, const BackendStorage&, const Layout&, const AdamWStep&) {
  return false;
}

}  // namespace candle
