#include "nn/fused_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "cpu/parallel.h"
#include "cpu/vec_math.h"

namespace candle::nn::detail {
namespace {

// Pointer to the first element of a contiguous CPU tensor.
template <typename T>
const T* cpu_data(const Tensor& t) {
  auto* s = dynamic_cast<const CpuStorage*>(t.storage().get());
  if (!s) throw Error(ErrorKind::Internal, "fused nn kernel: tensor is not on the CPU");
  return s->data<T>() + t.layout().start_offset();
}

// A fresh contiguous CPU tensor of xs' shape and dtype, and its data pointer.
template <typename T>
std::pair<Tensor, T*> alloc_like(const Tensor& xs) {
  auto storage = CpuStorage::alloc(xs.dtype(), xs.elem_count());
  T* p = storage->data<T>();
  return {Tensor::from_storage(storage, Layout::contiguous(xs.shape()), xs.dtype(), xs.device()), p};
}

// Rows per parallel chunk so that a chunk holds about kParallelGrain elements.
size_t row_grain(size_t dim) { return std::max<size_t>(1, cpu::kParallelGrain / std::max<size_t>(dim, 1)); }

template <typename C>
C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>)
    return cpu::vm::exp_f32(x);
  else
    return std::exp(x);
}

// Sum with 8 independent accumulators (vectorizable; the order depends only on n).
template <typename C>
__attribute__((target_clones("avx512f", "avx2", "default"))) C row_sum(const C* x, size_t n) {
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
__attribute__((target_clones("avx512f", "avx2", "default"))) C row_sum_sq_dev(const C* x, size_t n, C c) {
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
Tensor softmax_impl(const Tensor& x) {
  using C = compute_t<T>;
  size_t dim = x.dims().back();
  size_t rows = dim ? x.elem_count() / dim : 0;
  const T* src = cpu_data<T>(x);
  auto [out, dst] = alloc_like<T>(x);
  cpu::parallel_for(rows, row_grain(dim), [&, dst = dst](size_t r0, size_t r1) {
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

// Shared body of rms_norm (beta == nullptr, no mean) and layer_norm.
template <typename T>
Tensor norm_impl(const Tensor& x, const Tensor& alpha, const Tensor* beta, float eps, bool remove_mean) {
  using C = compute_t<T>;
  size_t dim = x.dims().back();
  size_t rows = dim ? x.elem_count() / dim : 0;
  const T* src = cpu_data<T>(x);
  std::vector<C> a(dim), b(dim, C(0));
  const T* ap = cpu_data<T>(alpha);
  for (size_t i = 0; i < dim; ++i) a[i] = static_cast<C>(ap[i]);
  if (beta) {
    const T* bp = cpu_data<T>(*beta);
    for (size_t i = 0; i < dim; ++i) b[i] = static_cast<C>(bp[i]);
  }
  auto [out, dst] = alloc_like<T>(x);
  C n = static_cast<C>(dim);
  C e = static_cast<C>(eps);
  cpu::parallel_for(rows, row_grain(dim), [&, dst = dst](size_t r0, size_t r1) {
    std::vector<C> in_buf(dim), out_buf(dim);
    for (size_t r = r0; r < r1; ++r) {
      const C* xr = load_row<T, C>(src + r * dim, dim, in_buf);
      C* yr = std::is_same_v<T, C> ? reinterpret_cast<C*>(dst + r * dim) : out_buf.data();
      C mean = remove_mean ? row_sum<C>(xr, dim) / n : C(0);
      C var = row_sum_sq_dev<C>(xr, dim, mean) / n;
      C denom = std::sqrt(var + e);
      if (beta) {
        for (size_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) / denom * a[i] + b[i];
      } else {
        for (size_t i = 0; i < dim; ++i) yr[i] = xr[i] / denom * a[i];
      }
      if constexpr (!std::is_same_v<T, C>) store_row<T, C>(yr, dim, dst + r * dim);
    }
  });
  return out;
}

template <typename T>
Tensor rope_impl(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeKind kind) {
  using C = compute_t<T>;
  auto [b, d1, d2, d] = x.shape().dims4("rope");
  // HalvesThd: [b, t, h, d]; the others [b, h, t, d].
  size_t h = kind == RopeKind::HalvesThd ? d2 : d1;
  size_t t = kind == RopeKind::HalvesThd ? d1 : d2;
  size_t half = d / 2;
  bool batched_cs = cos.rank() == 3;
  size_t t_max = cos.dim(batched_cs ? 1 : 0);
  const T* src = cpu_data<T>(x);
  const T* cp = cpu_data<T>(cos);
  const T* sp = cpu_data<T>(sin);
  auto [out, dst] = alloc_like<T>(x);
  size_t rows = b * h * t;
  cpu::parallel_for(rows, row_grain(d), [&, dst = dst](size_t r0, size_t r1) {
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

Tensor softmax_last_dim_cpu(const Tensor& xs) {
  Tensor x = xs.contiguous();
  return dispatch_float(x.dtype(), "softmax_last_dim", [&]<typename T>() { return softmax_impl<T>(x); });
}

Tensor rms_norm_cpu(const Tensor& xs, const Tensor& alpha, float eps) {
  Tensor x = xs.contiguous();
  Tensor a = alpha.to_dtype(x.dtype()).contiguous();
  return dispatch_float(x.dtype(), "rms_norm",
                        [&]<typename T>() { return norm_impl<T>(x, a, nullptr, eps, false); });
}

Tensor layer_norm_cpu(const Tensor& xs, const Tensor& alpha, const Tensor& beta, float eps) {
  Tensor x = xs.contiguous();
  Tensor a = alpha.to_dtype(x.dtype()).contiguous();
  Tensor b = beta.to_dtype(x.dtype()).contiguous();
  return dispatch_float(x.dtype(), "layer_norm",
                        [&]<typename T>() { return norm_impl<T>(x, a, &b, eps, true); });
}

Tensor rope_cpu(const Tensor& xs, const Tensor& cos, const Tensor& sin, RopeKind kind) {
  Tensor x = xs.contiguous();
  Tensor c = cos.to_dtype(x.dtype()).contiguous();
  Tensor s = sin.to_dtype(x.dtype()).contiguous();
  return dispatch_float(x.dtype(), "rope", [&]<typename T>() { return rope_impl<T>(x, c, s, kind); });
}

}  // namespace candle::nn::detail
