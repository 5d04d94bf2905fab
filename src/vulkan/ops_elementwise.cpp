// Element-wise ops: unary (+ affine, powf, elu), binary, cmp, where_cond and to_dtype.
// Floats (f32, f16) and integers (u8, u32, i64: the CPU's wrapping arithmetic, bit-identical).
#include <cmath>
#include <string>

#include "../../kernels/vulkan/op_codes.glsl"
#include "core/unary_traits.h"
#include "storage.h"

namespace candle::vk_backend {
namespace {

constexpr uint32_t kAffine = U_AFFINE, kPowf = U_POWF, kElu = U_ELU;

// The kernels switch on op_codes.glsl's numbers; the host passes candle's enum values.
template <typename E>
constexpr bool same_code(E op, int code) {
  return static_cast<int>(op) == code;
}
static_assert(same_code(UnaryOp::Neg, U_NEG) && same_code(UnaryOp::Recip, U_RECIP) &&
                  same_code(UnaryOp::Exp, U_EXP) && same_code(UnaryOp::Log, U_LOG) &&
                  same_code(UnaryOp::Sin, U_SIN) && same_code(UnaryOp::Cos, U_COS) &&
                  same_code(UnaryOp::Tanh, U_TANH) && same_code(UnaryOp::Abs, U_ABS) &&
                  same_code(UnaryOp::Sqr, U_SQR) && same_code(UnaryOp::Sqrt, U_SQRT) &&
                  same_code(UnaryOp::Gelu, U_GELU) && same_code(UnaryOp::GeluErf, U_GELU_ERF) &&
                  same_code(UnaryOp::Erf, U_ERF) && same_code(UnaryOp::Relu, U_RELU) &&
                  same_code(UnaryOp::Silu, U_SILU) && same_code(UnaryOp::Ceil, U_CEIL) &&
                  same_code(UnaryOp::Floor, U_FLOOR) && same_code(UnaryOp::Round, U_ROUND) &&
                  same_code(UnaryOp::Sign, U_SIGN) && same_code(UnaryOp::Sigmoid, U_SIGMOID) &&
                  kUnaryOpCount == U_AFFINE,
              "kernels/vulkan/op_codes.glsl's unary codes must match UnaryOp");
static_assert(same_code(BinaryOp::Add, B_ADD) && same_code(BinaryOp::Sub, B_SUB) &&
                  same_code(BinaryOp::Mul, B_MUL) && same_code(BinaryOp::Div, B_DIV) &&
                  same_code(BinaryOp::Maximum, B_MAXIMUM) && same_code(BinaryOp::Minimum, B_MINIMUM) &&
                  same_code(BinaryOp::Pow, B_POW),
              "kernels/vulkan/op_codes.glsl's binary codes must match BinaryOp");
static_assert(same_code(CmpOp::Eq, C_EQ) && same_code(CmpOp::Ne, C_NE) && same_code(CmpOp::Lt, C_LT) &&
                  same_code(CmpOp::Le, C_LE) && same_code(CmpOp::Gt, C_GT) && same_code(CmpOp::Ge, C_GE),
              "kernels/vulkan/op_codes.glsl's cmp codes must match CmpOp");

// unary.comp over (s, l) with op code `op` and parameter bits p0, p1; nullptr when there is
// no kernel for the dtype (and for integers, an op the CPU refuses or powf/elu: the
// round-trip then raises the CPU's error).
StoragePtr run_unary(const VulkanStorage& s, const Layout& l, uint32_t op, uint32_t p0, uint32_t p1) {
  const char* sfx = num_suffix(s.ctx(), s.dtype());
  if (!sfx) return nullptr;
  if (dtype_is_int(s.dtype()) && op != kAffine &&
      (op >= kAffine || !unary_op_supports_int(static_cast<UnaryOp>(op))))
    return nullptr;
  auto out = s.vdev().make(s.dtype(), l.elem_count());
  std::string k = std::string("unary_") + sfx;
  if (!run_elementwise(k.c_str(), {{&s, l}, {out.get(), Layout::contiguous(l.shape())}}, 1, op, p0, p1))
    return nullptr;
  return out;
}

// Whether v is an integer in [lo, hi].
bool integral_in(double v, double lo, double hi) {
  return std::isfinite(v) && std::trunc(v) == v && v >= lo && v <= hi;
}

}  // namespace

StoragePtr VulkanStorage::unary(UnaryOp op, const Layout& l) const {
  if (auto r = run_unary(*this, l, static_cast<uint32_t>(op), 0, 0)) return r;
  note_round_trip(unary_op_name(op));
  return BackendStorage::unary(op, l);
}

StoragePtr VulkanStorage::affine(const Layout& l, double mul, double add) const {
  if (dtype_is_int(dtype_)) {
    // The CPU's exact path (integral mul and add in the dtype's range: wrapping x * mul + add)
    // where mul and add fit 32 bits (i64: an i32); a fractional mul or add, which the CPU
    // computes in f64, has no kernel (no shaderFloat64 here).
    const bool i64 = dtype_ == DType::I64;
    const double lo = i64 ? -2147483648.0 : 0.0;
    const double hi = dtype_ == DType::U8 ? 255.0 : i64 ? 2147483647.0 : 4294967295.0;
    if (integral_in(mul, lo, hi) && integral_in(add, lo, hi)) {
      auto bits = [&](double v) {
        return i64 ? static_cast<uint32_t>(static_cast<int32_t>(v)) : static_cast<uint32_t>(v);
      };
      if (auto r = run_unary(*this, l, kAffine, bits(mul), bits(add))) return r;
    }
  } else if (auto r = run_unary(*this, l, kAffine, f32_bits(static_cast<float>(mul)),
                                f32_bits(static_cast<float>(add)))) {
    return r;
  }
  note_round_trip("affine");
  return BackendStorage::affine(l, mul, add);
}

StoragePtr VulkanStorage::powf(const Layout& l, double e) const {
  if (auto r = run_unary(*this, l, kPowf, f32_bits(static_cast<float>(e)), 0)) return r;
  note_round_trip("powf");
  return BackendStorage::powf(l, e);
}

StoragePtr VulkanStorage::elu(const Layout& l, double alpha) const {
  if (auto r = run_unary(*this, l, kElu, f32_bits(static_cast<float>(alpha)), 0)) return r;
  note_round_trip("elu");
  return BackendStorage::elu(l, alpha);
}

StoragePtr VulkanStorage::binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs_base,
                                 const Layout& rhs_l) const {
  const auto& rhs = as_vk(rhs_base, binary_op_name(op));
  // integer pow: the CPU refuses it (the round-trip raises its error)
  const bool ok = !(op == BinaryOp::Pow && dtype_is_int(dtype_));
  if (const char* sfx = num_suffix(ctx(), dtype_); sfx && ok && rhs.dtype() == dtype_) {
    auto out = vdev().make(dtype_, lhs_l.elem_count());
    std::string k = std::string("binary_") + sfx;
    if (run_elementwise(k.c_str(),
                        {{this, lhs_l}, {&rhs, rhs_l}, {out.get(), Layout::contiguous(lhs_l.shape())}}, 2,
                        static_cast<uint32_t>(op)))
      return out;
  }
  note_round_trip(binary_op_name(op));
  return BackendStorage::binary(op, lhs_l, rhs_base, rhs_l);
}

StoragePtr VulkanStorage::cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs_base,
                              const Layout& rhs_l) const {
  const auto& rhs = as_vk(rhs_base, cmp_op_name(op));
  if (const char* sfx = num_suffix(ctx(), dtype_); sfx && rhs.dtype() == dtype_ && ctx().features().int8) {
    auto out = vdev().make(DType::U8, lhs_l.elem_count());
    std::string k = std::string("cmp_") + sfx;
    if (run_elementwise(k.c_str(),
                        {{this, lhs_l}, {&rhs, rhs_l}, {out.get(), Layout::contiguous(lhs_l.shape())}}, 2,
                        static_cast<uint32_t>(op)))
      return out;
  }
  note_round_trip(cmp_op_name(op));
  return BackendStorage::cmp(op, lhs_l, rhs_base, rhs_l);
}

StoragePtr VulkanStorage::where_cond(const Layout& cond_l, const BackendStorage& t_base, const Layout& t_l,
                                     const BackendStorage& f_base, const Layout& f_l) const {
  const auto& t = as_vk(t_base, "where_cond");
  const auto& f = as_vk(f_base, "where_cond");
  const char* csfx = dtype_ == DType::U8 && ctx().features().int8 ? "u8"
                     : dtype_ == DType::U32                       ? "u32"
                                                                  : nullptr;
  const char* vsfx = bytes_suffix(ctx(), t.dtype());
  if (csfx && vsfx && t.dtype() == f.dtype()) {
    auto out = vdev().make(t.dtype(), cond_l.elem_count());
    std::string k = std::string("where_") + csfx + "_" + vsfx;
    if (run_elementwise(
            k.c_str(),
            {{this, cond_l}, {&t, t_l}, {&f, f_l}, {out.get(), Layout::contiguous(cond_l.shape())}}, 3, 0))
      return out;
  }
  note_round_trip("where_cond");
  return BackendStorage::where_cond(cond_l, t_base, t_l, f_base, f_l);
}

namespace {
const char* cast_name(const Context& ctx, DType dt) {
  const auto& f = ctx.features();
  switch (dt) {
    case DType::F32: return "f32";
    case DType::F16: return f.f16 ? "f16" : nullptr;
    case DType::BF16: return f.int16 ? "bf16" : nullptr;
    case DType::U8: return f.int8 ? "u8" : nullptr;
    case DType::U32: return "u32";
    case DType::I64: return f.int64 ? "i64" : nullptr;
    default: return nullptr;
  }
}
}  // namespace

StoragePtr VulkanStorage::to_dtype(const Layout& l, DType dtype) const {
  const char* s = cast_name(ctx(), dtype_);
  const char* d = cast_name(ctx(), dtype);
  // cast.comp has every pair of these dtypes
  if (s && d && dtype != dtype_) {
    auto out = vdev().make(dtype, l.elem_count());
    std::string k = std::string("cast_") + s + "_" + d;
    if (run_elementwise(k.c_str(), {{this, l}, {out.get(), Layout::contiguous(l.shape())}}, 1, 0)) return out;
  }
  note_round_trip("to_dtype");
  return BackendStorage::to_dtype(l, dtype);
}

}  // namespace candle::vk_backend
