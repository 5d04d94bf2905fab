// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::sum_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sum(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mean_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mean(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::max_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::max(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::min_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::min(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::argmax_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::argmax(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::argmin_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::argmin(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::var_keepdim(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::var(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::cumsum(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sum_keepdim(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sum(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mean_keepdim(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mean(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::log_sum_exp(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sum_all() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mean_all() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::max_all() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::min_all() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::norm() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
std::pair<Tensor, Tensor> Tensor::sort_last_dim(bool) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::arg_sort_last_dim(bool) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
