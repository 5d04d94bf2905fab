// Layout: how a tensor's elements sit in its storage (shape, strides in elements, offset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "candle/shape.h"

namespace candle {

class Layout {
 public:
  Layout() = default;
  Layout(Shape shape, std::vector<size_t> stride, size_t start_offset);
  static Layout contiguous(const Shape& shape, size_t start_offset = 0);

  const Shape& shape() const { return shape_; }
  const std::vector<size_t>& dims() const { return shape_.dims(); }
  const std::vector<size_t>& stride() const { return stride_; }
  size_t start_offset() const { return start_offset_; }
  size_t elem_count() const { return shape_.elem_count(); }
  bool is_contiguous() const { return shape_.is_contiguous(stride_); }
  bool is_fortran_contiguous() const { return shape_.is_fortran_contiguous(stride_); }
  // [start, end) of the storage elements the layout may touch (end == start when empty).
  size_t min_offset() const { return start_offset_; }
  size_t max_offset_exclusive() const;
  // Offsets [start, end) when the layout is contiguous.
  std::optional<std::pair<size_t, size_t>> contiguous_offsets() const;

  Layout narrow(size_t dim, size_t start, size_t len) const;
  Layout transpose(size_t dim1, size_t dim2) const;
  Layout permute(const std::vector<size_t>& idxs) const;
  // Stride-0 broadcast of this layout to `shape` (numpy rules, aligned on the right).
  Layout broadcast_as(const Shape& shape) const;
  // A view of a contiguous layout with another shape of the same element count.
  Layout reshape_contiguous(const Shape& shape) const;

  // The layout as runs of contiguous blocks: `block_len` elements each, starting at the
  // offsets visited by for_each_block in row-major order. block_len is the product of the
  // innermost dims that are contiguous (1 if the last stride is not 1).
  size_t block_len() const;
  // Calls fn(offset) for the start of each block, in row-major order. Count: elem_count/block_len.
  void for_each_block(const std::function<void(size_t)>& fn) const;
  // Storage offset of the element with row-major linear index `i` (no bounds check).
  size_t offset_of(size_t linear_index) const;

  bool operator==(const Layout& o) const {
    return shape_ == o.shape_ && stride_ == o.stride_ && start_offset_ == o.start_offset_;
  }

 private:
  Shape shape_;
  std::vector<size_t> stride_;
  size_t start_offset_ = 0;
};

// Iterates the storage offsets of a layout in row-major order, block by block; cheap to
// construct at any linear position, so parallel loops can start mid-way.
class StridedBlocks {
 public:
  // Starts at the block that contains row-major element `first_elem` (a multiple of block_len()).
  StridedBlocks(const Layout& layout, size_t first_elem = 0);
  size_t block_len() const { return block_len_; }
  size_t offset() const { return offset_; }
  void next();

 private:
  std::vector<size_t> dims_;  // outer dims (those not folded into the block)
  std::vector<size_t> stride_;
  std::vector<size_t> index_;
  size_t block_len_ = 1;
  size_t offset_ = 0;
};

}  // namespace candle
