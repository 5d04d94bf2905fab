// CPU unary op family: unary (neg, exp, gelu, ...), affine, powf, elu, and the fused silu_mul
// (candle::nn's SwiGLU: here so that its silu is the unary op's, compiled alike: the same bits).
//
// f32 uses the vectorizable approximations of cpu/vec_math.h, f64 the C library; f16, bf16 and
// f8e4m3 are converted to f32 in short chunks, computed by the f32 kernel and rounded back.
// Integer dtypes support neg, abs, sqr, relu, sign, ceil, floor, round and affine (wrapping
// arithmetic); the transcendental ops throw UnsupportedOp for them (candle panics there).
// Must precede the includes: see CANDLE_EW_KERNEL in cpu/ew_iter.h.
#if !defined(__clang__)  // (clang: no such pragma; the fuzz build does not need it)
#pragma GCC optimize("fp-contract=off", "no-trapping-math", "no-math-errno")
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "core/row_layout.h"
#include "cpu/ew_iter.h"
#include "cpu/parallel.h"
#include "cpu/unary_ops.h"

namespace candle {
namespace {

using cpu::ew::Walk;

// y[i] = f(x[i * xs]) for i < n.
template <typename C, typename F>
CANDLE_EW_KERNEL void map_row(F f, const C* x, size_t xs, C* __restrict y, size_t n) {
  if (xs == 1) {
    for (size_t i = 0; i < n; ++i) y[i] = f(x[i]);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = f(x[i * xs]);
  }
}

void check_bounds(const CpuStorage& s, const Layout& l, const char* op) {
  if (l.elem_count() && l.max_offset_exclusive() > s.elem_count()) {
    throw Error(ErrorKind::Internal, std::string("cpu ") + op + ": layout " + l.shape().to_string() +
                                         " reaches past the storage (" + std::to_string(s.elem_count()) +
                                         " elements)");
  }
}

// A new storage with f applied to every element of `l` (f works on compute_t<T>).
template <typename T, typename F>
StoragePtr map_unary(const CpuStorage& s, const Layout& l, F f) {
  size_t n = l.elem_count();
  auto out = CpuStorage::alloc(dtype_of<T>, n);
  const T* x = s.template data<T>();
  T* y = out->template data<T>();
  Walk<1> w = cpu::ew::make_walk<1>(l.shape(), {&l});
  size_t xs = w.inner_stride[0];
  cpu::ew::for_each_run(w, n, [&](const std::array<size_t, 1>& o, size_t di, size_t len) {
    if constexpr (is_half_like_v<T>) {
      constexpr size_t kChunk = 256;
      float xb[kChunk], yb[kChunk];
      for (size_t c = 0; c < len; c += kChunk) {
        size_t m = std::min(kChunk, len - c);
        const T* xp = x + o[0] + c * xs;
        for (size_t i = 0; i < m; ++i) xb[i] = static_cast<float>(xp[i * xs]);
        map_row<float>(f, xb, 1, yb, m);
        for (size_t i = 0; i < m; ++i) y[di + c + i] = T(yb[i]);
      }
    } else {
      map_row<T>(f, x + o[0], xs, y + di, len);
    }
  });
  return out;
}

// y[i] = silu(g[i]) * u[i], the silu rounded to T before the product (as the unary op's output is)
template <typename T>
CANDLE_EW_KERNEL void silu_mul_row(const T* g, const T* u, T* __restrict y, size_t n) {
  constexpr cpu::ops::UnaryFn<UnaryOp::Silu> silu{};
  if constexpr (is_half_like_v<T>) {
    constexpr size_t kChunk = 256;
    float gb[kChunk], ub[kChunk];
    for (size_t c = 0; c < n; c += kChunk) {
      const size_t m = std::min(kChunk, n - c);
      for (size_t i = 0; i < m; ++i) gb[i] = static_cast<float>(g[c + i]);
      for (size_t i = 0; i < m; ++i) ub[i] = static_cast<float>(u[c + i]);
      for (size_t i = 0; i < m; ++i) gb[i] = silu(gb[i]);
      for (size_t i = 0; i < m; ++i) y[c + i] = T(static_cast<float>(T(gb[i])) * ub[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = silu(g[i]) * u[i];
  }
}

[[noreturn]] void unsupported(DType dt, const char* op) {
  throw Error(ErrorKind::UnsupportedOp,
              std::string("unsupported dtype ") + std::string(dtype_name(dt)) + " for op " + op);
}

template <typename C>
struct AffineFloat {
  C mul, add;
  C operator()(C x) const { return x * mul + add; }
};

// Integer affine with integral mul/add: exact wrapping arithmetic (as candle).
template <typename C>
struct AffineIntExact {
  C mul, add;
  C operator()(C x) const { return cpu::ops::wrap_add(cpu::ops::wrap_mul(x, mul), add); }
};

// Integer affine with a fractional mul or add: candle converts mul and add to the integer
// type first (so x * 0.5 is 0 for every x); we compute in f64 and convert the result
// (truncating toward zero, saturating), which is what the caller means.
template <typename C>
struct AffineIntViaDouble {
  double mul, add;
  C operator()(C x) const { return cast_value<C>(static_cast<double>(x) * mul + add); }
};

template <typename C>
struct PowfOp {
  C e;
  C operator()(C x) const { return std::pow(x, e); }
};

// candle: x if x >= 0 else alpha (e^x - 1); expm1 keeps small negative x accurate.
template <typename C>
struct EluOp {
  C alpha;
  C operator()(C x) const {
    C em1;
    if constexpr (std::is_same_v<C, float>)
      em1 = cpu::vm::expm1_f32(x);
    else
      em1 = std::expm1(x);
    return x >= C(0) ? x : alpha * em1;
  }
};

bool is_integral_value(double v, double lo, double hi) {
  return std::isfinite(v) && std::trunc(v) == v && v >= lo && v <= hi;
}

}  // namespace

StoragePtr CpuStorage::unary(UnaryOp op, const Layout& l) const {
  if (dtype_is_int(dtype_) && !unary_op_supports_int(op)) unsupported(dtype_, unary_op_name(op));
  check_bounds(*this, l, unary_op_name(op));
  return cpu::ops::with_unary_op(op, [&]<UnaryOp OP>() -> StoragePtr {
    return dispatch(dtype_, [&]<typename T>() -> StoragePtr {
      using C = compute_t<T>;
      if constexpr (std::is_integral_v<C> && !unary_op_supports_int(OP)) {
        unsupported(dtype_, unary_op_name(op));  // unreachable: checked above
      } else {
        return map_unary<T>(*this, l, cpu::ops::UnaryFn<OP>{});
      }
    });
  });
}

StoragePtr CpuStorage::affine(const Layout& l, double mul, double add) const {
  check_bounds(*this, l, "affine");
  return dispatch(dtype_, [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    if constexpr (std::is_integral_v<C>) {
      double lo = static_cast<double>(std::numeric_limits<C>::lowest());
      double hi = static_cast<double>(std::numeric_limits<C>::max());
      if (is_integral_value(mul, lo, hi) && is_integral_value(add, lo, hi)) {
        return map_unary<T>(*this, l, AffineIntExact<C>{static_cast<C>(mul), static_cast<C>(add)});
      }
      return map_unary<T>(*this, l, AffineIntViaDouble<C>{mul, add});
    } else {
      return map_unary<T>(*this, l, AffineFloat<C>{static_cast<C>(mul), static_cast<C>(add)});
    }
  });
}

StoragePtr CpuStorage::silu_mul(const Layout& l, const BackendStorage& up, const Layout& up_l) const {
  const auto* u = dynamic_cast<const CpuStorage*>(&up);
  const bool float_type =
      dtype_ == DType::F32 || dtype_ == DType::F64 || dtype_ == DType::F16 || dtype_ == DType::BF16;
  if (!u || !float_type || u->dtype() != dtype_ || l.dims().empty() || l.dims() != up_l.dims())
    return nullptr;
  // rows read in place (a stacked gate|up projection's halves are rows 2 f apart), else compose
  const std::optional<size_t> gs = uniform_row_stride(l), us = uniform_row_stride(up_l);
  if (!gs || !us) return nullptr;
  check_bounds(*this, l, "silu_mul");
  check_bounds(*u, up_l, "silu_mul");
  const size_t dim = l.dims().back(), rows = dim ? l.elem_count() / dim : 0;
  return dispatch_float(dtype_, "silu_mul", [&]<typename T>() -> StoragePtr {
    std::shared_ptr<CpuStorage> out = CpuStorage::alloc(dtype_of<T>, rows * dim);
    const T* g = data<T>() + l.start_offset();
    const T* up_d = u->data<T>() + up_l.start_offset();
    T* y = out->template data<T>();
    cpu::parallel_for(rows, cpu::row_op_grain(dim), [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) silu_mul_row<T>(g + r * *gs, up_d + r * *us, y + r * dim, dim);
    });
    return out;
  });
}

StoragePtr CpuStorage::powf(const Layout& l, double e) const {
  check_bounds(*this, l, "powf");
  return dispatch_float(dtype_, "powf", [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    return map_unary<T>(*this, l, PowfOp<C>{static_cast<C>(e)});
  });
}

StoragePtr CpuStorage::elu(const Layout& l, double alpha) const {
  check_bounds(*this, l, "elu");
  return dispatch_float(dtype_, "elu", [&]<typename T>() -> StoragePtr {
    using C = compute_t<T>;
    return map_unary<T>(*this, l, EluOp<C>{static_cast<C>(alpha)});
  });
}

}  // namespace candle
