// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::arange_impl(const Scalar&, const Scalar&, const Scalar&, DType, const Device&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::eye(size_t, DType, const Device&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::tril2(size_t, DType, const Device&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::triu2(size_t, DType, const Device&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
std::vector<Tensor> Tensor::meshgrid(const std::vector<Tensor>&, bool) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
