// Tensor basics: ids, accessors, creation from data, dtype/device moves, contiguous copies.
#include "candle/tensor.h"

#include <atomic>
#include <cstring>

#include "candle/backend/cpu_storage.h"
#include "core/backprop_op.h"
#include "core/tensor_impl.h"
#include "ops/op_util.h"

namespace candle {

TensorId next_tensor_id() {
  static std::atomic<TensorId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

IndexItem::IndexItem(const Tensor& ids) : v_(std::make_shared<const Tensor>(ids)) {}

Tensor Tensor::from_storage(StoragePtr storage, Layout layout, DType dtype, const Device& device,
                            bool track_op) {
  auto impl = std::make_shared<TensorImpl>();
  impl->id = next_tensor_id();
  impl->storage = std::move(storage);
  impl->layout = std::move(layout);
  impl->dtype = dtype;
  impl->device = device;
  impl->track_op = track_op;
  return Tensor(std::move(impl));
}

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw Error(ErrorKind::InvalidArgument, "use of an empty (default-constructed) Tensor");
  return *impl;
}
}  // namespace

const Shape& Tensor::shape() const { return checked(impl_).layout.shape(); }
size_t Tensor::dim(int64_t d) const { return shape().dim(d); }
DType Tensor::dtype() const { return checked(impl_).dtype; }
const Device& Tensor::device() const { return checked(impl_).device; }
const Layout& Tensor::layout() const { return checked(impl_).layout; }
TensorId Tensor::id() const { return checked(impl_).id; }
bool Tensor::is_variable() const { return checked(impl_).is_variable; }
bool Tensor::track_op() const { return checked(impl_).track_op || checked(impl_).is_variable; }
const StoragePtr& Tensor::storage() const { return checked(impl_).storage; }

void Tensor::check_nested_len(size_t got, size_t want) {
  if (got != want) {
    throw Error(ErrorKind::ShapeMismatch, "Tensor::new_: nested lists have different lengths (" +
                                              std::to_string(got) + " vs " + std::to_string(want) + ")");
  }
}

Tensor Tensor::from_raw(const void* data, size_t count, DType dtype, const Shape& shape,
                        const Device& device) {
  if (count != shape.elem_count()) {
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch in from_slice, got " + std::to_string(count) +
                                              " elements for shape " + shape.to_string() + " (" +
                                              std::to_string(shape.elem_count()) + " elements)");
  }
  return from_storage(device.backend().from_host(data, dtype, count), Layout::contiguous(shape), dtype,
                      device);
}

Tensor Tensor::from_raw_buffer(std::span<const std::byte> bytes, DType dtype, const Shape& shape,
                               const Device& device) {
  size_t es = dtype_size(dtype);
  if (bytes.size() != shape.elem_count() * es) {
    throw Error(ErrorKind::ShapeMismatch, "shape mismatch in from_raw_buffer, got " +
                                              std::to_string(bytes.size()) + " bytes for shape " +
                                              shape.to_string() + " of " + std::string(dtype_name(dtype)) +
                                              " (" + std::to_string(shape.elem_count() * es) + " bytes)");
  }
  return from_raw(bytes.data(), shape.elem_count(), dtype, shape, device);
}

Tensor Tensor::full(const Scalar& value, const Shape& shape, DType dtype, const Device& device) {
  StoragePtr s = device.backend().alloc(dtype, shape.elem_count());
  Layout l = Layout::contiguous(shape);
  s->const_set(value, l);
  return from_storage(std::move(s), std::move(l), dtype, device);
}

Tensor Tensor::full(const Scalar& value, const Shape& shape, const Device& device) {
  return full(value, shape, value.natural_dtype(), device);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, const Device& device) {
  return from_storage(device.backend().zeros(dtype, shape.elem_count()), Layout::contiguous(shape), dtype,
                      device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, const Device& device) {
  return full(Scalar(1), shape, dtype, device);
}
Tensor Tensor::zeros_like() const { return zeros(shape(), dtype(), device()); }
Tensor Tensor::ones_like() const { return ones(shape(), dtype(), device()); }
Tensor Tensor::full_like(const Scalar& value) const { return full(value, shape(), dtype(), device()); }
Tensor Tensor::rand_like(double lo, double up) const { return rand(lo, up, shape(), dtype(), device()); }
Tensor Tensor::randn_like(double mean, double stddev) const {
  return randn(mean, stddev, shape(), dtype(), device());
}

Tensor Tensor::rand(double lo, double up, const Shape& shape, DType dtype, const Device& device) {
  if (!dtype_is_float(dtype)) {
    throw Error(ErrorKind::UnsupportedOp,
                "unsupported dtype " + std::string(dtype_name(dtype)) + " for op rand");
  }
  if (!(lo <= up)) {
    throw Error(ErrorKind::InvalidArgument,
                "rand: lower bound " + std::to_string(lo) + " is above upper bound " + std::to_string(up));
  }
  return from_storage(device.backend().rand_uniform(dtype, shape.elem_count(), lo, up),
                      Layout::contiguous(shape), dtype, device);
}

Tensor Tensor::randn(double mean, double stddev, const Shape& shape, DType dtype, const Device& device) {
  if (!dtype_is_float(dtype)) {
    throw Error(ErrorKind::UnsupportedOp,
                "unsupported dtype " + std::string(dtype_name(dtype)) + " for op randn");
  }
  if (!(stddev >= 0)) {
    throw Error(ErrorKind::InvalidArgument, "randn: negative standard deviation " + std::to_string(stddev));
  }
  return from_storage(device.backend().rand_normal(dtype, shape.elem_count(), mean, stddev),
                      Layout::contiguous(shape), dtype, device);
}

Tensor Tensor::to_dtype(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  Tensor out = ops::make_result(storage()->to_dtype(layout(), dtype), shape(), dtype, device());
  if (!dtype_is_float(this->dtype())) return out;  // no gradient flows into integers
  return autograd::record(
      std::move(out), "to_dtype",
      [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g, std::vector<Tensor>& gi) {
        gi[0] = g.to_dtype(in[0].dtype());
      },
      *this);
}

Tensor Tensor::to_device(const Device& dev) const {
  if (dev.same_device(device())) return *this;
  Tensor src = contiguous();
  auto cpu = src.storage()->to_cpu();
  std::shared_ptr<CpuStorage> part = cpu;
  // only the tensor's own elements travel
  if (src.layout().start_offset() != 0 || src.elem_count() != cpu->elem_count()) {
    part = CpuStorage::alloc(dtype(), src.elem_count());
    cpu->copy_strided_src(*part, 0, src.layout());
  }
  StoragePtr s = dev.backend().adopt_host(std::move(part));
  return autograd::record(
      from_storage(std::move(s), Layout::contiguous(shape()), dtype(), dev), "to_device",
      [](const std::vector<Tensor>& in, const Tensor&, const Tensor& g, std::vector<Tensor>& gi) {
        gi[0] = g.to_device(in[0].device());
      },
      *this);
}

Tensor Tensor::copy() const {
  StoragePtr s = device().backend().alloc(dtype(), elem_count());
  storage()->copy_strided_src(*s, 0, layout());
  return autograd::record(
      from_storage(std::move(s), Layout::contiguous(shape()), dtype(), device()), "copy",
      [](const std::vector<Tensor>&, const Tensor&, const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g; },
      *this);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return copy();
}

Tensor Tensor::detach() const {
  const TensorImpl& me = checked(impl_);
  return from_storage(me.storage, me.layout, me.dtype, me.device, false);
}

void Tensor::copy_out(void* dst, DType want, int rank, const char* op) const {
  if (want != dtype()) {
    throw Error(ErrorKind::DTypeMismatch, std::string("unexpected dtype in ") + op +
                                              ", expected: " + std::string(dtype_name(want)) +
                                              ", got: " + std::string(dtype_name(dtype())));
  }
  if (rank >= 0 && static_cast<size_t>(rank) != this->rank()) {
    throw Error(ErrorKind::ShapeMismatch,
                std::string("unexpected rank in ") + op + ", expected: " + std::to_string(rank) +
                    ", got: " + std::to_string(this->rank()) + " (shape " + shape().to_string() + ")");
  }
  if (elem_count() == 0) return;
  storage()->copy_to_host(layout(), dst);
}

namespace ops {

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.device().same_device(b.device())) {
    throw Error(ErrorKind::DeviceMismatch, std::string("device mismatch in ") + op + ", lhs: " +
                                               a.device().to_string() + ", rhs: " + b.device().to_string());
  }
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype()) {
    throw Error(ErrorKind::DTypeMismatch, std::string("dtype mismatch in ") + op +
                                              ", lhs: " + std::string(dtype_name(a.dtype())) +
                                              ", rhs: " + std::string(dtype_name(b.dtype())));
  }
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  if (a.shape() != b.shape()) {
    throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " +
                                              a.shape().to_string() + ", rhs: " + b.shape().to_string());
  }
}

void check_float(const Tensor& t, const char* op) {
  if (!dtype_is_float(t.dtype())) {
    throw Error(ErrorKind::UnsupportedOp,
                std::string("unsupported dtype ") + std::string(dtype_name(t.dtype())) + " for op " + op);
  }
}

void check_int(const Tensor& t, const char* op) {
  if (!dtype_is_int(t.dtype())) {
    throw Error(ErrorKind::DTypeMismatch, std::string("unexpected dtype in ") + op +
                                              ": indices must be an integer dtype, got " +
                                              std::string(dtype_name(t.dtype())));
  }
}

Tensor make_result(StoragePtr storage, const Shape& shape, DType dtype, const Device& device) {
  return Tensor::from_storage(std::move(storage), Layout::contiguous(shape), dtype, device);
}

std::vector<size_t> resolve_dims(const Shape& shape, const std::vector<int64_t>& dims, const char* op) {
  std::vector<size_t> out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(shape.resolve_dim(d, op));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string dims_to_string(const std::vector<size_t>& dims) { return Shape(dims).to_string(); }

}  // namespace ops
}  // namespace candle
