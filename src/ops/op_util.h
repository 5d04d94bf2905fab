// Checks and helpers shared by the op families in src/ops.
#pragma once

#include <string>
#include <vector>

#include "candle/backend/backend.h"
#include "candle/tensor.h"

namespace candle::ops {

// Throws DeviceMismatch unless a and b live on the same device.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Throws DTypeMismatch unless a and b have the same dtype.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
// Throws ShapeMismatch ("shape mismatch in OP, lhs: [..], rhs: [..]") unless the shapes are equal.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);
// Throws UnsupportedOp unless t has a float dtype.
void check_float(const Tensor& t, const char* op);
// Throws DTypeMismatch unless t has an integer dtype (for indices).
void check_int(const Tensor& t, const char* op);

// A new contiguous tensor of `shape` over `storage` (the usual result of a backend op).
Tensor make_result(StoragePtr storage, const Shape& shape, DType dtype, const Device& device);

// Sorted, de-duplicated dims resolved against `shape`.
std::vector<size_t> resolve_dims(const Shape& shape, const std::vector<int64_t>& dims, const char* op);

std::string dims_to_string(const std::vector<size_t>& dims);

}  // namespace candle::ops
