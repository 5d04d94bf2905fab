// Shape helpers shared by the backends' indexing ops (CPU, CUDA): a tensor seen as
// [left, dim, right] around the indexed dim, and the checks of the operands' shapes.
#pragma once

#include <cstddef>
#include <string>

#include "candle/error.h"
#include "candle/shape.h"

namespace candle::index_util {

// The tensor's [left, dim, right] split.
struct Split {
  size_t left = 1, dim = 1, right = 1;
};

inline Split split_at(const Shape& shape, size_t dim) {
  Split s;
  for (size_t i = 0; i < shape.rank(); ++i) {
    if (i < dim)
      s.left *= shape[i];
    else if (i == dim)
      s.dim = shape[i];
    else
      s.right *= shape[i];
  }
  return s;
}

inline bool same_dims_except(const Shape& a, const Shape& b, size_t dim) {
  if (a.rank() != b.rank()) return false;
  for (size_t i = 0; i < a.rank(); ++i) {
    if (i != dim && a[i] != b[i]) return false;
  }
  return true;
}

inline void internal_check(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(ErrorKind::Internal, std::string(op) + ": " + what);
}

}  // namespace candle::index_util
