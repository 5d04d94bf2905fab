// candle_nn::rotary_emb: fused CPU kernels, a backend's fused kernel (BackendStorage::rope) on
// other devices, tensor-op versions where there is none and under autograd.
#include "candle/nn/rotary_emb.h"

#include <optional>
#include <string>

#include "nn/fused_cpu.h"
#include "ops/op_util.h"

namespace candle::nn::rotary_emb {
namespace {

// Checks xs [b, ., ., d] against cos/sin ([t_max, d/2] or [b, t_max, d/2]) for seq_len t.
void check_rope(const Tensor& xs, const Tensor& cos, const Tensor& sin, size_t t, const char* op) {
  candle::ops::check_float(xs, op);
  candle::ops::check_same_device(xs, cos, op);
  candle::ops::check_same_device(xs, sin, op);
  auto [b, d1, d2, d] = xs.shape().dims4(op);
  (void)d1;
  (void)d2;
  auto bad = [&] {
    return Error(ErrorKind::ShapeMismatch,
                 std::string("inconsistent shapes in ") + op + ", x: " + xs.shape().to_string() +
                     ", cos: " + cos.shape().to_string() + ", sin: " + sin.shape().to_string());
  };
  if (cos.shape() != sin.shape() || d % 2 != 0) throw bad();
  if (cos.rank() == 2) {
    if (cos.dim(1) * 2 != d || cos.dim(0) < t) throw bad();
  } else if (cos.rank() == 3) {
    if (cos.dim(0) != b || cos.dim(2) * 2 != d || cos.dim(1) < t) throw bad();
  } else {
    throw bad();
  }
}

bool use_fused(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  return xs.device().is_cpu() && !xs.track_op() && !cos.track_op() && !sin.track_op();
}

// The first t rows of cos/sin, broadcastable against [b, h, t, d/2] (2-D or batched 3-D).
Tensor cs_for_bhtd(const Tensor& cs, size_t t) {
  if (cs.rank() == 2) return cs.narrow(0, 0, t).unsqueeze(0).unsqueeze(0);
  return cs.narrow(1, 0, t).unsqueeze(1);
}

Tensor rope_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  size_t t = x.dim(2);
  Tensor c = cs_for_bhtd(cos, t).to_dtype(x.dtype());
  Tensor s = cs_for_bhtd(sin, t).to_dtype(x.dtype());
  c = Tensor::cat({c, c}, -1);
  s = Tensor::cat({s, s}, -1);
  size_t half = x.dim(3) / 2;
  Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  Tensor rotated = Tensor::cat({x2.neg(), x1}, -1);
  return x.broadcast_mul(c) + rotated.broadcast_mul(s);
}

Tensor rope_i_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  auto [b, h, t, d] = x.shape().dims4("rope_i");
  Tensor c = cs_for_bhtd(cos, t).to_dtype(x.dtype()).unsqueeze(-1);
  Tensor s = cs_for_bhtd(sin, t).to_dtype(x.dtype()).unsqueeze(-1);
  Tensor xr = x.reshape({b, h, t, d / 2, 2});
  Tensor x0 = xr.narrow(-1, 0, 1), x1 = xr.narrow(-1, 1, 1);
  Tensor y0 = x0.broadcast_mul(c) - x1.broadcast_mul(s);
  Tensor y1 = x0.broadcast_mul(s) + x1.broadcast_mul(c);
  return Tensor::cat({y0, y1}, -1).flatten_from(-2);
}

// The backend's fused kernel (BackendStorage::rope), or nullopt: compose.
std::optional<Tensor> rope_backend(const Tensor& xs, const Tensor& cos, const Tensor& sin, RopeKind kind) {
  if (!detail::backend_fused_ok(xs, {&cos, &sin})) return std::nullopt;
  return detail::from_backend(
      xs.storage()->rope(kind, xs.layout(), *cos.storage(), cos.layout(), *sin.storage(), sin.layout()), xs);
}

}  // namespace

Tensor rope(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope");
  if (use_fused(xs, cos, sin)) return detail::rope_cpu(xs, cos, sin, RopeKind::Halves);
  if (auto y = rope_backend(xs, cos, sin, RopeKind::Halves)) return *y;
  return rope_composed(xs, cos, sin);
}

Tensor rope_i(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope_i");
  if (use_fused(xs, cos, sin)) return detail::rope_cpu(xs, cos, sin, RopeKind::Interleaved);
  if (auto y = rope_backend(xs, cos, sin, RopeKind::Interleaved)) return *y;
  return rope_i_composed(xs, cos, sin);
}

Tensor rope_thd(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(1), "rope_thd");
  if (use_fused(xs, cos, sin)) return detail::rope_cpu(xs, cos, sin, RopeKind::HalvesThd);
  if (auto y = rope_backend(xs, cos, sin, RopeKind::HalvesThd)) return *y;
  return rope_composed(xs.transpose(1, 2), cos, sin).transpose(1, 2);
}

Tensor rope_slow(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope_slow");
  return rope_composed(xs, cos, sin);
}

Tensor rope_i_slow(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope_i_slow");
  return rope_i_composed(xs, cos, sin);
}

}  // namespace candle::nn::rotary_emb
