#include "candle/layout.h"

#include "candle/error.h"

namespace candle {

Layout::Layout(Shape shape, std::vector<size_t> stride, size_t start_offset)
    : shape_(std::move(shape)), stride_(std::move(stride)), start_offset_(start_offset) {
  if (stride_.size() != shape_.rank()) {
    throw Error(ErrorKind::Internal, "layout: stride rank differs from shape rank " + shape_.to_string());
  }
}

Layout Layout::contiguous(const Shape& shape, size_t start_offset) {
  return Layout(shape, shape.stride_contiguous(), start_offset);
}

size_t Layout::max_offset_exclusive() const {
  if (shape_.elem_count() == 0) return start_offset_;
  size_t off = start_offset_;
  for (size_t i = 0; i < stride_.size(); ++i) off += (shape_[i] - 1) * stride_[i];
  return off + 1;
}

std::optional<std::pair<size_t, size_t>> Layout::contiguous_offsets() const {
  if (!is_contiguous()) return std::nullopt;
  return std::make_pair(start_offset_, start_offset_ + elem_count());
}

Layout Layout::narrow(size_t dim, size_t start, size_t len) const {
  if (dim >= shape_.rank()) {
    throw Error(ErrorKind::DimOutOfRange,
                "dim out of range in narrow, dim: " + std::to_string(dim) + ", shape: " + shape_.to_string());
  }
  if (start > shape_[dim] || len > shape_[dim] - start) {
    throw Error(ErrorKind::IndexOutOfRange,
                "narrow out of range, dim: " + std::to_string(dim) + ", start: " + std::to_string(start) +
                    ", len: " + std::to_string(len) + ", shape: " + shape_.to_string());
  }
  std::vector<size_t> dims = shape_.dims();
  dims[dim] = len;
  return Layout(Shape(std::move(dims)), stride_, start_offset_ + stride_[dim] * start);
}

Layout Layout::transpose(size_t dim1, size_t dim2) const {
  size_t rank = shape_.rank();
  if (dim1 >= rank || dim2 >= rank) {
    throw Error(ErrorKind::DimOutOfRange, "dim out of range in transpose, dims: " + std::to_string(dim1) +
                                              ", " + std::to_string(dim2) + ", shape: " + shape_.to_string());
  }
  std::vector<size_t> dims = shape_.dims();
  std::vector<size_t> stride = stride_;
  std::swap(dims[dim1], dims[dim2]);
  std::swap(stride[dim1], stride[dim2]);
  return Layout(Shape(std::move(dims)), std::move(stride), start_offset_);
}

Layout Layout::permute(const std::vector<size_t>& idxs) const {
  size_t rank = shape_.rank();
  std::vector<bool> seen(rank, false);
  bool ok = idxs.size() == rank;
  for (size_t i = 0; ok && i < idxs.size(); ++i) {
    if (idxs[i] >= rank || seen[idxs[i]])
      ok = false;
    else
      seen[idxs[i]] = true;
  }
  if (!ok) {
    std::string s = "[";
    for (size_t i = 0; i < idxs.size(); ++i) s += (i ? ", " : "") + std::to_string(idxs[i]);
    throw Error(ErrorKind::InvalidArgument,
                "permute: dims " + s + "] are not a permutation of shape " + shape_.to_string());
  }
  std::vector<size_t> dims(rank), stride(rank);
  for (size_t i = 0; i < rank; ++i) {
    dims[i] = shape_[idxs[i]];
    stride[i] = stride_[idxs[i]];
  }
  return Layout(Shape(std::move(dims)), std::move(stride), start_offset_);
}

Layout Layout::broadcast_as(const Shape& shape) const {
  size_t rank = shape.rank();
  size_t src_rank = shape_.rank();
  auto fail = [&]() {
    throw Error(ErrorKind::ShapeMismatch,
                "shape mismatch in broadcast_as, src: " + shape_.to_string() + ", dst: " + shape.to_string());
  };
  if (src_rank > rank) fail();
  size_t added = rank - src_rank;
  std::vector<size_t> stride(rank, 0);
  for (size_t i = 0; i < src_rank; ++i) {
    size_t sd = shape_[i], dd = shape[added + i];
    if (sd == dd)
      stride[added + i] = stride_[i];
    else if (sd == 1)
      stride[added + i] = 0;
    else
      fail();
  }
  return Layout(shape, std::move(stride), start_offset_);
}

Layout Layout::reshape_contiguous(const Shape& shape) const {
  return Layout::contiguous(shape, start_offset_);
}

namespace {
// The innermost dims that form one contiguous run: returns {first folded dim, run length}.
std::pair<size_t, size_t> contiguous_suffix(const Shape& shape, const std::vector<size_t>& stride) {
  if (shape.elem_count() == 0) return {shape.rank(), 1};
  size_t len = 1;
  size_t k = shape.rank();
  while (k > 0) {
    size_t d = shape[k - 1];
    if (d != 1 && stride[k - 1] != len) break;
    len *= d;
    --k;
  }
  return {k, len};
}
}  // namespace

size_t Layout::block_len() const { return contiguous_suffix(shape_, stride_).second; }

void Layout::for_each_block(const std::function<void(size_t)>& fn) const {
  size_t n = elem_count();
  if (n == 0) return;
  StridedBlocks it(*this);
  size_t blocks = n / it.block_len();
  for (size_t b = 0; b < blocks; ++b) {
    fn(it.offset());
    it.next();
  }
}

size_t Layout::offset_of(size_t linear_index) const {
  size_t off = start_offset_;
  for (size_t i = shape_.rank(); i-- > 0;) {
    size_t d = shape_[i];
    off += (linear_index % d) * stride_[i];
    linear_index /= d;
  }
  return off;
}

StridedBlocks::StridedBlocks(const Layout& layout, size_t first_elem) {
  auto [k, len] = contiguous_suffix(layout.shape(), layout.stride());
  block_len_ = len;
  const auto& dims = layout.dims();
  const auto& stride = layout.stride();
  dims_.assign(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(k));
  stride_.assign(stride.begin(), stride.begin() + static_cast<std::ptrdiff_t>(k));
  index_.assign(k, 0);
  offset_ = layout.start_offset();
  size_t block = first_elem / block_len_;
  for (size_t i = k; i-- > 0;) {
    size_t d = dims_[i];
    if (d == 0) break;
    index_[i] = block % d;
    offset_ += index_[i] * stride_[i];
    block /= d;
  }
}

void StridedBlocks::next() {
  for (size_t i = dims_.size(); i-- > 0;) {
    if (++index_[i] < dims_[i]) {
      offset_ += stride_[i];
      return;
    }
    offset_ -= (dims_[i] - 1) * stride_[i];
    index_[i] = 0;
  }
}

}  // namespace candle
