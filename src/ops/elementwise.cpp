// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
Tensor Tensor::recip() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::neg() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::exp() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::log() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sin() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::cos() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::tanh() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::abs() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sqr() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sqrt() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::gelu() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::gelu_erf() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::erf() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::relu() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::silu() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sigmoid() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::ceil() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::floor() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::round() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sign() const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::affine(double, double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::elu(double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::powf(double) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::clamp(const Scalar&, const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::clamp(const Tensor&, const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::round_to(int32_t) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::add(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::sub(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::mul(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::div(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::maximum(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::minimum(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::pow(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_add(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_sub(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_mul(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_div(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_maximum(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_minimum(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_pow(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::eq(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::ne(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::lt(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::le(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::gt(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::ge(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_eq(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_ne(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_lt(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_le(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_gt(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::broadcast_ge(const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::maximum(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::minimum(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::eq(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::ne(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::lt(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::le(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::gt(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::ge(const Scalar&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::cmp(CmpOp, const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor Tensor::where_cond(const Tensor&, const Tensor&) const { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator+(const Tensor&, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator-(const Tensor&, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator*(const Tensor&, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator/(const Tensor&, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator+(const Tensor&, double) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator-(const Tensor&, double) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator*(const Tensor&, double) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator/(const Tensor&, double) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator+(double, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator-(double, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator*(double, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator/(double, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
Tensor operator-(const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
