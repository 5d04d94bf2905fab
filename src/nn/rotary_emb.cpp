// candle_nn::rotary_emb: rope, rope_i and rope_thd are custom ops whose forwards call the
// device's fused kernel (BackendStorage::rope, see nn/fused_op.h); tensor-op versions where a
// device has none and under autograd.
#include "candle/nn/rotary_emb.h"

#include <string>

#include "check.h"
#include "fused_op.h"

namespace candle::nn::rotary_emb {
namespace {

// Checks xs [b, ., ., d] against cos/sin ([t_max, d/2] or [b, t_max, d/2]) for seq_len t.
void check_rope(const Tensor& xs, const Tensor& cos, const Tensor& sin, size_t t, const char* op) {
  detail::check_float(xs, op);
  detail::check_same_device(xs, cos, op);
  detail::check_same_device(xs, sin, op);
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

// The fused op `name` (candle-nn's RotaryEmb, RotaryEmbI, RotaryEmbThd), or composed(cos, sin)
// when an operand is tracked: the op records no backward, the tensor ops carry the gradient.
template <typename Composed>
Tensor rope_op(const char* name, RopeKind kind, const Tensor& xs, const Tensor& cos, const Tensor& sin,
               Composed composed) {
  if (xs.track_op() || cos.track_op() || sin.track_op()) return composed(cos, sin);
  Tensor c = detail::in_dtype(cos, xs.dtype()), s = detail::in_dtype(sin, xs.dtype());
  auto kernel = [kind](const BackendStorage& sx, const Layout& lx, const BackendStorage& sc, const Layout& lc,
                       const BackendStorage& ss,
                       const Layout& ls) { return sx.rope(kind, lx, sc, lc, ss, ls); };
  return xs.apply_op3_no_bwd(c, s, detail::FusedOp3(name, kernel, [&] { return composed(c, s); }));
}

}  // namespace

Tensor rope(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope");
  return rope_op("rotary-emb", RopeKind::Halves, xs, cos, sin,
                 [&](const Tensor& c, const Tensor& s) { return rope_composed(xs, c, s); });
}

Tensor rope_i(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(2), "rope_i");
  return rope_op("rotary-emb-int", RopeKind::Interleaved, xs, cos, sin,
                 [&](const Tensor& c, const Tensor& s) { return rope_i_composed(xs, c, s); });
}

Tensor rope_thd(const Tensor& xs, const Tensor& cos, const Tensor& sin) {
  check_rope(xs, cos, sin, xs.dim(1), "rope_thd");
  return rope_op("rotary-emb-thd", RopeKind::HalvesThd, xs, cos, sin, [&](const Tensor& c, const Tensor& s) {
    return rope_composed(xs.transpose(1, 2), c, s).transpose(1, 2);
  });
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
