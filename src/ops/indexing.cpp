// The gather/scatter/index family: index_select, gather, scatter, scatter_add, index_add,
// slice_scatter, slice_set, scatter_set, scatter_add_set, embedding and const_set.
// Shape, dtype and device rules live here; the backends check the id values.
#include <string>
#include <vector>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

bool same_dims_except(const Shape& a, const Shape& b, size_t dim) {
  if (a.rank() != b.rank()) return false;
  for (size_t i = 0; i < a.rank(); ++i) {
    if (i != dim && a[i] != b[i]) return false;
  }
  return true;
}

[[noreturn]] void shape_error(const std::string& what, const char* lhs_name, const Shape& lhs,
                              const char* rhs_name, const Shape& rhs, size_t dim) {
  throw Error(ErrorKind::ShapeMismatch, "shape mismatch in " + what + ", " + lhs_name + ": " +
                                            lhs.to_string() + ", " + rhs_name + ": " + rhs.to_string() +
                                            " (dim " + std::to_string(dim) + ")");
}

// Whether the two tensors' elements may live in the same memory.
bool shares_memory(const Tensor& a, const Tensor& b) { return a.storage()->shares_memory_with(*b.storage()); }

void require_contiguous(const Tensor& t, const char* op) {
  if (!t.is_contiguous()) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + " writes in place and requires a contiguous self, got shape " +
                    t.shape().to_string() + " with stride " + ops::dims_to_string(t.stride()));
  }
}

// scatter's rules (as candle): src has self's dims except along `dim`; ids has src's shape.
void check_scatter_args(const Tensor& self, const Tensor& ids, const Tensor& src, size_t dim,
                        const char* op) {
  ops::check_same_device(self, ids, op);
  ops::check_same_device(self, src, op);
  ops::check_same_dtype(self, src, op);
  ops::check_int(ids, op);
  if (!same_dims_except(self.shape(), src.shape(), dim)) {
    shape_error(std::string(op) + " (self, src)", "self", self.shape(), "src", src.shape(), dim);
  }
  if (ids.shape() != src.shape()) {
    shape_error(std::string(op) + " (ids, src)", "ids", ids.shape(), "src", src.shape(), dim);
  }
}

// slice_scatter / slice_set: src has self's dims except along `dim`, where it must fit at `start`.
void check_slice_args(const Tensor& self, const Tensor& src, size_t dim, size_t start, const char* op) {
  ops::check_same_device(self, src, op);
  ops::check_same_dtype(self, src, op);
  if (!same_dims_except(self.shape(), src.shape(), dim)) {
    shape_error(op, "self", self.shape(), "src", src.shape(), dim);
  }
  size_t len = src.dim(static_cast<int64_t>(dim)), size = self.dim(static_cast<int64_t>(dim));
  if (start > size || len > size - start) {
    throw Error(ErrorKind::IndexOutOfRange, std::string(op) + " out of range: start " +
                                                std::to_string(start) + " + len " + std::to_string(len) +
                                                " exceeds dim " + std::to_string(dim) + " of size " +
                                                std::to_string(size) + ", self: " + self.shape().to_string() +
                                                ", src: " + src.shape().to_string());
  }
}

// Writes src (whose shape was checked) into the contiguous tensor of `dst_shape` that starts at
// element `dst_offset` of `dst`, at [start, start + len) along dim.
void write_slice(BackendStorage& dst, size_t dst_offset, const Shape& dst_shape, const Tensor& src,
                 size_t dim, size_t start) {
  Tensor s = src.contiguous();
  size_t left = 1, right = 1;
  for (size_t i = 0; i < dim; ++i) left *= dst_shape[i];
  for (size_t i = dim + 1; i < dst_shape.rank(); ++i) right *= dst_shape[i];
  size_t len = s.dims()[dim];
  size_t row = len * right;
  s.storage()->copy2d(dst, left, row, row, dst_shape[dim] * right, s.layout().start_offset(),
                      dst_offset + start * right);
}

// A new contiguous copy of self on its device.
StoragePtr copy_of(const Tensor& self) {
  StoragePtr out = self.device().backend().alloc(self.dtype(), self.elem_count());
  if (self.elem_count()) self.storage()->copy_strided_src(*out, 0, self.layout());
  return out;
}

}  // namespace

Tensor Tensor::index_select(const Tensor& ids, int64_t dim) const {
  const char* op = "index_select";
  size_t d = shape().resolve_dim(dim, op);
  ops::check_same_device(*this, ids, op);
  ops::check_int(ids, op);
  if (ids.rank() != 1) {
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch in index_select, ids must be 1-D, self: " +
                                              shape().to_string() + ", ids: " + ids.shape().to_string());
  }
  std::vector<size_t> out_dims = dims();
  out_dims[d] = ids.dims()[0];
  return autograd::record(
      ops::make_result(storage()->index_select(layout(), *ids.storage(), ids.layout(), d), Shape(out_dims),
                       dtype(), device()),
      "index_select",
      CANDLE_BACKWARD(ids, d) {
        gi[0] = autograd::zeros_of(in[0]).index_add(ids, g, static_cast<int64_t>(d));
      },
      *this);
}

Tensor Tensor::gather(const Tensor& ids, int64_t dim) const {
  const char* op = "gather";
  size_t d = shape().resolve_dim(dim, op);
  ops::check_same_device(*this, ids, op);
  ops::check_int(ids, op);
  // candle requires equal dims off `dim` (PyTorch would allow smaller ones)
  if (!same_dims_except(shape(), ids.shape(), d)) shape_error(op, "self", shape(), "ids", ids.shape(), d);
  return autograd::record(
      ops::make_result(storage()->gather(layout(), *ids.storage(), ids.layout(), d), ids.shape(), dtype(),
                       device()),
      "gather",
      CANDLE_BACKWARD(ids, d) {
        gi[0] = autograd::zeros_of(in[0]).scatter_add(ids, g, static_cast<int64_t>(d));
      },
      *this);
}

Tensor Tensor::scatter(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "scatter";
  size_t d = shape().resolve_dim(dim, op);
  check_scatter_args(*this, ids, src, d, op);
  StoragePtr out = copy_of(*this);
  out->scatter_set(Layout::contiguous(shape()), *ids.storage(), ids.layout(), *src.storage(), src.layout(),
                   d);
  // self's gradient is g with the overwritten positions zeroed; src's is g at ids
  return autograd::record(
      ops::make_result(std::move(out), shape(), dtype(), device()), "scatter",
      CANDLE_BACKWARD(ids, d) {
        const auto sd = static_cast<int64_t>(d);
        if (in[0].track_op()) gi[0] = g.scatter(ids, autograd::zeros_of(in[1]), sd);
        if (in[1].track_op()) gi[1] = g.gather(ids, sd);
      },
      *this, src);
}

Tensor Tensor::scatter_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "scatter_add";
  size_t d = shape().resolve_dim(dim, op);
  check_scatter_args(*this, ids, src, d, op);
  StoragePtr out = copy_of(*this);
  out->scatter_add_set(Layout::contiguous(shape()), *ids.storage(), ids.layout(), *src.storage(),
                       src.layout(), d);
  return autograd::record(
      ops::make_result(std::move(out), shape(), dtype(), device()), "scatter_add",
      CANDLE_BACKWARD(ids, d) {
        gi[0] = g;
        if (in[1].track_op()) gi[1] = g.gather(ids, static_cast<int64_t>(d));
      },
      *this, src);
}

void Tensor::scatter_set(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "scatter_set";
  size_t d = shape().resolve_dim(dim, op);
  check_scatter_args(*this, ids, src, d, op);
  require_contiguous(*this, op);
  storage()->scatter_set(layout(), *ids.storage(), ids.layout(), *src.storage(), src.layout(), d);
}

void Tensor::scatter_add_set(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "scatter_add_set";
  size_t d = shape().resolve_dim(dim, op);
  check_scatter_args(*this, ids, src, d, op);
  require_contiguous(*this, op);
  storage()->scatter_add_set(layout(), *ids.storage(), ids.layout(), *src.storage(), src.layout(), d);
}

Tensor Tensor::index_add(const Tensor& ids, const Tensor& src, int64_t dim) const {
  const char* op = "index_add";
  size_t d = shape().resolve_dim(dim, op);
  ops::check_same_device(*this, ids, op);
  ops::check_same_device(*this, src, op);
  ops::check_same_dtype(*this, src, op);
  ops::check_int(ids, op);
  if (!same_dims_except(shape(), src.shape(), d))
    shape_error("index_add (self, src)", "self", shape(), "src", src.shape(), d);
  if (ids.rank() != 1 || ids.dims()[0] != src.dims()[d]) {
    shape_error("index_add (ids, src), ids must be 1-D with src's length along dim", "ids", ids.shape(),
                "src", src.shape(), d);
  }
  return autograd::record(
      ops::make_result(
          storage()->index_add(layout(), *ids.storage(), ids.layout(), *src.storage(), src.layout(), d),
          shape(), dtype(), device()),
      "index_add",
      CANDLE_BACKWARD(ids, d) {
        gi[0] = g;
        if (in[1].track_op()) gi[1] = g.index_select(ids, static_cast<int64_t>(d));
      },
      *this, src);
}

Tensor Tensor::slice_scatter(const Tensor& src, int64_t dim, size_t start) const {
  const char* op = "slice_scatter";
  size_t d = shape().resolve_dim(dim, op);
  check_slice_args(*this, src, d, start, op);
  StoragePtr out = copy_of(*this);
  write_slice(*out, 0, shape(), src, d, start);
  return autograd::record(
      ops::make_result(std::move(out), shape(), dtype(), device()), "slice_scatter",
      CANDLE_BACKWARD(d, start) {
        const auto sd = static_cast<int64_t>(d);
        if (in[0].track_op()) gi[0] = g.slice_scatter(autograd::zeros_of(in[1]), sd, start);
        if (in[1].track_op()) gi[1] = g.narrow(sd, start, in[1].dims()[d]);
      },
      *this, src);
}

void Tensor::slice_set(const Tensor& src, int64_t dim, size_t offset) const {
  const char* op = "slice_set";
  size_t d = shape().resolve_dim(dim, op);
  check_slice_args(*this, src, d, offset, op);
  require_contiguous(*this, op);
  // candle refuses a src that shares self's storage; a private copy of src makes that case
  // well defined (the copy below would otherwise read what it is overwriting)
  Tensor s = shares_memory(*this, src) ? src.copy() : src;
  write_slice(*storage(), layout().start_offset(), shape(), s, d, offset);
}

Tensor Tensor::embedding(const Tensor& ids) const {
  const char* op = "embedding";
  ops::check_same_device(*this, ids, op);
  ops::check_int(ids, op);
  if (rank() != 2) {
    throw Error(ErrorKind::ShapeMismatch,
                "shape mismatch in embedding, self must be [vocab, hidden], self: " + shape().to_string() +
                    ", ids: " + ids.shape().to_string());
  }
  // candle's Tensor::embedding takes 1-D ids only; any shape works here, as candle_nn::Embedding
  Tensor flat = ids.contiguous();
  Layout flat_l = Layout::contiguous(Shape{ids.elem_count()}, flat.layout().start_offset());
  std::vector<size_t> out_dims = ids.dims();
  out_dims.push_back(dims()[1]);
  Tensor out = ops::make_result(storage()->index_select(layout(), *flat.storage(), flat_l, 0),
                                Shape(out_dims), dtype(), device());
  if (!track_op()) return out;
  Tensor flat_ids = Tensor::from_storage(flat.storage(), flat_l, flat.dtype(), flat.device());
  return autograd::record(
      std::move(out), "embedding",
      CANDLE_BACKWARD(flat_ids) {
        const Tensor& w = in[0];
        gi[0] = autograd::zeros_of(w).index_add(flat_ids,
                                                g.reshape(Shape{flat_ids.elem_count(), w.dims()[1]}), 0);
      },
      *this);
}

void Tensor::const_set(const Scalar& v) const { storage()->const_set(v, layout()); }

}  // namespace candle
