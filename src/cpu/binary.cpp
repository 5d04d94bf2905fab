// CPU binary op family: binary (add, sub, mul, div, maximum, minimum, pow), cmp, where_cond.
//
// Operands arrive as same-shape layouts (broadcasting is a stride-0 layout). The walk of
// cpu/ew_iter.h turns the common cases into runs with operand strides 1/1 (contiguous),
// 1/0 (rhs broadcast along rows, a scalar rhs) or 0/1, each a vectorizable loop.
// Must precede the includes: see CANDLE_EW_KERNEL in cpu/ew_iter.h.
#if !defined(__clang__)  // (clang: no such pragma; the fuzz build does not need it)
#pragma GCC optimize("fp-contract=off", "no-trapping-math", "no-math-errno")
#endif

#include <cmath>
#include <string>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "cpu/ew_iter.h"
#include "cpu/unary_ops.h"

namespace candle {
namespace {

using cpu::ew::Walk;

template <BinaryOp OP>
struct BinaryFn {
  template <typename C>
  CANDLE_VM_INLINE C operator()(C a, C b) const {
    if constexpr (OP == BinaryOp::Add) {
      if constexpr (std::is_integral_v<C>)
        return cpu::ops::wrap_add(a, b);
      else
        return a + b;
    } else if constexpr (OP == BinaryOp::Sub) {
      if constexpr (std::is_integral_v<C>)
        return cpu::ops::wrap_sub(a, b);
      else
        return a - b;
    } else if constexpr (OP == BinaryOp::Mul) {
      if constexpr (std::is_integral_v<C>)
        return cpu::ops::wrap_mul(a, b);
      else
        return a * b;
    } else if constexpr (OP == BinaryOp::Div) {
      if constexpr (std::is_integral_v<C>) {
        // Integer division by zero would trap (candle panics); it gives 0 here. MIN / -1
        // (which also traps on x86) wraps to MIN.
        if (b == 0) return C(0);
        if constexpr (std::is_signed_v<C>) {
          if (b == C(-1)) return cpu::ops::wrap_sub(C(0), a);
        }
        return static_cast<C>(a / b);
      } else {
        return a / b;
      }
    } else if constexpr (OP == BinaryOp::Maximum) {
      if constexpr (std::is_integral_v<C>)
        return a < b ? b : a;
      else
        return (a > b || a != a) ? a : b;  // NaN in either operand gives NaN
    } else if constexpr (OP == BinaryOp::Minimum) {
      if constexpr (std::is_integral_v<C>)
        return b < a ? b : a;
      else
        return (a < b || a != a) ? a : b;
    } else {
      static_assert(OP == BinaryOp::Pow);
      // candle computes exp(rhs * log(lhs)), which is NaN for every negative base (even
      // (-2)^2); std::pow gives the real result where one exists.
      return std::pow(a, b);
    }
  }
};

template <CmpOp OP>
struct CmpFn {
  template <typename C>
  CANDLE_VM_INLINE uint8_t operator()(C a, C b) const {
    if constexpr (OP == CmpOp::Eq)
      return a == b;
    else if constexpr (OP == CmpOp::Ne)
      return a != b;
    else if constexpr (OP == CmpOp::Lt)
      return a < b;
    else if constexpr (OP == CmpOp::Le)
      return a <= b;
    else if constexpr (OP == CmpOp::Gt)
      return a > b;
    else
      return a >= b;
  }
};

template <typename Fn>
decltype(auto) with_binary_op(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::Add: return fn.template operator()<BinaryOp::Add>();
    case BinaryOp::Sub: return fn.template operator()<BinaryOp::Sub>();
    case BinaryOp::Mul: return fn.template operator()<BinaryOp::Mul>();
    case BinaryOp::Div: return fn.template operator()<BinaryOp::Div>();
    case BinaryOp::Maximum: return fn.template operator()<BinaryOp::Maximum>();
    case BinaryOp::Minimum: return fn.template operator()<BinaryOp::Minimum>();
    case BinaryOp::Pow: return fn.template operator()<BinaryOp::Pow>();
  }
  throw Error(ErrorKind::Internal, "invalid binary op");
}

template <typename Fn>
decltype(auto) with_cmp_op(CmpOp op, Fn&& fn) {
  switch (op) {
    case CmpOp::Eq: return fn.template operator()<CmpOp::Eq>();
    case CmpOp::Ne: return fn.template operator()<CmpOp::Ne>();
    case CmpOp::Lt: return fn.template operator()<CmpOp::Lt>();
    case CmpOp::Le: return fn.template operator()<CmpOp::Le>();
    case CmpOp::Gt: return fn.template operator()<CmpOp::Gt>();
    case CmpOp::Ge: return fn.template operator()<CmpOp::Ge>();
  }
  throw Error(ErrorKind::Internal, "invalid cmp op");
}

// y[i] = f(a[i * as], b[i * bs]) for i < n, with the stride patterns of contiguous and
// broadcast operands as their own (vectorizable) loops.
template <typename C, typename R, typename F>
CANDLE_EW_KERNEL void zip_row(F f, const C* a, size_t as, const C* b, size_t bs, R* __restrict y, size_t n) {
  if (as == 1 && bs == 1) {
    for (size_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (as == 1 && bs == 0) {
    const C bv = *b;
    for (size_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else if (as == 0 && bs == 1) {
    const C av = *a;
    for (size_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = f(a[i * as], b[i * bs]);
  }
}

template <typename I, typename V>
CANDLE_EW_KERNEL void select_row(const I* c, size_t cs, const V* t, size_t ts, const V* f, size_t fs,
                                 V* __restrict y, size_t n) {
  if (cs == 1 && ts == 1 && fs == 1) {
    for (size_t i = 0; i < n; ++i) y[i] = c[i] != 0 ? t[i] : f[i];
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = c[i * cs] != 0 ? t[i * ts] : f[i * fs];
  }
}

const CpuStorage& as_cpu(const BackendStorage& s, const char* op) {
  auto* c = dynamic_cast<const CpuStorage*>(&s);
  if (!c)
    throw Error(ErrorKind::DeviceMismatch,
                std::string("device mismatch in ") + op + ": operand is not on the cpu");
  return *c;
}

void check_operands(const CpuStorage& lhs, const Layout& ll, const CpuStorage& rhs, const Layout& rl,
                    const char* op) {
  if (lhs.dtype() != rhs.dtype()) {
    throw Error(ErrorKind::DTypeMismatch, std::string("dtype mismatch in ") + op +
                                              ", lhs: " + std::string(dtype_name(lhs.dtype())) +
                                              ", rhs: " + std::string(dtype_name(rhs.dtype())));
  }
  if (ll.shape() != rl.shape()) {
    throw Error(ErrorKind::ShapeMismatch, std::string("shape mismatch in ") + op + ", lhs: " +
                                              ll.shape().to_string() + ", rhs: " + rl.shape().to_string());
  }
  for (auto [s, l] : {std::pair{&lhs, &ll}, std::pair{&rhs, &rl}}) {
    if (l->elem_count() && l->max_offset_exclusive() > s->elem_count()) {
      throw Error(ErrorKind::Internal, std::string("cpu ") + op + ": layout reaches past the storage");
    }
  }
}

// out[i] = f(lhs[i], rhs[i]) over the common shape; R is the output element type (T, or u8
// for comparisons). Half-like inputs are converted to f32 in chunks.
template <typename T, typename R, typename F>
void zip(const T* a, const Layout& al, const T* b, const Layout& bl, R* y, F f) {
  size_t n = al.elem_count();
  Walk<2> w = cpu::ew::make_walk<2>(al.shape(), {&al, &bl});
  size_t as = w.inner_stride[0], bs = w.inner_stride[1];
  cpu::ew::for_each_run(w, n, [&](const std::array<size_t, 2>& o, size_t di, size_t len) {
    if constexpr (is_half_like_v<T>) {
      constexpr size_t kChunk = 256;
      float ab[kChunk], bb[kChunk];
      for (size_t c = 0; c < len; c += kChunk) {
        size_t m = std::min(kChunk, len - c);
        const T* ap = a + o[0] + c * as;
        const T* bp = b + o[1] + c * bs;
        for (size_t i = 0; i < m; ++i) ab[i] = static_cast<float>(ap[i * as]);
        for (size_t i = 0; i < m; ++i) bb[i] = static_cast<float>(bp[i * bs]);
        if constexpr (std::is_same_v<R, T>) {
          float yb[kChunk];
          zip_row<float>(f, ab, 1, bb, 1, yb, m);
          for (size_t i = 0; i < m; ++i) y[di + c + i] = T(yb[i]);
        } else {
          zip_row<float>(f, ab, 1, bb, 1, y + di + c, m);
        }
      }
    } else {
      zip_row<T>(f, a + o[0], as, b + o[1], bs, y + di, len);
    }
  });
}

template <size_t N>
struct UIntOfSize;
template <>
struct UIntOfSize<1> {
  using type = uint8_t;
};
template <>
struct UIntOfSize<2> {
  using type = uint16_t;
};
template <>
struct UIntOfSize<4> {
  using type = uint32_t;
};
template <>
struct UIntOfSize<8> {
  using type = uint64_t;
};

}  // namespace

StoragePtr CpuStorage::binary(BinaryOp op, const Layout& lhs_l, const BackendStorage& rhs_base,
                              const Layout& rhs_l) const {
  const char* name = binary_op_name(op);
  const CpuStorage& rhs = as_cpu(rhs_base, name);
  check_operands(*this, lhs_l, rhs, rhs_l, name);
  if (op == BinaryOp::Pow && dtype_is_int(dtype_)) {
    throw Error(ErrorKind::UnsupportedOp,
                "unsupported dtype " + std::string(dtype_name(dtype_)) + " for op pow");
  }
  auto out = CpuStorage::alloc(dtype_, lhs_l.elem_count());
  with_binary_op(op, [&]<BinaryOp OP>() {
    dispatch(dtype_, [&]<typename T>() {
      if constexpr (!(OP == BinaryOp::Pow && std::is_integral_v<T>)) {
        zip(data<T>(), lhs_l, rhs.template data<T>(), rhs_l, out->template data<T>(), BinaryFn<OP>{});
      }
    });
  });
  return out;
}

StoragePtr CpuStorage::cmp(CmpOp op, const Layout& lhs_l, const BackendStorage& rhs_base,
                           const Layout& rhs_l) const {
  const char* name = cmp_op_name(op);
  const CpuStorage& rhs = as_cpu(rhs_base, name);
  check_operands(*this, lhs_l, rhs, rhs_l, name);
  auto out = CpuStorage::alloc(DType::U8, lhs_l.elem_count());
  with_cmp_op(op, [&]<CmpOp OP>() {
    dispatch(dtype_, [&]<typename T>() {
      zip(data<T>(), lhs_l, rhs.template data<T>(), rhs_l, out->template data<uint8_t>(), CmpFn<OP>{});
    });
  });
  return out;
}

StoragePtr CpuStorage::where_cond(const Layout& cond_l, const BackendStorage& on_true_base, const Layout& t_l,
                                  const BackendStorage& on_false_base, const Layout& f_l) const {
  const CpuStorage& on_true = as_cpu(on_true_base, "where_cond");
  const CpuStorage& on_false = as_cpu(on_false_base, "where_cond");
  if (!dtype_is_int(dtype_)) {
    throw Error(ErrorKind::DTypeMismatch,
                "unexpected dtype in where_cond: the condition must be an integer dtype, got " +
                    std::string(dtype_name(dtype_)));
  }
  check_operands(on_true, t_l, on_false, f_l, "where_cond");
  if (cond_l.shape() != t_l.shape()) {
    throw Error(ErrorKind::ShapeMismatch,
                "shape mismatch in where_cond, cond: " + cond_l.shape().to_string() +
                    ", on_true: " + t_l.shape().to_string());
  }
  if (cond_l.elem_count() && cond_l.max_offset_exclusive() > n_) {
    throw Error(ErrorKind::Internal, "cpu where_cond: layout reaches past the storage");
  }
  size_t n = cond_l.elem_count();
  DType vt = on_true.dtype();
  auto out = CpuStorage::alloc(vt, n);
  Walk<3> w = cpu::ew::make_walk<3>(cond_l.shape(), {&cond_l, &t_l, &f_l});
  dispatch(dtype_, [&]<typename I>() {
    if constexpr (std::is_integral_v<I>) {
      dispatch(vt, [&]<typename T>() {
        // a select copies bits: any dtype goes as the unsigned integer of its size
        using V = typename UIntOfSize<sizeof(T)>::type;
        const I* c = data<I>();
        const V* t = on_true.template data<V>();
        const V* f = on_false.template data<V>();
        V* y = out->template data<V>();
        cpu::ew::for_each_run(w, n, [&](const std::array<size_t, 3>& o, size_t di, size_t len) {
          select_row<I, V>(c + o[0], w.inner_stride[0], t + o[1], w.inner_stride[1], f + o[2],
                           w.inner_stride[2], y + di, len);
        });
      });
    }
  });
  return out;
}

}  // namespace candle
