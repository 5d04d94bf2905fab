// candle_nn::ops: composed tensor ops; softmax_last_dim, rms_norm and layer_norm are custom ops
// whose forwards call the device's fused kernel (nn/fused_op.h).
#include "candle/nn/ops.h"

#include <initializer_list>
#include <string>

#include "check.h"
#include "fused_op.h"

namespace candle::nn::ops {
namespace {

// Whether any operand is tracked: the fused ops record no backward, so such a call takes the
// composed version, whose tensor ops carry the gradient (the values agree to rounding).
bool any_tracked(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->track_op()) return true;
  return false;
}

DType internal_dtype(DType dt) { return dt == DType::F64 ? DType::F64 : DType::F32; }

// alpha (and beta) must be [last dim of xs], float, on xs' device.
void check_norm_args(const Tensor& xs, const Tensor& alpha, const Tensor* beta, const char* op) {
  detail::check_float(xs, op);
  detail::check_float(alpha, op);
  detail::check_same_device(xs, alpha, op);
  if (xs.rank() == 0)
    throw Error(ErrorKind::ShapeMismatch, std::string(op) + " expects at least one dim, got a scalar");
  size_t d = xs.dims().back();
  auto check_vec = [&](const Tensor& v, const char* what) {
    if (v.rank() != 1 || v.dim(0) != d)
      throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op +
                                                ", x: " + xs.shape().to_string() + ", " + what + ": " +
                                                v.shape().to_string());
  };
  check_vec(alpha, "alpha");
  if (beta) {
    detail::check_float(*beta, op);
    detail::check_same_device(xs, *beta, op);
    check_vec(*beta, "beta");
  }
}

}  // namespace

Tensor softmax(const Tensor& xs, int64_t dim) {
  detail::check_float(xs, "softmax");
  size_t d = xs.shape().resolve_dim(dim, "softmax");
  int64_t sd = static_cast<int64_t>(d);
  Tensor diff = xs.broadcast_sub(xs.max_keepdim(sd));
  Tensor num = diff.exp();
  return num.broadcast_div(num.sum_keepdim(sd));
}

Tensor log_softmax(const Tensor& xs, int64_t dim) {
  detail::check_float(xs, "log_softmax");
  size_t d = xs.shape().resolve_dim(dim, "log_softmax");
  int64_t sd = static_cast<int64_t>(d);
  Tensor diff = xs.broadcast_sub(xs.max_keepdim(sd));
  return diff.broadcast_sub(diff.exp().sum_keepdim(sd).log());
}

Tensor softmax_last_dim(const Tensor& xs) {
  detail::check_float(xs, "softmax_last_dim");
  if (xs.rank() == 0)
    throw Error(ErrorKind::ShapeMismatch, "softmax_last_dim expects at least one dim, got a scalar");
  auto composed = [&] { return softmax(xs, -1); };
  if (any_tracked({&xs})) return composed();
  auto kernel = [](const BackendStorage& s, const Layout& l) { return s.softmax_last_dim(l); };
  return xs.apply_op1_no_bwd(detail::FusedOp1("softmax-last-dim", kernel, composed));
}

Tensor sigmoid(const Tensor& xs) { return xs.sigmoid(); }
Tensor silu(const Tensor& xs) { return xs.silu(); }

Tensor swiglu(const Tensor& xs) {
  if (xs.rank() == 0 || xs.dims().back() % 2 != 0)
    throw Error(ErrorKind::ShapeMismatch,
                "swiglu needs an even last dim, got shape " + xs.shape().to_string());
  auto halves = xs.chunk(2, -1);
  return silu_mul(halves[0], halves[1]);
}

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  if (gate.shape() != up.shape() || gate.dtype() != up.dtype())
    throw Error(ErrorKind::ShapeMismatch, "silu_mul: gate " + gate.shape().to_string() + " " +
                                              std::string(dtype_name(gate.dtype())) + " and up " +
                                              up.shape().to_string() + " " +
                                              std::string(dtype_name(up.dtype())) + " differ");
  auto composed = [&] { return gate.silu() * up; };
  if (any_tracked({&gate, &up})) return composed();
  auto kernel = [](const BackendStorage& s, const Layout& l, const BackendStorage& su, const Layout& lu) {
    return s.silu_mul(l, su, lu);
  };
  return gate.apply_op2_no_bwd(up, detail::FusedOp2("silu-mul", kernel, composed));
}

Tensor hard_sigmoid(const Tensor& xs) { return ((xs + 3.0) / 6.0).clamp(Scalar(0.0), Scalar(1.0)); }

Tensor leaky_relu(const Tensor& xs, double negative_slope) {
  Tensor zeros = xs.zeros_like();
  return xs.maximum(zeros) + xs.minimum(zeros) * negative_slope;
}

Tensor rms_norm_slow(const Tensor& xs, const Tensor& alpha, float eps) {
  check_norm_args(xs, alpha, nullptr, "rms_norm");
  DType dt = xs.dtype();
  double hidden = static_cast<double>(xs.dims().back());
  Tensor x = xs.to_dtype(internal_dtype(dt));
  Tensor norm_x = x.sqr().sum_keepdim(-1) / hidden;
  Tensor normed = x.broadcast_div((norm_x + static_cast<double>(eps)).sqrt());
  return normed.to_dtype(dt).broadcast_mul(alpha.to_dtype(dt));
}

Tensor rms_norm(const Tensor& xs, const Tensor& alpha, float eps) {
  check_norm_args(xs, alpha, nullptr, "rms_norm");
  if (any_tracked({&xs, &alpha})) return rms_norm_slow(xs, alpha, eps);
  Tensor a = detail::in_dtype(alpha, xs.dtype());
  auto kernel = [eps](const BackendStorage& s, const Layout& l, const BackendStorage& sa, const Layout& la) {
    return s.rms_norm(l, sa, la, eps);
  };
  return xs.apply_op2_no_bwd(a,
                             detail::FusedOp2("rms-norm", kernel, [&] { return rms_norm_slow(xs, a, eps); }));
}

std::pair<Tensor, Tensor> add_rms_norm(const Tensor& xs, const Tensor& h, const Tensor& alpha, float eps) {
  if (xs.shape() != h.shape() || xs.dtype() != h.dtype())
    throw Error(ErrorKind::ShapeMismatch,
                "add_rms_norm: xs " + xs.shape().to_string() + " " + std::string(dtype_name(xs.dtype())) +
                    " and h " + h.shape().to_string() + " " + std::string(dtype_name(h.dtype())) + " differ");
  check_norm_args(xs, alpha, nullptr, "add_rms_norm");
  if (any_tracked({&xs, &h, &alpha})) {
    Tensor s = xs + h;
    return {s, rms_norm(s, alpha, eps)};
  }
  Tensor a = detail::in_dtype(alpha, xs.dtype());
  auto kernel = [eps](const BackendStorage& s, const Layout& l, const BackendStorage& sh, const Layout& lh,
                      const BackendStorage& sa,
                      const Layout& la) { return s.add_rms_norm(l, sh, lh, sa, la, eps); };
  auto composed = [&] {
    Tensor s = xs + h;
    return Tensor::stack({s, rms_norm(s, a, eps)}, 0);
  };
  std::vector<size_t> dims{2};
  dims.insert(dims.end(), xs.dims().begin(), xs.dims().end());
  Tensor both = xs.apply_op3_no_bwd(h, a, detail::FusedOp3("add-rms-norm", kernel, composed, Shape(dims)));
  return {both.get(0), both.get(1)};
}

Tensor layer_norm_slow(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps) {
  check_norm_args(xs, alpha, &beta, "layer_norm");
  DType dt = xs.dtype();
  double hidden = static_cast<double>(xs.dims().back());
  Tensor x = xs.to_dtype(internal_dtype(dt));
  x = x.broadcast_sub(x.sum_keepdim(-1) / hidden);
  Tensor norm_x = x.sqr().sum_keepdim(-1) / hidden;
  Tensor normed = x.broadcast_div((norm_x + static_cast<double>(eps)).sqrt());
  return normed.to_dtype(dt).broadcast_mul(alpha.to_dtype(dt)).broadcast_add(beta.to_dtype(dt));
}

Tensor layer_norm(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps) {
  check_norm_args(xs, alpha, &beta, "layer_norm");
  if (any_tracked({&xs, &alpha, &beta})) return layer_norm_slow(xs, alpha, beta, eps);
  Tensor a = detail::in_dtype(alpha, xs.dtype()), b = detail::in_dtype(beta, xs.dtype());
  auto kernel = [eps](const BackendStorage& s, const Layout& l, const BackendStorage& sa, const Layout& la,
                      const BackendStorage& sb,
                      const Layout& lb) { return s.layer_norm(l, sa, la, sb, lb, eps); };
  return xs.apply_op3_no_bwd(
      a, b, detail::FusedOp3("layer-norm", kernel, [&] { return layer_norm_slow(xs, a, b, eps); }));
}

Tensor dropout(const Tensor& xs, float drop_p) {
  if (!(drop_p >= 0.0f && drop_p < 1.0f))
    throw Error(ErrorKind::InvalidArgument,
                "dropout probability has to be in [0, 1), got " + std::to_string(drop_p));
  detail::check_float(xs, "dropout");
  Tensor r = Tensor::rand(0.0, 1.0, xs.shape(), DType::F32, xs.device());
  double scale = 1.0 / (1.0 - static_cast<double>(drop_p));
  Tensor mask = r.ge(Scalar(drop_p)).to_dtype(xs.dtype()) * scale;
  return xs * mask;
}

Tensor pixel_shuffle(const Tensor& xs, size_t r) {
  auto [b, c, h, w] = xs.shape().dims4("pixel_shuffle");
  if (r == 0 || c % (r * r) != 0)
    throw Error(ErrorKind::ShapeMismatch,
                "pixel_shuffle: channels of " + xs.shape().to_string() +
                    " are not divisible by upscale_factor^2 = " + std::to_string(r * r));
  size_t oc = c / (r * r);
  return xs.reshape({b, oc, r, r, h, w}).permute({0, 1, 4, 2, 5, 3}).reshape({b, oc, h * r, w * r});
}

Tensor pixel_unshuffle(const Tensor& xs, size_t r) {
  auto [b, c, h, w] = xs.shape().dims4("pixel_unshuffle");
  if (r == 0 || h % r != 0 || w % r != 0)
    throw Error(ErrorKind::ShapeMismatch, "pixel_unshuffle: height and width of " + xs.shape().to_string() +
                                              " are not divisible by downscale_factor " + std::to_string(r));
  size_t oh = h / r, ow = w / r;
  return xs.reshape({b, c, oh, r, ow, r}).permute({0, 1, 3, 5, 2, 4}).reshape({b, c * r * r, oh, ow});
}

Tensor replication_pad2d(const Tensor& xs, size_t pad) {
  auto [b, c, h, w] = xs.shape().dims4("replication_pad2d");
  (void)b;
  (void)c;
  if (pad == 0) return xs;
  if (h == 0 || w == 0)
    throw Error(ErrorKind::ShapeMismatch, "zero-size tensor in replication_pad2d: " + xs.shape().to_string());
  // candle supports pad == 1 only; any size is the same border repetition.
  return xs.pad_with_same(3, pad, pad).pad_with_same(2, pad, pad);
}

}  // namespace candle::nn::ops

namespace candle::nn {

Dropout::Dropout(float drop_p) : drop_p_(drop_p) {
  if (!(drop_p >= 0.0f && drop_p < 1.0f))
    throw Error(ErrorKind::InvalidArgument,
                "Dropout: probability has to be in [0, 1), got " + std::to_string(drop_p));
}

}  // namespace candle::nn
