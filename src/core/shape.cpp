#include "candle/shape.h"

#include <ostream>

#include "candle/error.h"

namespace candle {

size_t Shape::elem_count() const {
  size_t n = 1;
  for (size_t d : dims_) n *= d;
  return n;
}

size_t Shape::dim(int64_t i) const { return dims_[resolve_dim(i, "dim")]; }

std::vector<size_t> Shape::stride_contiguous() const {
  std::vector<size_t> stride(dims_.size());
  size_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    stride[i] = acc;
    acc *= dims_[i];
  }
  return stride;
}

bool Shape::is_contiguous(const std::vector<size_t>& stride) const {
  if (stride.size() != dims_.size()) return false;
  size_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    // dims of size 1 may have any stride
    if (dims_[i] > 1 && stride[i] != acc) return false;
    acc *= dims_[i];
  }
  return true;
}

bool Shape::is_fortran_contiguous(const std::vector<size_t>& stride) const {
  if (stride.size() != dims_.size()) return false;
  size_t acc = 1;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] > 1 && stride[i] != acc) return false;
    acc *= dims_[i];
  }
  return true;
}

size_t Shape::resolve_dim(int64_t dim, const char* op) const {
  int64_t rank = static_cast<int64_t>(dims_.size());
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) {
    throw Error(ErrorKind::DimOutOfRange, std::string("dim out of range in ") + op +
                                              ", dim: " + std::to_string(dim) + ", shape: " + to_string());
  }
  return static_cast<size_t>(d);
}

size_t Shape::resolve_dim_inclusive(int64_t dim, const char* op) const {
  int64_t rank = static_cast<int64_t>(dims_.size());
  int64_t d = dim < 0 ? dim + rank + 1 : dim;
  if (d < 0 || d > rank) {
    throw Error(ErrorKind::DimOutOfRange, std::string("dim out of range in ") + op +
                                              ", dim: " + std::to_string(dim) + ", shape: " + to_string());
  }
  return static_cast<size_t>(d);
}

Shape Shape::broadcast_shape_binary_op(const Shape& rhs, const char* op) const {
  const auto& l = dims_;
  const auto& r = rhs.dims_;
  size_t rank = std::max(l.size(), r.size());
  std::vector<size_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    size_t ld = i < rank - l.size() ? 1 : l[i - (rank - l.size())];
    size_t rd = i < rank - r.size() ? 1 : r[i - (rank - r.size())];
    if (ld == rd || rd == 1) {
      out[i] = ld;
    } else if (ld == 1) {
      out[i] = rd;
    } else {
      throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " + to_string() +
                                                ", rhs: " + rhs.to_string());
    }
  }
  return Shape(std::move(out));
}

Shape Shape::broadcast_shape_matmul(const Shape& rhs, const char* op) const {
  if (rank() < 2 || rhs.rank() < 2) {
    throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " + to_string() +
                                              ", rhs: " + rhs.to_string());
  }
  size_t m = dims_[rank() - 2], k = dims_[rank() - 1];
  size_t k2 = rhs.dims_[rhs.rank() - 2], n = rhs.dims_[rhs.rank() - 1];
  if (k != k2) {
    throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " + to_string() +
                                              ", rhs: " + rhs.to_string());
  }
  Shape lb(std::vector<size_t>(dims_.begin(), dims_.end() - 2));
  Shape rb(std::vector<size_t>(rhs.dims_.begin(), rhs.dims_.end() - 2));
  Shape bs;
  try {
    bs = lb.broadcast_shape_binary_op(rb, op);
  } catch (const Error&) {
    throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " + to_string() +
                                              ", rhs: " + rhs.to_string());
  }
  std::vector<size_t> out = bs.dims();
  out.push_back(m);
  out.push_back(n);
  return Shape(std::move(out));
}

namespace {
[[noreturn]] void rank_error(const Shape& s, size_t want, const char* op) {
  throw Error(ErrorKind::ShapeMismatch,
              std::string("unexpected rank in ") + op + ", expected: " + std::to_string(want) +
                  ", got: " + std::to_string(s.rank()) + " (shape " + s.to_string() + ")");
}
template <size_t N>
std::array<size_t, N> dims_n(const Shape& s, const char* op) {
  if (s.rank() != N) rank_error(s, N, op);
  std::array<size_t, N> a{};
  for (size_t i = 0; i < N; ++i) a[i] = s[i];
  return a;
}
}  // namespace

size_t Shape::dims0(const char* op) const {
  if (rank() != 0) rank_error(*this, 0, op);
  return 0;
}
std::array<size_t, 1> Shape::dims1(const char* op) const { return dims_n<1>(*this, op); }
std::array<size_t, 2> Shape::dims2(const char* op) const { return dims_n<2>(*this, op); }
std::array<size_t, 3> Shape::dims3(const char* op) const { return dims_n<3>(*this, op); }
std::array<size_t, 4> Shape::dims4(const char* op) const { return dims_n<4>(*this, op); }
std::array<size_t, 5> Shape::dims5(const char* op) const { return dims_n<5>(*this, op); }

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  s += "]";
  return s;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

}  // namespace candle
