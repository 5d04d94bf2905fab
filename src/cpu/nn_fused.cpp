// candle::nn's fused last-dim ops on the CPU (the BackendStorage hooks softmax_last_dim,
// rms_norm, layer_norm and rope): one pass per row, f16/bf16 computed in f32. Operands come in
// the dtype of `this` (candle::nn casts them); a strided operand is copied dense first, as the
// kernels index rows directly.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "core/row_layout.h"
#include "cpu/clones.h"
#include "cpu/parallel.h"
#include "cpu/vec_math.h"

namespace candle {
namespace {

// The elements of layout l of s, contiguous: s's own data when l is contiguous (`keep` stays
// empty), else a dense copy held by `keep`.
template <typename T>
const T* dense(const CpuStorage& s, const Layout& l, std::shared_ptr<CpuStorage>& keep) {
  if (l.is_contiguous()) return s.data<T>() + l.start_offset();
  keep = CpuStorage::alloc(s.dtype(), l.elem_count());
  s.copy_strided_src(*keep, 0, l);
  return keep->data<T>();
}

const CpuStorage& as_cpu(const BackendStorage& s, const char* op) {
  auto* c = dynamic_cast<const CpuStorage*>(&s);
  if (!c) throw Error(ErrorKind::DeviceMismatch, std::string(op) + ": an operand is not on the CPU");
  return *c;
}

// Whether every operand has x's dtype (the hook's contract; otherwise: no kernel, compose).
bool same_dtype(DType dt, std::initializer_list<const BackendStorage*> others) {
  for (const BackendStorage* o : others)
    if (o->dtype() != dt) return false;
  return true;
}

template <typename C>
C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>)
    return cpu::vm::exp_f32(x);
  else
    return std::exp(x);
}

// Sum with 8 independent accumulators (vectorizable; the order depends only on n).
template <typename C>
CANDLE_TARGET_CLONES C row_sum(const C* x, size_t n) {
  C acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[j] += x[i + j];
  C s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += x[i];
  return s;
}

// Sum of (x - c)^2, 8 accumulators.
template <typename C>
CANDLE_TARGET_CLONES C row_sum_sq_dev(const C* x, size_t n, C c) {
  C acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) {
      C d = x[i + j] - c;
      acc[j] += d * d;
    }
  C s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) {
    C d = x[i] - c;
    s += d * d;
  }
  return s;
}

// Loads a row into the compute type (a copy for the small floats, the row itself otherwise).
template <typename T, typename C>
const C* load_row(const T* src, size_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return src;
  } else {
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<C>(src[i]);
    return buf.data();
  }
}

template <typename T, typename C>
void store_row(const C* src, size_t n, T* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = cast_value<T>(src[i]);
}

template <typename T>
StoragePtr softmax_impl(const T* src, const Shape& shape) {
  using C = compute_t<T>;
  size_t dim = shape.dims().back();
  size_t rows = dim ? shape.elem_count() / dim : 0;
  std::shared_ptr<CpuStorage> out = CpuStorage::alloc(dtype_of<T>, shape.elem_count());
  T* dst = out->data<T>();
  cpu::parallel_for(rows, cpu::row_op_grain(dim), [&](size_t r0, size_t r1) {
    std::vector<C> in_buf(dim), out_buf(dim);
    for (size_t r = r0; r < r1; ++r) {
      const C* xr = load_row<T, C>(src + r * dim, dim, in_buf);
      C* yr = std::is_same_v<T, C> ? reinterpret_cast<C*>(dst + r * dim) : out_buf.data();
      C m = xr[0];
      for (size_t i = 1; i < dim; ++i) m = xr[i] > m ? xr[i] : m;
      for (size_t i = 0; i < dim; ++i) yr[i] = exp_c<C>(xr[i] - m);
      C s = row_sum<C>(yr, dim);
      for (size_t i = 0; i < dim; ++i) yr[i] = yr[i] / s;
      if constexpr (!std::is_same_v<T, C>) store_row<T, C>(yr, dim, dst + r * dim);
    }
  });
  return out;
}

// One row of rms_norm (b == nullptr, no mean) or layer_norm: yr from xr, both dim long.
template <typename C>
void norm_row(const C* xr, C* yr, size_t dim, const C* a, const C* b, C n, C e, bool remove_mean) {
  C mean = remove_mean ? row_sum<C>(xr, dim) / n : C(0);
  C var = row_sum_sq_dev<C>(xr, dim, mean) / n;
  C denom = std::sqrt(var + e);
  if (b) {
    for (size_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) / denom * a[i] + b[i];
  } else {
    for (size_t i = 0; i < dim; ++i) yr[i] = xr[i] / denom * a[i];
  }
}

// Shared body of rms_norm (bp == nullptr, no mean) and layer_norm.
template <typename T>
StoragePtr norm_impl(const T* src, const Shape& shape, const T* ap, const T* bp, float eps,
                     bool remove_mean) {
  using C = compute_t<T>;
  size_t dim = shape.dims().back();
  size_t rows = dim ? shape.elem_count() / dim : 0;
  std::vector<C> a(dim), b(dim, C(0));
  for (size_t i = 0; i < dim; ++i) a[i] = static_cast<C>(ap[i]);
  if (bp)
    for (size_t i = 0; i < dim; ++i) b[i] = static_cast<C>(bp[i]);
  std::shared_ptr<CpuStorage> out = CpuStorage::alloc(dtype_of<T>, shape.elem_count());
  T* dst = out->data<T>();
  C n = static_cast<C>(dim);
  C e = static_cast<C>(eps);
  cpu::parallel_for(rows, cpu::row_op_grain(dim), [&](size_t r0, size_t r1) {
    std::vector<C> in_buf(dim), out_buf(dim);
    for (size_t r = r0; r < r1; ++r) {
      const C* xr = load_row<T, C>(src + r * dim, dim, in_buf);
      C* yr = std::is_same_v<T, C> ? reinterpret_cast<C*>(dst + r * dim) : out_buf.data();
      norm_row<C>(xr, yr, dim, a.data(), bp ? b.data() : nullptr, n, e, remove_mean);
      if constexpr (!std::is_same_v<T, C>) store_row<T, C>(yr, dim, dst + r * dim);
    }
  });
  return out;
}

// {s = x + h, rms_norm(s)} as [2, rows, dim]: s rounded to T as the add rounds it, then norm_impl's
// row (the same bits as the composed ops). Rows of x and h are xs / hs elements apart.
template <typename T>
StoragePtr add_rms_norm_impl(const T* x, size_t xs, const T* h, size_t hs, size_t rows, size_t dim,
                             const T* ap, float eps) {
  using C = compute_t<T>;
  std::vector<C> a(dim);
  for (size_t i = 0; i < dim; ++i) a[i] = static_cast<C>(ap[i]);
  std::shared_ptr<CpuStorage> out = CpuStorage::alloc(dtype_of<T>, 2 * rows * dim);
  T* sum = out->data<T>();
  T* normed = sum + rows * dim;
  const C n = static_cast<C>(dim), e = static_cast<C>(eps);
  cpu::parallel_for(rows, cpu::row_op_grain(dim), [&](size_t r0, size_t r1) {
    std::vector<C> in_buf(dim), out_buf(dim);
    for (size_t r = r0; r < r1; ++r) {
      const T* xr = x + r * xs;
      const T* hr = h + r * hs;
      T* sr = sum + r * dim;
      for (size_t i = 0; i < dim; ++i) sr[i] = cast_value<T>(static_cast<C>(xr[i]) + static_cast<C>(hr[i]));
      const C* s = load_row<T, C>(sr, dim, in_buf);
      C* yr = std::is_same_v<T, C> ? reinterpret_cast<C*>(normed + r * dim) : out_buf.data();
      norm_row<C>(s, yr, dim, a.data(), nullptr, n, e, false);
      if constexpr (!std::is_same_v<T, C>) store_row<T, C>(yr, dim, normed + r * dim);
    }
  });
  return out;
}

// x [b, h, t, d] ([b, t, h, d] for HalvesThd); cos/sin [t_max, d/2] or [b, t_max, d/2].
template <typename T>
StoragePtr rope_impl(const T* src, const Shape& shape, const T* cp, const T* sp, const Shape& cs_shape,
                     RopeKind kind) {
  using C = compute_t<T>;
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto d4 = shape.dims4("rope");
  const size_t b = d4[0], d1 = d4[1], d2 = d4[2], d = d4[3];
  size_t h = kind == RopeKind::HalvesThd ? d2 : d1;
  size_t t = kind == RopeKind::HalvesThd ? d1 : d2;
  size_t half = d / 2;
  bool batched_cs = cs_shape.rank() == 3;
  size_t t_max = cs_shape[batched_cs ? 1 : 0];
  std::shared_ptr<CpuStorage> out = CpuStorage::alloc(dtype_of<T>, shape.elem_count());
  T* dst = out->data<T>();
  size_t rows = b * h * t;
  cpu::parallel_for(rows, cpu::row_op_grain(d), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      // row r = ((bi * d1) + i1) * d2 + i2
      size_t i2 = r % d2, i1 = (r / d2) % d1, bi = r / (d1 * d2);
      size_t ti = kind == RopeKind::HalvesThd ? i1 : i2;
      size_t cs_off = ((batched_cs ? bi * t_max : 0) + ti) * half;
      const T* xr = src + r * d;
      T* yr = dst + r * d;
      const T* cr = cp + cs_off;
      const T* sr = sp + cs_off;
      if (kind == RopeKind::Interleaved) {
        for (size_t i = 0; i < half; ++i) {
          C x0 = static_cast<C>(xr[2 * i]), x1 = static_cast<C>(xr[2 * i + 1]);
          C c = static_cast<C>(cr[i]), s = static_cast<C>(sr[i]);
          yr[2 * i] = cast_value<T>(x0 * c - x1 * s);
          yr[2 * i + 1] = cast_value<T>(x0 * s + x1 * c);
        }
      } else {
        for (size_t i = 0; i < half; ++i) {
          C x0 = static_cast<C>(xr[i]), x1 = static_cast<C>(xr[i + half]);
          C c = static_cast<C>(cr[i]), s = static_cast<C>(sr[i]);
          yr[i] = cast_value<T>(x0 * c - x1 * s);
          yr[i + half] = cast_value<T>(x0 * s + x1 * c);
        }
      }
    }
  });
  return out;
}

}  // namespace

StoragePtr CpuStorage::softmax_last_dim(const Layout& l) const {
  if (l.dims().empty()) return nullptr;
  return dispatch_float(dtype(), "softmax_last_dim", [&]<typename T>() {
    std::shared_ptr<CpuStorage> keep;
    return softmax_impl<T>(dense<T>(*this, l, keep), l.shape());
  });
}

StoragePtr CpuStorage::rms_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                float eps) const {
  if (l.dims().empty() || !same_dtype(dtype(), {&alpha})) return nullptr;
  const CpuStorage& a = as_cpu(alpha, "rms_norm");
  return dispatch_float(dtype(), "rms_norm", [&]<typename T>() {
    std::shared_ptr<CpuStorage> keep_x, keep_a;
    return norm_impl<T>(dense<T>(*this, l, keep_x), l.shape(), dense<T>(a, alpha_l, keep_a), nullptr, eps,
                        false);
  });
}

StoragePtr CpuStorage::add_rms_norm(const Layout& l, const BackendStorage& h, const Layout& h_l,
                                    const BackendStorage& alpha, const Layout& alpha_l, float eps) const {
  if (l.dims().empty() || l.dims() != h_l.dims() || !same_dtype(dtype(), {&h, &alpha})) return nullptr;
  const CpuStorage& hs = as_cpu(h, "add_rms_norm");
  const CpuStorage& a = as_cpu(alpha, "add_rms_norm");
  const size_t dim = l.dims().back(), rows = dim ? l.elem_count() / dim : 0;
  return dispatch_float(dtype(), "add_rms_norm", [&]<typename T>() {
    // rows read in place where they fold into one stride (a residual, a matmul's output), else dense
    std::shared_ptr<CpuStorage> keep_x, keep_h, keep_a;
    const std::optional<size_t> xs = uniform_row_stride(l), hstr = uniform_row_stride(h_l);
    const T* xp = xs ? data<T>() + l.start_offset() : dense<T>(*this, l, keep_x);
    const T* hp = hstr ? hs.data<T>() + h_l.start_offset() : dense<T>(hs, h_l, keep_h);
    return add_rms_norm_impl<T>(xp, xs.value_or(dim), hp, hstr.value_or(dim), rows, dim,
                                dense<T>(a, alpha_l, keep_a), eps);
  });
}

StoragePtr CpuStorage::layer_norm(const Layout& l, const BackendStorage& alpha, const Layout& alpha_l,
                                  const BackendStorage& beta, const Layout& beta_l, float eps) const {
  if (l.dims().empty() || !same_dtype(dtype(), {&alpha, &beta})) return nullptr;
  const CpuStorage& a = as_cpu(alpha, "layer_norm");
  const CpuStorage& b = as_cpu(beta, "layer_norm");
  return dispatch_float(dtype(), "layer_norm", [&]<typename T>() {
    std::shared_ptr<CpuStorage> keep_x, keep_a, keep_b;
    return norm_impl<T>(dense<T>(*this, l, keep_x), l.shape(), dense<T>(a, alpha_l, keep_a),
                        dense<T>(b, beta_l, keep_b), eps, true);
  });
}

StoragePtr CpuStorage::rope(RopeKind kind, const Layout& l, const BackendStorage& cos, const Layout& cos_l,
                            const BackendStorage& sin, const Layout& sin_l) const {
  if (l.dims().size() != 4 || cos_l.dims() != sin_l.dims() || !same_dtype(dtype(), {&cos, &sin}))
    return nullptr;
  const CpuStorage& c = as_cpu(cos, "rope");
  const CpuStorage& s = as_cpu(sin, "rope");
  return dispatch_float(dtype(), "rope", [&]<typename T>() {
    std::shared_ptr<CpuStorage> keep_x, keep_c, keep_s;
    return rope_impl<T>(dense<T>(*this, l, keep_x), l.shape(), dense<T>(c, cos_l, keep_c),
                        dense<T>(s, sin_l, keep_s), cos_l.shape(), kind);
  });
}

}  // namespace candle
