// Reductions, cumsum and sorting: dims and shape rules, then dispatch to the backend.
//
// Every reduction is a BackendStorage op; mean, var, norm and log_sum_exp have composed
// defaults (src/ops/composed_defaults.cpp) that a backend without a kernel of its own runs on
// its device, and single-pass kernels on the CPU. sort_last_dim gathers with the backend's gather.
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "ops/op_util.h"

namespace candle {
namespace {

// The input shape with `dims` (sorted) set to 1, or removed when !keepdim.
Shape reduced_shape(const Shape& s, const std::vector<size_t>& dims, bool keepdim) {
  std::vector<size_t> out;
  size_t j = 0;
  for (size_t i = 0; i < s.rank(); ++i) {
    const bool reduced = j < dims.size() && dims[j] == i;
    if (reduced) ++j;
    if (!reduced)
      out.push_back(s[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return Shape(std::move(out));
}

std::vector<size_t> all_dims(const Tensor& t) {
  std::vector<size_t> d(t.rank());
  std::iota(d.begin(), d.end(), size_t{0});
  return d;
}

// max/min/argmax/argmin have no value over an empty dim (as PyTorch, an error even when
// the output itself is empty).
void check_not_empty(const Tensor& t, const std::vector<size_t>& dims, const char* op) {
  for (size_t d : dims) {
    if (t.dims()[d] == 0) {
      throw Error(ErrorKind::InvalidArgument, std::string("cannot apply ") + op +
                                                  " over an empty dim, dim: " + std::to_string(d) +
                                                  ", shape: " + t.shape().to_string());
    }
  }
}

// g (the gradient of a reduction over `dims` of x) seen with the reduced dims kept as 1.
Tensor keepdim_view(const Tensor& g, const Tensor& x, const std::vector<size_t>& dims) {
  return g.reshape(reduced_shape(x.shape(), dims, true));
}

Tensor reduce_impl(const Tensor& t, ReduceOp op, const std::vector<size_t>& dims, bool keepdim,
                   const char* name) {
  if (op != ReduceOp::Sum) check_not_empty(t, dims, name);
  const bool is_arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  StoragePtr s = t.storage()->reduce(op, t.layout(), dims);
  Tensor out = ops::make_result(std::move(s), reduced_shape(t.shape(), dims, keepdim),
                                is_arg ? DType::U32 : t.dtype(), t.device());
  if (is_arg || !t.track_op()) return out;  // (the backward captures a vector: build it only when needed)
  if (op == ReduceOp::Sum) {
    return autograd::record(
        std::move(out), name,
        CANDLE_BACKWARD(dims) { gi[0] = keepdim_view(g, in[0], dims).broadcast_as(in[0].shape()); }, t);
  }
  // max / min: as candle, the gradient goes to every position equal to the result
  return autograd::record(
      std::move(out), name,
      CANDLE_BACKWARD(dims) {
        const Tensor& x = in[0];
        Tensor m = keepdim_view(out, x, dims).broadcast_as(x.shape());
        Tensor mask = x.eq(m).to_dtype(x.dtype());
        gi[0] = keepdim_view(g, x, dims).broadcast_as(x.shape()).mul(mask);
      },
      t);
}

Tensor mean_impl(const Tensor& t, const std::vector<size_t>& dims, bool keepdim) {
  Tensor out = ops::make_result(t.storage()->reduce_mean(t.layout(), dims),
                                reduced_shape(t.shape(), dims, keepdim), t.dtype(), t.device());
  if (!t.track_op()) return out;
  return autograd::record(
      std::move(out), "mean",
      CANDLE_BACKWARD(dims) {
        const Tensor& x = in[0];
        size_t n = 1;
        for (size_t d : dims) n *= x.dims()[d];
        gi[0] = keepdim_view(g, x, dims).affine(1.0 / static_cast<double>(n), 0.0).broadcast_as(x.shape());
      },
      t);
}

Tensor var_impl(const Tensor& t, int64_t dim, bool keepdim) {
  size_t d = t.shape().resolve_dim(dim, "var");
  ops::check_float(t, "var");
  Tensor out = ops::make_result(t.storage()->reduce_var(t.layout(), d),
                                reduced_shape(t.shape(), {d}, keepdim), t.dtype(), t.device());
  // d var / dx = 2 (x - mean) / (n - 1)
  return autograd::record(
      std::move(out), "var",
      CANDLE_BACKWARD(d) {
        const Tensor& x = in[0];
        const auto sd = static_cast<int64_t>(d);
        const double n = static_cast<double>(x.dims()[d]);
        Tensor centered = x.broadcast_sub(x.mean_keepdim(sd));
        gi[0] = centered.broadcast_mul(keepdim_view(g, x, {d})).affine(2.0 / (n - 1.0), 0.0);
      },
      t);
}

size_t one_dim(const Tensor& t, int64_t dim, const char* op) { return t.shape().resolve_dim(dim, op); }

}  // namespace

Tensor Tensor::sum_keepdim(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Sum, {one_dim(*this, dim, "sum")}, true, "sum");
}
Tensor Tensor::sum(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Sum, {one_dim(*this, dim, "sum")}, false, "sum");
}
Tensor Tensor::sum_keepdim(const std::vector<int64_t>& dims) const {
  return reduce_impl(*this, ReduceOp::Sum, ops::resolve_dims(shape(), dims, "sum"), true, "sum");
}
Tensor Tensor::sum(const std::vector<int64_t>& dims) const {
  return reduce_impl(*this, ReduceOp::Sum, ops::resolve_dims(shape(), dims, "sum"), false, "sum");
}

Tensor Tensor::mean_keepdim(int64_t dim) const {
  return mean_impl(*this, {one_dim(*this, dim, "mean")}, true);
}
Tensor Tensor::mean(int64_t dim) const { return mean_impl(*this, {one_dim(*this, dim, "mean")}, false); }
Tensor Tensor::mean_keepdim(const std::vector<int64_t>& dims) const {
  return mean_impl(*this, ops::resolve_dims(shape(), dims, "mean"), true);
}
Tensor Tensor::mean(const std::vector<int64_t>& dims) const {
  return mean_impl(*this, ops::resolve_dims(shape(), dims, "mean"), false);
}

Tensor Tensor::max_keepdim(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Max, {one_dim(*this, dim, "max")}, true, "max");
}
Tensor Tensor::max(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Max, {one_dim(*this, dim, "max")}, false, "max");
}
Tensor Tensor::min_keepdim(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Min, {one_dim(*this, dim, "min")}, true, "min");
}
Tensor Tensor::min(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::Min, {one_dim(*this, dim, "min")}, false, "min");
}
Tensor Tensor::argmax_keepdim(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::ArgMax, {one_dim(*this, dim, "argmax")}, true, "argmax");
}
Tensor Tensor::argmax(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::ArgMax, {one_dim(*this, dim, "argmax")}, false, "argmax");
}
Tensor Tensor::argmin_keepdim(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::ArgMin, {one_dim(*this, dim, "argmin")}, true, "argmin");
}
Tensor Tensor::argmin(int64_t dim) const {
  return reduce_impl(*this, ReduceOp::ArgMin, {one_dim(*this, dim, "argmin")}, false, "argmin");
}

Tensor Tensor::var_keepdim(int64_t dim) const { return var_impl(*this, dim, true); }
Tensor Tensor::var(int64_t dim) const { return var_impl(*this, dim, false); }

Tensor Tensor::sum_all() const {
  return reduce_impl(*this, ReduceOp::Sum, all_dims(*this), false, "sum_all");
}
Tensor Tensor::mean_all() const { return mean_impl(*this, all_dims(*this), false); }
Tensor Tensor::max_all() const {
  return reduce_impl(*this, ReduceOp::Max, all_dims(*this), false, "max_all");
}
Tensor Tensor::min_all() const {
  return reduce_impl(*this, ReduceOp::Min, all_dims(*this), false, "min_all");
}

// candle's log_sum_exp: max-shifted, the reduced dims removed; no dims gives self back.
// Over an empty dim it gives -inf (log of an empty sum, as PyTorch) where candle errors.
Tensor Tensor::log_sum_exp(const std::vector<int64_t>& dims) const {
  std::vector<size_t> d = ops::resolve_dims(shape(), dims, "log_sum_exp");
  ops::check_float(*this, "log_sum_exp");
  if (d.empty()) return *this;
  Tensor out = ops::make_result(storage()->reduce_log_sum_exp(layout(), d), reduced_shape(shape(), d, false),
                                dtype(), device());
  if (!track_op()) return out;
  // d lse / dx = exp(x - lse)
  return autograd::record(
      std::move(out), "log_sum_exp",
      CANDLE_BACKWARD(d) {
        const Tensor& x = in[0];
        Tensor p = x.broadcast_sub(keepdim_view(out, x, d)).exp();
        gi[0] = p.broadcast_mul(keepdim_view(g, x, d));
      },
      *this);
}

Tensor Tensor::cumsum(int64_t dim) const {
  size_t d = shape().resolve_dim(dim, "cumsum");
  // the gradient is the reversed cumulative sum of g
  return autograd::record(
      ops::make_result(storage()->cumsum(layout(), d), shape(), dtype(), device()), "cumsum",
      CANDLE_BACKWARD(d) {
        const std::vector<int64_t> f{static_cast<int64_t>(d)};
        gi[0] = g.flip(f).cumsum(static_cast<int64_t>(d)).flip(f);
      },
      *this);
}

Tensor Tensor::norm() const {
  ops::check_float(*this, "norm");
  Tensor out = ops::make_result(storage()->reduce_norm(layout()), Shape{}, dtype(), device());
  return autograd::record(
      std::move(out), "norm", CANDLE_BACKWARD() { gi[0] = in[0].broadcast_mul(g.div(out)); }, *this);
}

Tensor Tensor::arg_sort_last_dim(bool ascending) const {
  shape().resolve_dim(-1, "arg_sort_last_dim");
  return ops::make_result(storage()->arg_sort_last_dim(layout(), ascending), shape(), DType::U32, device());
}

std::pair<Tensor, Tensor> Tensor::sort_last_dim(bool ascending) const {
  shape().resolve_dim(-1, "sort_last_dim");
  Tensor ids = arg_sort_last_dim(ascending);
  Tensor values = ops::make_result(storage()->gather(layout(), *ids.storage(), ids.layout(), rank() - 1),
                                   shape(), dtype(), device());
  // values = gather(self, ids, -1): the gradient scatters back
  values = autograd::record(
      std::move(values), "sort_last_dim",
      CANDLE_BACKWARD(ids) { gi[0] = autograd::zeros_of(in[0]).scatter_add(ids, g, -1); }, *this);
  return {values, ids};
}

}  // namespace candle
