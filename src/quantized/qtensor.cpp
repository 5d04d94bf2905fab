// QTensor: GGML blocks in host memory (owned, or a view of a memory-mapped file), and a copy on
// the QTensor's device when that is not the CPU.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/backend/cpu_storage.h"
#include "candle/error.h"
#include "candle/quantized/quantized.h"
#include "codec.h"

namespace candle::quantized {

namespace {

// the bytes a tensor of `shape` takes in `dtype`: its rows (the last dim) whole blocks
size_t qtensor_bytes(const Shape& shape, GgmlDType dtype) {
  if (shape.rank() == 0) throw Error(ErrorKind::ShapeMismatch, "a QTensor needs at least one dim");
  size_t row = shape.dims().back();
  size_t rows = shape.elem_count() / (row ? row : 1);
  size_t row_bytes =
      with_context("QTensor of shape " + shape.to_string(), [&] { return ggml_row_bytes(dtype, row); });
  if (rows != 0 && row_bytes > SIZE_MAX / rows) throw Error(ErrorKind::InvalidArgument, "QTensor too large");
  return row_bytes * rows;
}

}  // namespace

QTensor::QTensor(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape,
                 GgmlDType dtype, Device device)
    : owner_(std::move(owner)),
      bytes_(bytes),
      shape_(std::move(shape)),
      dtype_(dtype),
      device_(std::move(device)) {
  if (device_.is_cpu() || bytes_.empty()) return;
  // a backend without kernels for the type (nullptr when asked for no values) would only hold the
  // copy: nothing is uploaded, and everything runs from the host blocks as before
  constexpr size_t kProbeBytes = 16;
  const StoragePtr probe = device_.backend().alloc(DType::U8, kProbeBytes);
  if (!probe->qdequantize(Layout::contiguous(Shape{kProbeBytes}), static_cast<uint32_t>(dtype_), 0,
                          DType::F32))
    return;
  StoragePtr s = device_.backend().from_host(bytes_.data(), DType::U8, bytes_.size());
  device_blocks_ =
      Tensor::from_storage(std::move(s), Layout::contiguous(Shape{bytes_.size()}), DType::U8, device_);
}

QTensor QTensor::from_bytes(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape,
                            GgmlDType dtype, const Device& device) {
  size_t need = qtensor_bytes(shape, dtype);
  if (bytes.size() != need)
    throw Error(ErrorKind::InvalidArgument,
                "a " + std::string(ggml_dtype_name(dtype)) + " QTensor of shape " + shape.to_string() +
                    " takes " + std::to_string(need) + " bytes, not " + std::to_string(bytes.size()));
  // the block codecs and matmul kernels read a block's scales as 2- and 4-byte fields; a legacy
  // GGML file (or a caller's buffer) may place a tensor at any byte, so such bytes are copied once
  // into an owned buffer rather than read in place
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
    auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
    std::span<const uint8_t> view(copy->data(), copy->size());
    return QTensor(std::move(copy), view, std::move(shape), dtype, device);
  }
  return QTensor(std::move(owner), bytes, std::move(shape), dtype, device);
}

namespace {

QTensor quantize_impl(const Tensor& t, GgmlDType dtype, const float* imatrix, size_t imatrix_len) {
  if (!dtype_is_float(t.dtype()))
    throw Error(ErrorKind::DTypeMismatch,
                "QTensor::quantize needs a float tensor, not " + std::string(dtype_name(t.dtype())));
  const Shape& shape = t.shape();
  size_t need = qtensor_bytes(shape, dtype);
  size_t row = shape.dims().back();
  if (imatrix && imatrix_len != row)
    throw Error(ErrorKind::ShapeMismatch, "the importance matrix has " + std::to_string(imatrix_len) +
                                              " values, the rows " + std::to_string(row));
  // the f32 values read in place: a contiguous f32 CPU tensor as it is, anything else after one
  // conversion (no second copy of the floats)
  const Tensor f = t.to_device(Device::cpu()).to_dtype(DType::F32).contiguous();
  const float* src = nullptr;
  if (f.elem_count() != 0) {
    const auto cs = std::dynamic_pointer_cast<const CpuStorage>(f.storage());
    if (!cs) throw Error(ErrorKind::Internal, "QTensor::quantize: the CPU tensor has no CPU storage");
    src = cs->data<float>() + f.layout().start_offset();
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(need);
  size_t rows = row ? shape.elem_count() / row : 0;
  if (rows) quantize_rows(dtype, src, bytes->data(), rows, row, imatrix);
  std::span<const uint8_t> view(bytes->data(), bytes->size());
  return QTensor::from_bytes(std::move(bytes), view, shape, dtype, t.device());
}

}  // namespace

QTensor QTensor::quantize(const Tensor& t, GgmlDType dtype) { return quantize_impl(t, dtype, nullptr, 0); }

QTensor QTensor::quantize_imatrix(const Tensor& t, std::span<const float> imatrix, GgmlDType dtype) {
  return quantize_impl(t, dtype, imatrix.data(), imatrix.size());
}

QTensor QTensor::cat_rows(std::span<const QTensor* const> parts) {
  if (parts.empty()) throw Error(ErrorKind::InvalidArgument, "QTensor::cat_rows: no tensors");
  const QTensor& a = *parts[0];
  size_t rows = 0;
  bool on_device = !a.device().is_cpu();
  for (const QTensor* p : parts) {
    if (p->shape().rank() != 2 || a.shape().rank() != 2 || p->dtype() != a.dtype() ||
        p->shape().dims()[1] != a.shape().dims()[1] || !p->device().same_device(a.device()))
      throw Error(ErrorKind::ShapeMismatch,
                  "QTensor::cat_rows: a " + std::string(ggml_dtype_name(p->dtype())) + " " +
                      p->shape().to_string() + " on " + p->device().to_string() + " does not stack with a " +
                      std::string(ggml_dtype_name(a.dtype())) + " " + a.shape().to_string() + " on " +
                      a.device().to_string());
    rows += p->shape().dims()[0];
    on_device = on_device && p->device_blocks_.defined();
  }
  const Shape shape{rows, a.shape().dims()[1]};
  if (on_device) {
    std::vector<Tensor> blocks;
    for (const QTensor* p : parts) blocks.push_back(p->device_blocks_);
    QTensor q(nullptr, {}, shape, a.dtype(), a.device());
    q.device_blocks_ = Tensor::cat(blocks, 0);
    return q;
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  bytes->reserve(qtensor_bytes(shape, a.dtype()));
  for (const QTensor* p : parts) {
    if (!p->bytes_.empty()) {
      bytes->insert(bytes->end(), p->bytes_.begin(), p->bytes_.end());
    } else {
      const std::vector<uint8_t> host = p->host_bytes();
      bytes->insert(bytes->end(), host.begin(), host.end());
    }
  }
  std::span<const uint8_t> view(bytes->data(), bytes->size());
  return from_bytes(std::move(bytes), view, shape, a.dtype(), a.device());
}

QTensor QTensor::narrow(size_t start, size_t len, const Device& device) const {
  const auto& d = shape_.dims();
  if (d.size() < 2 || start > d[0] || len > d[0] - start)
    throw Error(ErrorKind::IndexOutOfRange, "QTensor::narrow: rows " + std::to_string(start) + ".." +
                                                std::to_string(start + len) + " of a " +
                                                std::string(ggml_dtype_name(dtype_)) + " QTensor of shape " +
                                                shape_.to_string());
  std::vector<size_t> sub(d.begin(), d.end());
  sub[0] = 1;
  const size_t row = qtensor_bytes(Shape(sub), dtype_);
  sub[0] = len;
  std::shared_ptr<const void> owner = owner_;
  std::span<const uint8_t> bytes = bytes_;
  if (bytes.empty()) {  // the blocks live on a device only
    auto host = std::make_shared<std::vector<uint8_t>>(host_bytes());
    bytes = std::span<const uint8_t>(host->data(), host->size());
    owner = std::move(host);
  }
  return from_bytes(std::move(owner), bytes.subspan(start * row, len * row), Shape(sub), dtype_, device);
}

QTensor QTensor::narrow_cols(size_t start, size_t len, const Device& device) const {
  const auto& d = shape_.dims();
  const size_t bs = ggml_block_size(dtype_);
  if (d.size() != 2 || start > d[1] || len > d[1] - start || len == 0)
    throw Error(ErrorKind::IndexOutOfRange, "QTensor::narrow_cols: columns " + std::to_string(start) + ".." +
                                                std::to_string(start + len) + " of a QTensor of shape " +
                                                shape_.to_string());
  if (start % bs != 0 || len % bs != 0)
    throw Error(ErrorKind::InvalidArgument, "QTensor::narrow_cols: columns " + std::to_string(start) + ".." +
                                                std::to_string(start + len) + " split the " +
                                                std::string(ggml_dtype_name(dtype_)) + " blocks of " +
                                                std::to_string(bs) + " elements");
  const size_t row = qtensor_bytes(Shape{1, d[1]}, dtype_), per = ggml_type_size(dtype_);
  const std::vector<uint8_t> staged = bytes_.empty() ? host_bytes() : std::vector<uint8_t>();
  const std::span<const uint8_t> src = bytes_.empty() ? std::span<const uint8_t>(staged) : bytes_;
  auto out = std::make_shared<std::vector<uint8_t>>(d[0] * (len / bs) * per);
  for (size_t r = 0; r < d[0]; ++r)
    std::memcpy(out->data() + r * (len / bs) * per, src.data() + r * row + (start / bs) * per,
                (len / bs) * per);
  const std::span<const uint8_t> bytes(out->data(), out->size());
  return from_bytes(std::move(out), bytes, Shape{d[0], len}, dtype_, device);
}

QTensor QTensor::get(size_t i, const Device& device) const {
  QTensor r = narrow(i, 1, device);
  const auto& d = r.shape_.dims();
  r.shape_ = Shape(std::vector<size_t>(d.begin() + 1, d.end()));
  return r;
}

std::vector<uint8_t> QTensor::host_bytes() const {
  if (bytes_.empty() && device_blocks_.defined())
    return device_blocks_.to_device(Device::cpu()).to_vec1<uint8_t>();
  return {bytes_.begin(), bytes_.end()};
}

namespace {

// the device kernel's values, or an undefined tensor where the blocks are not on `device` or it
// has no kernel for the type
Tensor dequantize_on_device(const Tensor& blocks, const Device& device, const Shape& shape, GgmlDType dtype,
                            DType out) {
  if (!blocks.defined() || !blocks.device().same_device(device)) return {};
  StoragePtr s =
      blocks.storage()->qdequantize(blocks.layout(), static_cast<uint32_t>(dtype), shape.elem_count(), out);
  if (!s) return {};
  return Tensor::from_storage(std::move(s), Layout::contiguous(shape), out, device);
}

}  // namespace

Tensor QTensor::dequantize(const Device& device) const {
  if (Tensor t = dequantize_on_device(device_blocks_, device, shape_, dtype_, DType::F32); t.defined())
    return t;
  size_t row = shape_.dims().back();
  size_t rows = row ? shape_.elem_count() / row : 0;
  // dequantized straight into the storage of the CPU tensor (then uploaded once for a device)
  auto out = CpuStorage::alloc(DType::F32, shape_.elem_count());
  std::vector<uint8_t> host;  // the blocks of cat_rows, which live on another device only
  if (rows && bytes_.empty()) host = host_bytes();
  if (rows)
    dequantize_rows(dtype_, host.empty() ? bytes_.data() : host.data(), out->data<float>(), rows, row);
  Tensor t = Tensor::from_storage(std::move(out), Layout::contiguous(shape_), DType::F32, Device::cpu());
  return device.is_cpu() ? t : t.to_device(device);
}

Tensor QTensor::embedding(const Tensor& ids, const Device& device) const {
  const auto& d = shape_.dims();
  if (d.size() != 2)
    throw Error(ErrorKind::InvalidArgument,
                "QTensor::embedding: a table of rank 2, not " + shape_.to_string());
  const std::vector<uint32_t> rows =
      ids.flatten_all().to_dtype(DType::U32).to_device(Device::cpu()).to_vec1<uint32_t>();
  std::vector<uint8_t> host;  // the blocks of cat_rows, which live on another device only
  if (bytes_.empty()) host = host_bytes();
  const uint8_t* src = host.empty() ? bytes_.data() : host.data();
  const size_t row_bytes = qtensor_bytes(Shape{1, d[1]}, dtype_);
  auto out = CpuStorage::alloc(DType::F32, rows.size() * d[1]);
  float* dst = out->data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= d[0])
      throw Error(ErrorKind::IndexOutOfRange, "QTensor::embedding: id " + std::to_string(rows[i]) +
                                                  " of a table of " + std::to_string(d[0]) + " rows");
    dequantize_rows(dtype_, src + rows[i] * row_bytes, dst + i * d[1], 1, d[1]);
  }
  std::vector<size_t> dims = ids.shape().dims();
  dims.push_back(d[1]);
  Tensor t = Tensor::from_storage(std::move(out), Layout::contiguous(Shape(dims)), DType::F32, Device::cpu());
  return t.to_device(device);
}

Tensor QTensor::dequantize_f16(const Device& device) const {
  if (Tensor t = dequantize_on_device(device_blocks_, device, shape_, dtype_, DType::F16); t.defined())
    return t;
  return dequantize(device).to_dtype(DType::F16);
}

}  // namespace candle::quantized
