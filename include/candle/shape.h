// Shape: the dims of a tensor, from a braced list: Shape{2, 3}.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace candle {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<size_t> dims) : dims_(dims) {}
  Shape(std::vector<size_t> dims) : dims_(std::move(dims)) {}  // NOLINT: implicit on purpose

  const std::vector<size_t>& dims() const { return dims_; }
  size_t rank() const { return dims_.size(); }
  size_t elem_count() const;
  // dims_[i] for 0 <= i < rank; a signed i counts from the end (-1 is the last dim).
  size_t dim(int64_t i) const;
  size_t operator[](size_t i) const { return dims_[i]; }
  // Row-major strides of a contiguous tensor of this shape, in elements.
  std::vector<size_t> stride_contiguous() const;
  bool is_contiguous(const std::vector<size_t>& stride) const;
  bool is_fortran_contiguous(const std::vector<size_t>& stride) const;

  // Resolves a signed dim against this shape's rank; throws DimOutOfRange naming `op`.
  size_t resolve_dim(int64_t dim, const char* op) const;
  // As resolve_dim, for rank + 1 (where a new dim may be inserted: unsqueeze, stack).
  size_t resolve_dim_inclusive(int64_t dim, const char* op) const;

  // The shape both operands broadcast to (numpy rules); throws ShapeMismatch naming `op`.
  Shape broadcast_shape_binary_op(const Shape& rhs, const char* op) const;
  // Shapes of a (batched) matmul: throws ShapeMismatch naming `op` on a mismatch.
  Shape broadcast_shape_matmul(const Shape& rhs, const char* op) const;

  // Dims as a fixed-size tuple, checking the rank: auto [b, c, h, w] = s.dims4("conv2d");
  size_t dims0(const char* op) const;
  std::array<size_t, 1> dims1(const char* op) const;
  std::array<size_t, 2> dims2(const char* op) const;
  std::array<size_t, 3> dims3(const char* op) const;
  std::array<size_t, 4> dims4(const char* op) const;
  std::array<size_t, 5> dims5(const char* op) const;

  // "[2, 3]"
  std::string to_string() const;
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<size_t> dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace candle
