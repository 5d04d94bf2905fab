// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::reshape(const Shape&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::squeeze(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::unsqueeze(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::flatten(int64_t, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::flatten_all() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::flatten_to(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::flatten_from(int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::t() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::transpose(int64_t, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::permute(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::narrow(int64_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
std::vector<Tensor> Tensor::chunk(size_t, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::get(size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::get_on_dim(int64_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_as(const Shape&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_left(const Shape&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::repeat(const Shape&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::cat(const std::vector<Tensor>&, int64_t) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::stack(const std::vector<Tensor>&, int64_t) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::pad_with_zeros(int64_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::pad_with_same(int64_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::roll(int64_t, int64_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::flip(const std::vector<int64_t>&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::unfold(int64_t, size_t, size_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::i(std::initializer_list<IndexItem>) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
