// Elementwise op family: unary ops, affine/elu/powf, clamp, round_to, binary ops and their
// broadcast_ forms, comparisons, where_cond and the arithmetic operators.
#include <cmath>
#include <string>

#include "candle/tensor.h"
#include "core/backprop_op.h"
#include "core/unary_traits.h"
#include "ops/op_util.h"

namespace candle {
namespace {

constexpr double kPi = 3.14159265358979323846;

// g * d op(x) / dx, given x and y = op(x). At the kinks, relu and abs take PyTorch's
// convention (0 at x = 0); ceil, floor, round and sign have a zero gradient.
Tensor unary_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& g) {
  switch (op) {
    case UnaryOp::Neg: return g.neg();
    case UnaryOp::Recip: return g.mul(y.sqr()).neg();
    case UnaryOp::Exp: return g.mul(y);
    case UnaryOp::Log: return g.div(x);
    case UnaryOp::Sin: return g.mul(x.cos());
    case UnaryOp::Cos: return g.mul(x.sin()).neg();
    case UnaryOp::Tanh: return g.mul(y.sqr().affine(-1.0, 1.0));
    case UnaryOp::Abs: return g.mul(x.sign());
    case UnaryOp::Sqr: return g.mul(x).affine(2.0, 0.0);
    case UnaryOp::Sqrt: return g.div(y).affine(0.5, 0.0);
    case UnaryOp::Gelu: {
      // y = 0.5 x (1 + tanh(u)), u = c (x + a x^3)
      const double c = std::sqrt(2.0 / kPi), a = 0.044715;
      Tensor x2 = x.sqr();
      Tensor t = x.mul(x2.affine(a, 1.0)).affine(c, 0.0).tanh();
      Tensor du = x2.affine(3.0 * a * c, c);
      Tensor d = t.affine(0.5, 0.5).add(x.mul(t.sqr().affine(-1.0, 1.0)).mul(du).affine(0.5, 0.0));
      return g.mul(d);
    }
    case UnaryOp::GeluErf: {
      // Phi(x) + x phi(x)
      Tensor cdf = x.affine(1.0 / std::sqrt(2.0), 0.0).erf().affine(0.5, 0.5);
      Tensor pdf = x.sqr().affine(-0.5, 0.0).exp().affine(1.0 / std::sqrt(2.0 * kPi), 0.0);
      return g.mul(cdf.add(x.mul(pdf)));
    }
    case UnaryOp::Erf: return g.mul(x.sqr().neg().exp().affine(2.0 / std::sqrt(kPi), 0.0));
    case UnaryOp::Relu:
      return x.gt(Scalar(0.0))
          .where_cond(g, Tensor::zeros(Shape{}, g.dtype(), g.device()).broadcast_as(g.shape()));
    case UnaryOp::Silu: {
      // s (1 + x (1 - s)), s = sigmoid(x)
      Tensor s = x.sigmoid();
      return g.mul(s.mul(x.mul(s.affine(-1.0, 1.0)).affine(1.0, 1.0)));
    }
    case UnaryOp::Sigmoid: return g.mul(y.mul(y.affine(-1.0, 1.0)));
    case UnaryOp::Ceil:
    case UnaryOp::Floor:
    case UnaryOp::Round:
    case UnaryOp::Sign: return autograd::zeros_of(x);
  }
  throw Error(ErrorKind::Internal, std::string("no gradient for unary op ") + unary_op_name(op));
}

Tensor unary(const Tensor& t, UnaryOp op) {
  if (!unary_op_supports_int(op)) ops::check_float(t, unary_op_name(op));
  return autograd::record(
      ops::make_result(t.storage()->unary(op, t.layout()), t.shape(), t.dtype(), t.device()),
      unary_op_name(op), CANDLE_BACKWARD(op) { gi[0] = unary_grad(op, in[0], out, g); }, t);
}

// The gradients of a binary op at the (broadcast) output shape, summed back to each input's
// shape. Maximum/minimum send the gradient to the input(s) equal to the result, halved
// where both are (so maximum(x, x) has gradient 1, as candle).
void binary_grad(BinaryOp op, const std::vector<Tensor>& in, const Tensor& out, const Tensor& g,
                 std::vector<Tensor>& gi) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  const bool need_a = a.track_op(), need_b = b.track_op();
  const Shape& s = out.shape();
  Tensor ab = a.broadcast_as(s), bb = b.broadcast_as(s);
  Tensor ga, gb;
  switch (op) {
    case BinaryOp::Add:
      ga = g;
      gb = g;
      break;
    case BinaryOp::Sub:
      ga = g;
      if (need_b) gb = g.neg();
      break;
    case BinaryOp::Mul:
      if (need_a) ga = g.mul(bb);
      if (need_b) gb = g.mul(ab);
      break;
    case BinaryOp::Div:
      if (need_a) ga = g.div(bb);
      if (need_b) gb = g.mul(out).div(bb).neg();
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      Tensor ma = out.eq(ab).to_dtype(out.dtype());
      Tensor mb = out.eq(bb).to_dtype(out.dtype());
      if (need_a) ga = g.mul(ma).div(mb.affine(1.0, 1.0));
      if (need_b) gb = g.mul(mb).div(ma.affine(1.0, 1.0));
      break;
    }
    case BinaryOp::Pow:
      // out = a^b: d/da = b a^(b-1), d/db = out ln(a)
      if (need_a) ga = g.mul(bb).mul(ab.pow(bb.affine(1.0, -1.0)));
      if (need_b) gb = g.mul(out).mul(ab.log());
      break;
  }
  if (need_a && ga.defined()) gi[0] = autograd::sum_to_shape(ga, a.shape());
  if (need_b && gb.defined()) gi[1] = autograd::sum_to_shape(gb, b.shape());
}

Tensor record_binary(Tensor out, const Tensor& a, const Tensor& b, BinaryOp op) {
  return autograd::record(
      std::move(out), binary_op_name(op), CANDLE_BACKWARD(op) { binary_grad(op, in, out, g, gi); }, a, b);
}

void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  ops::check_same_device(a, b, op);
  ops::check_same_dtype(a, b, op);
}

Tensor binary_same_shape(const Tensor& a, const Tensor& b, BinaryOp op) {
  const char* name = binary_op_name(op);
  check_pair(a, b, name);
  ops::check_same_shape(a, b, name);
  if (op == BinaryOp::Pow) ops::check_float(a, name);
  return record_binary(ops::make_result(a.storage()->binary(op, a.layout(), *b.storage(), b.layout()),
                                        a.shape(), a.dtype(), a.device()),
                       a, b, op);
}

Tensor binary_broadcast(const Tensor& a, const Tensor& b, BinaryOp op) {
  std::string name = std::string("broadcast_") + binary_op_name(op);
  check_pair(a, b, name.c_str());
  if (op == BinaryOp::Pow) ops::check_float(a, name.c_str());
  Shape shape = a.shape().broadcast_shape_binary_op(b.shape(), name.c_str());
  Layout al = a.layout().broadcast_as(shape);
  Layout bl = b.layout().broadcast_as(shape);
  return record_binary(
      ops::make_result(a.storage()->binary(op, al, *b.storage(), bl), shape, a.dtype(), a.device()), a, b,
      op);
}

Tensor cmp_layouts(const Tensor& a, const Layout& al, const Tensor& b, const Layout& bl, CmpOp op) {
  return ops::make_result(a.storage()->cmp(op, al, *b.storage(), bl), al.shape(), DType::U8, a.device());
}

Tensor cmp_broadcast(const Tensor& a, const Tensor& b, CmpOp op) {
  std::string name = std::string("broadcast_") + cmp_op_name(op);
  check_pair(a, b, name.c_str());
  Shape shape = a.shape().broadcast_shape_binary_op(b.shape(), name.c_str());
  return cmp_layouts(a, a.layout().broadcast_as(shape), b, b.layout().broadcast_as(shape), op);
}

// A one-element tensor holding `s` in t's dtype, viewed with t's shape (all strides 0).
Tensor scalar_as(const Tensor& t, const Scalar& s) {
  Tensor one = Tensor::full(s, Shape{}, t.dtype(), t.device());
  return Tensor::from_storage(one.storage(), Layout::contiguous(Shape{}).broadcast_as(t.shape()), t.dtype(),
                              t.device());
}

Tensor cmp_scalar(const Tensor& a, const Scalar& s, CmpOp op) {
  Tensor b = scalar_as(a, s);
  return cmp_layouts(a, a.layout(), b, b.layout(), op);
}

Tensor binary_scalar(const Tensor& a, const Scalar& s, BinaryOp op) {
  Tensor b = scalar_as(a, s);
  // b is an untracked constant: the node gets a gradient for a only
  return record_binary(ops::make_result(a.storage()->binary(op, a.layout(), *b.storage(), b.layout()),
                                        a.shape(), a.dtype(), a.device()),
                       a, b, op);
}

}  // namespace

// ---- unary ------------------------------------------------------------------------------------
Tensor Tensor::recip() const { return unary(*this, UnaryOp::Recip); }
Tensor Tensor::neg() const { return unary(*this, UnaryOp::Neg); }
Tensor Tensor::exp() const { return unary(*this, UnaryOp::Exp); }
Tensor Tensor::log() const { return unary(*this, UnaryOp::Log); }
Tensor Tensor::sin() const { return unary(*this, UnaryOp::Sin); }
Tensor Tensor::cos() const { return unary(*this, UnaryOp::Cos); }
Tensor Tensor::tanh() const { return unary(*this, UnaryOp::Tanh); }
Tensor Tensor::abs() const { return unary(*this, UnaryOp::Abs); }
Tensor Tensor::sqr() const { return unary(*this, UnaryOp::Sqr); }
Tensor Tensor::sqrt() const { return unary(*this, UnaryOp::Sqrt); }
Tensor Tensor::gelu() const { return unary(*this, UnaryOp::Gelu); }
Tensor Tensor::gelu_erf() const { return unary(*this, UnaryOp::GeluErf); }
Tensor Tensor::erf() const { return unary(*this, UnaryOp::Erf); }
Tensor Tensor::relu() const { return unary(*this, UnaryOp::Relu); }
Tensor Tensor::silu() const { return unary(*this, UnaryOp::Silu); }
Tensor Tensor::sigmoid() const { return unary(*this, UnaryOp::Sigmoid); }
Tensor Tensor::ceil() const { return unary(*this, UnaryOp::Ceil); }
Tensor Tensor::floor() const { return unary(*this, UnaryOp::Floor); }
Tensor Tensor::round() const { return unary(*this, UnaryOp::Round); }
Tensor Tensor::sign() const { return unary(*this, UnaryOp::Sign); }

Tensor Tensor::affine(double mul, double add) const {
  return autograd::record(
      ops::make_result(storage()->affine(layout(), mul, add), shape(), dtype(), device()), "affine",
      CANDLE_BACKWARD(mul) { gi[0] = g.affine(mul, 0.0); }, *this);
}

// As candle: 1 for x > 0, alpha exp(x) for x <= 0.
Tensor Tensor::elu(double alpha) const {
  ops::check_float(*this, "elu");
  return autograd::record(
      ops::make_result(storage()->elu(layout(), alpha), shape(), dtype(), device()), "elu",
      CANDLE_BACKWARD(alpha) {
        const Tensor& x = in[0];
        Tensor pos = x.gt(Scalar(0.0)).to_dtype(x.dtype());
        Tensor neg = x.le(Scalar(0.0)).to_dtype(x.dtype()).mul(x.exp()).affine(alpha, 0.0);
        gi[0] = g.mul(pos.add(neg));
      },
      *this);
}

Tensor Tensor::powf(double e) const {
  ops::check_float(*this, "powf");
  return autograd::record(
      ops::make_result(storage()->powf(layout(), e), shape(), dtype(), device()), "powf",
      CANDLE_BACKWARD(e) { gi[0] = g.mul(in[0].powf(e - 1.0)).affine(e, 0.0); }, *this);
}

Tensor Tensor::clamp(const Scalar& min, const Scalar& max) const { return maximum(min).minimum(max); }

Tensor Tensor::clamp(const Tensor& min, const Tensor& max) const {
  return broadcast_maximum(min).broadcast_minimum(max);
}

Tensor Tensor::round_to(int32_t decimals) const {
  if (dtype_is_int(dtype())) {
    if (decimals >= 0) return *this;
    // candle scales by 10^d converted to the integer type (0 for d < 0), zeroing everything;
    // we round through f64 (exact below 2^53).
    return to_dtype(DType::F64).round_to(decimals).to_dtype(dtype());
  }
  // (x * 10^d).round() / 10^d, with a true division (candle multiplies by 1 / 10^d, which
  // can miss the nearest float) and the d < 0 scale applied as a division by 10^-d.
  if (decimals >= 0) {
    double m = std::pow(10.0, decimals);
    return affine(m, 0.0).round().broadcast_div(scalar_as(*this, Scalar(m)));
  }
  double m = std::pow(10.0, -decimals);
  return broadcast_div(scalar_as(*this, Scalar(m))).round().affine(m, 0.0);
}

// ---- binary -----------------------------------------------------------------------------------
Tensor Tensor::add(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Add); }
Tensor Tensor::sub(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Sub); }
Tensor Tensor::mul(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Mul); }
Tensor Tensor::div(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Div); }
Tensor Tensor::maximum(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Maximum); }
Tensor Tensor::minimum(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Minimum); }
Tensor Tensor::pow(const Tensor& rhs) const { return binary_same_shape(*this, rhs, BinaryOp::Pow); }
Tensor Tensor::broadcast_add(const Tensor& rhs) const { return binary_broadcast(*this, rhs, BinaryOp::Add); }
Tensor Tensor::broadcast_sub(const Tensor& rhs) const { return binary_broadcast(*this, rhs, BinaryOp::Sub); }
Tensor Tensor::broadcast_mul(const Tensor& rhs) const { return binary_broadcast(*this, rhs, BinaryOp::Mul); }
Tensor Tensor::broadcast_div(const Tensor& rhs) const { return binary_broadcast(*this, rhs, BinaryOp::Div); }
Tensor Tensor::broadcast_maximum(const Tensor& rhs) const {
  return binary_broadcast(*this, rhs, BinaryOp::Maximum);
}
Tensor Tensor::broadcast_minimum(const Tensor& rhs) const {
  return binary_broadcast(*this, rhs, BinaryOp::Minimum);
}
Tensor Tensor::broadcast_pow(const Tensor& rhs) const { return binary_broadcast(*this, rhs, BinaryOp::Pow); }
Tensor Tensor::maximum(const Scalar& rhs) const { return binary_scalar(*this, rhs, BinaryOp::Maximum); }
Tensor Tensor::minimum(const Scalar& rhs) const { return binary_scalar(*this, rhs, BinaryOp::Minimum); }

// ---- comparisons ------------------------------------------------------------------------------
Tensor Tensor::cmp(CmpOp op, const Tensor& rhs) const {
  const char* name = cmp_op_name(op);
  check_pair(*this, rhs, name);
  ops::check_same_shape(*this, rhs, name);
  return cmp_layouts(*this, layout(), rhs, rhs.layout(), op);
}
Tensor Tensor::eq(const Tensor& rhs) const { return cmp(CmpOp::Eq, rhs); }
Tensor Tensor::ne(const Tensor& rhs) const { return cmp(CmpOp::Ne, rhs); }
Tensor Tensor::lt(const Tensor& rhs) const { return cmp(CmpOp::Lt, rhs); }
Tensor Tensor::le(const Tensor& rhs) const { return cmp(CmpOp::Le, rhs); }
Tensor Tensor::gt(const Tensor& rhs) const { return cmp(CmpOp::Gt, rhs); }
Tensor Tensor::ge(const Tensor& rhs) const { return cmp(CmpOp::Ge, rhs); }
Tensor Tensor::eq(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Eq); }
Tensor Tensor::ne(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Ne); }
Tensor Tensor::lt(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Lt); }
Tensor Tensor::le(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Le); }
Tensor Tensor::gt(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Gt); }
Tensor Tensor::ge(const Scalar& rhs) const { return cmp_scalar(*this, rhs, CmpOp::Ge); }
Tensor Tensor::broadcast_eq(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Eq); }
Tensor Tensor::broadcast_ne(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Ne); }
Tensor Tensor::broadcast_lt(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Lt); }
Tensor Tensor::broadcast_le(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Le); }
Tensor Tensor::broadcast_gt(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Gt); }
Tensor Tensor::broadcast_ge(const Tensor& rhs) const { return cmp_broadcast(*this, rhs, CmpOp::Ge); }

// candle needs three equal shapes; here the three operands broadcast to their common shape
// (a [1, T] mask with [B, T] values, a scalar fill, ...).
Tensor Tensor::where_cond(const Tensor& on_true, const Tensor& on_false) const {
  const char* name = "where_cond";
  if (!dtype_is_int(dtype())) {
    throw Error(ErrorKind::DTypeMismatch,
                "unexpected dtype in where_cond: the condition must be an integer dtype, got " +
                    std::string(dtype_name(dtype())));
  }
  ops::check_same_device(*this, on_true, name);
  ops::check_same_device(*this, on_false, name);
  ops::check_same_dtype(on_true, on_false, name);
  Shape shape = this->shape();
  if (on_true.shape() != shape || on_false.shape() != shape) {
    shape = shape.broadcast_shape_binary_op(on_true.shape(), name)
                .broadcast_shape_binary_op(on_false.shape(), name);
  }
  Layout cl = layout().broadcast_as(shape);
  Layout tl = on_true.layout().broadcast_as(shape);
  Layout fl = on_false.layout().broadcast_as(shape);
  return autograd::record(
      ops::make_result(storage()->where_cond(cl, *on_true.storage(), tl, *on_false.storage(), fl), shape,
                       on_true.dtype(), device()),
      "where_cond",
      CANDLE_BACKWARD() {
        const Tensor& c = in[0];
        Tensor zeros = autograd::zeros_of(g);
        if (in[1].track_op()) gi[1] = autograd::sum_to_shape(c.where_cond(g, zeros), in[1].shape());
        if (in[2].track_op()) gi[2] = autograd::sum_to_shape(c.where_cond(zeros, g), in[2].shape());
      },
      *this, on_true, on_false);
}

// ---- operators --------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, double b) { return a.affine(1.0, b); }
Tensor operator-(const Tensor& a, double b) { return a.affine(1.0, -b); }
Tensor operator*(const Tensor& a, double b) { return a.affine(b, 0.0); }
Tensor operator/(const Tensor& a, double b) { return a.affine(1.0 / b, 0.0); }
Tensor operator+(double a, const Tensor& b) { return b.affine(1.0, a); }
Tensor operator-(double a, const Tensor& b) { return b.affine(-1.0, a); }
Tensor operator*(double a, const Tensor& b) { return b.affine(a, 0.0); }
Tensor operator/(double a, const Tensor& b) { return b.recip().affine(a, 0.0); }
Tensor operator-(const Tensor& a) { return a.neg(); }

}  // namespace candle
