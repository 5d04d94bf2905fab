// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::index_select(const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::gather(const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::scatter(const Tensor&, const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::scatter_add(const Tensor&, const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::index_add(const Tensor&, const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::slice_scatter(const Tensor&, int64_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void Tensor::slice_set(const Tensor&, int64_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void Tensor::scatter_set(const Tensor&, const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void Tensor::scatter_add_set(const Tensor&, const Tensor&, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::embedding(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void Tensor::const_set(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
