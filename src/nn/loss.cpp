#include "candle/nn/loss.h"

#include <cmath>
#include <string>

#include "candle/nn/ops.h"

namespace candle::nn::loss {
namespace {

void check_same_dims(const Tensor& inp, const Tensor& target, const char* op) {
  if (inp.shape() != target.shape())
    throw Error(ErrorKind::ShapeMismatch,
                std::string("loss::") + op + ": input and target must have the same shape, got inp: " +
                    inp.shape().to_string() + ", target: " + target.shape().to_string());
}

void check_float_input(const Tensor& t, const char* op, const char* what) {
  if (!dtype_is_float(t.dtype()))
    throw Error(ErrorKind::DTypeMismatch, std::string("loss::") + op + ": " + what +
                                              " must be a float tensor, got " +
                                              std::string(dtype_name(t.dtype())));
}

}  // namespace

Tensor nll(const Tensor& inp, const Tensor& target) {
  if (target.rank() != 1)
    throw Error(
        ErrorKind::ShapeMismatch,
        "loss::nll: the target tensor should have a single dimension, got " + target.shape().to_string());
  if (inp.rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                "loss::nll: the input tensor should have two dimensions, got " + inp.shape().to_string());
  size_t b = target.dim(0);
  if (inp.dim(0) != b)
    throw Error(ErrorKind::ShapeMismatch, "loss::nll: batch size mismatch between inp (" +
                                              std::to_string(inp.dim(0)) + ") and target (" +
                                              std::to_string(b) + ")");
  if (dtype_is_float(target.dtype()))
    throw Error(ErrorKind::DTypeMismatch,
                std::string("loss::nll: the target must hold integer class ids, got ") +
                    std::string(dtype_name(target.dtype())));
  check_float_input(inp, "nll", "the input");
  if (b == 0) throw Error(ErrorKind::ShapeMismatch, "loss::nll: empty batch");
  return inp.gather(target.unsqueeze(1), 1).sum_all().affine(-1.0 / static_cast<double>(b), 0.0);
}

Tensor cross_entropy(const Tensor& inp, const Tensor& target) {
  if (inp.rank() != 2)
    throw Error(ErrorKind::ShapeMismatch,
                "loss::cross_entropy expects an input tensor of rank 2, got " + inp.shape().to_string());
  check_float_input(inp, "cross_entropy", "the input");
  return nll(ops::log_softmax(inp, 1), target);
}

Tensor mse(const Tensor& inp, const Tensor& target) {
  check_same_dims(inp, target, "mse");
  return (inp - target).sqr().mean_all();
}

Tensor l1(const Tensor& inp, const Tensor& target) {
  check_same_dims(inp, target, "l1");
  return (inp - target).abs().mean_all();
}

Tensor binary_cross_entropy_with_logit(const Tensor& inp, const Tensor& target) {
  check_same_dims(inp, target, "binary_cross_entropy_with_logit");
  check_float_input(inp, "binary_cross_entropy_with_logit", "the input");
  // log(1 + exp(-|x|)) never overflows; relu(x) - x * t completes the softplus form
  Tensor softplus_tail = inp.abs().neg().exp().affine(1.0, 1.0).log();
  return (inp.relu() - inp * target + softplus_tail).mean_all();
}

Tensor huber(const Tensor& inp, const Tensor& target, double delta) {
  check_same_dims(inp, target, "huber");
  check_float_input(inp, "huber", "the input");
  if (!(delta > 0.0) || !std::isfinite(delta))
    throw Error(ErrorKind::InvalidArgument,
                "loss::huber: delta must be positive, got " + std::to_string(delta));
  Tensor diff = inp - target;
  Tensor abs_diff = diff.abs();
  Tensor squared = diff.sqr() * 0.5;
  Tensor linear = abs_diff.affine(delta, -0.5 * delta * delta);
  return abs_diff.lt(Scalar(delta)).where_cond(squared, linear).mean_all();
}

}  // namespace candle::nn::loss
