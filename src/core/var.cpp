#include "candle/var.h"

#include "core/tensor_impl.h"
#include "ops/op_util.h"

namespace candle {
namespace {
Tensor mark_variable(Tensor t) {
  t = t.is_contiguous() && t.layout().start_offset() == 0 ? t.detach() : t.copy().detach();
  t.impl()->is_variable = true;
  return t;
}
}  // namespace

Var Var::zeros(const Shape& shape, DType dtype, const Device& device) {
  return Var(mark_variable(Tensor::zeros(shape, dtype, device)));
}
Var Var::ones(const Shape& shape, DType dtype, const Device& device) {
  return Var(mark_variable(Tensor::ones(shape, dtype, device)));
}
Var Var::rand(double lo, double up, const Shape& shape, DType dtype, const Device& device) {
  return Var(mark_variable(Tensor::rand(lo, up, shape, dtype, device)));
}
Var Var::randn(double mean, double stddev, const Shape& shape, DType dtype, const Device& device) {
  return Var(mark_variable(Tensor::randn(mean, stddev, shape, dtype, device)));
}
Var Var::from_tensor(const Tensor& t) { return Var(mark_variable(t.copy())); }

void Var::set(const Tensor& src) const {
  ops::check_same_shape(t_, src, "Var::set");
  ops::check_same_dtype(t_, src, "Var::set");
  ops::check_same_device(t_, src, "Var::set");
  if (src.storage().get() == t_.storage().get()) {
    if (src.layout() == t_.layout()) return;
    Tensor tmp = src.copy();
    tmp.storage()->copy_strided_src(*t_.storage(), t_.layout().start_offset(), tmp.layout());
    return;
  }
  src.storage()->copy_strided_src(*t_.storage(), t_.layout().start_offset(), src.layout());
}

}  // namespace candle
