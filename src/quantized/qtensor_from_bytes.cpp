// A minimal QTensor::from_bytes and constructor (the GGUF / GGML readers need them; the full
// QTensor is implemented elsewhere and replaces this file): checks that `bytes` is what the
// shape and dtype need and keeps the fields.
#include <limits>

#include "candle/error.h"
#include "candle/quantized/quantized.h"

namespace candle::quantized {

QTensor::QTensor(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape,
                 GgmlDType dtype, Device device)
    : owner_(std::move(owner)),
      bytes_(bytes),
      shape_(std::move(shape)),
      dtype_(dtype),
      device_(std::move(device)) {}

QTensor QTensor::from_bytes(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes, Shape shape,
                            GgmlDType dtype, const Device& device) {
  const auto& dims = shape.dims();
  const uint64_t row = dims.empty() ? 1 : dims.back();
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (dims[i] != 0 && rows > std::numeric_limits<uint64_t>::max() / dims[i])
      throw Error(ErrorKind::InvalidArgument,
                  "QTensor::from_bytes: shape " + shape.to_string() + " overflows");
    rows *= dims[i];
  }
  const uint64_t row_bytes = ggml_row_bytes(dtype, row);
  if (row_bytes != 0 && rows > std::numeric_limits<uint64_t>::max() / row_bytes)
    throw Error(ErrorKind::InvalidArgument, "QTensor::from_bytes: shape " + shape.to_string() + " overflows");
  if (rows * row_bytes != bytes.size())
    throw Error(ErrorKind::InvalidArgument, "QTensor::from_bytes: " + std::to_string(bytes.size()) +
                                                " bytes for shape " + shape.to_string() + " of " +
                                                std::string(ggml_dtype_name(dtype)) + ", which needs " +
                                                std::to_string(rows * row_bytes));
  return QTensor(std::move(owner), bytes, std::move(shape), dtype, device);
}

}  // namespace candle::quantized
