// Device-side helpers shared by the CUDA kernels: storage types and their compute types, the
// conversions (bit-identical to the CPU's in candle/dtype.h), strided offsets, launch shapes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "launch.h"

namespace candle::cuda_k {

// The first statement of every kernel here. A recorded graph may let a kernel start before the
// kernel it depends on has finished (programmatic dependent launch, sm_90 and later: cuda::Graph
// turns the edges into our kernels into programmatic ones, src/cuda/graph.cpp), so that its
// blocks are resident when their inputs are ready instead of being launched then:
// griddepcontrol.wait holds the block until the grids it depends on have completed and their
// writes are visible, and launch_dependents then lets the next kernel start launching. Without
// such an edge (any launch outside a graph) both are no-ops.
__device__ __forceinline__ void pdl_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// float8 e4m3fn as one byte (the CPU's rules: beyond 464 NaN, round to nearest even).
struct f8 {
  uint8_t bits;
};

template <typename S>
struct Compute {
  using type = S;
};
template <>
struct Compute<__half> {
  using type = float;
};
template <>
struct Compute<__nv_bfloat16> {
  using type = float;
};
template <>
struct Compute<f8> {
  using type = float;
};
template <typename S>
using compute_t = typename Compute<S>::type;

template <typename S>
constexpr bool is_int_v = !std::is_floating_point_v<compute_t<S>>;

__device__ __forceinline__ float f8_to_f32(uint8_t b) {
  const bool neg = b & 0x80;
  const uint32_t e = (b >> 3) & 0xfu, m = b & 0x7u;
  if (e == 0xf && m == 0x7) return __int_as_float(0x7fc00000);
  float r = e == 0 ? static_cast<float>(m) * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return neg ? -r : r;
}

__device__ __forceinline__ uint8_t f8_from_f32(float v) {
  const uint32_t x = __float_as_uint(v);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const float a = fabsf(v);
  if (isnan(v) || a > 464.0f) return static_cast<uint8_t>(sign | 0x7f);
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<uint8_t>(rintf(a * 512.0f)));
  uint32_t ax = __float_as_uint(a);
  ax += 0x7ffffu + ((ax >> 20) & 1u);
  const int e = static_cast<int>(ax >> 23) - 127 + 7;
  const uint32_t m = (ax >> 20) & 0x7u;
  return static_cast<uint8_t>(sign | (e << 3) | m);
}

// Storage -> compute type.
template <typename S>
__device__ __forceinline__ compute_t<S> load(S v) {
  if constexpr (std::is_same_v<S, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<S, __nv_bfloat16>)
    return __bfloat162float(v);
  else if constexpr (std::is_same_v<S, f8>)
    return f8_to_f32(v.bits);
  else
    return v;
}

// Compute type -> storage (round to nearest even).
template <typename S, typename C>
__device__ __forceinline__ S store(C v) {
  if constexpr (std::is_same_v<S, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<S, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<S, f8>)
    return f8{f8_from_f32(static_cast<float>(v))};
  else
    return static_cast<S>(v);
}

// The CPU's cast_value<To>(From) on compute values: float -> integer truncates toward zero,
// saturates, NaN -> 0; anything -> a half-like type goes through f32.
template <typename To, typename From>
__device__ __forceinline__ compute_t<To> convert(From v) {
  using CT = compute_t<To>;
  if constexpr (std::is_same_v<CT, From>) {
    return v;
  } else if constexpr (!std::is_same_v<To, CT>) {  // half-like target: via f32
    return static_cast<float>(v);
  } else if constexpr (std::is_integral_v<CT> && std::is_floating_point_v<From>) {
    if (v != v) return CT(0);
    if (v <= static_cast<From>(std::numeric_limits<CT>::lowest())) return std::numeric_limits<CT>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<CT>::max())) return std::numeric_limits<CT>::max();
    return static_cast<CT>(v);
  } else {
    return static_cast<CT>(v);
  }
}

// Calls fn.template operator()<S>() with the storage type of dt.
template <typename Fn>
__host__ cudaError_t with_dtype(Dt dt, Fn&& fn) {
  switch (dt) {
    case Dt::U8: return fn.template operator()<uint8_t>();
    case Dt::U32: return fn.template operator()<uint32_t>();
    case Dt::I16: return fn.template operator()<int16_t>();
    case Dt::I32: return fn.template operator()<int32_t>();
    case Dt::I64: return fn.template operator()<int64_t>();
    case Dt::BF16: return fn.template operator()<__nv_bfloat16>();
    case Dt::F16: return fn.template operator()<__half>();
    case Dt::F32: return fn.template operator()<float>();
    case Dt::F64: return fn.template operator()<double>();
    case Dt::F8E4M3: return fn.template operator()<f8>();
  }
  return cudaErrorInvalidValue;
}

// Raw element of `esize` bytes.
template <size_t B>
struct Raw;
template <>
struct Raw<1> {
  using type = uint8_t;
};
template <>
struct Raw<2> {
  using type = uint16_t;
};
template <>
struct Raw<4> {
  using type = uint32_t;
};
template <>
struct Raw<8> {
  using type = uint64_t;
};

template <typename Fn>
__host__ cudaError_t with_esize(size_t esize, Fn&& fn) {
  switch (esize) {
    case 1: return fn.template operator()<uint8_t>();
    case 2: return fn.template operator()<uint16_t>();
    case 4: return fn.template operator()<uint32_t>();
    case 8: return fn.template operator()<uint64_t>();
  }
  return cudaErrorInvalidValue;
}

// The offset of element i in one operand (its own strides, dense when st.dense).
template <typename I>
__device__ __forceinline__ I offset_in(I i, const EwShape& sh, const EwStrides& st) {
  if (st.dense) return i;
  if constexpr (std::is_same_v<I, uint32_t>) {
    if (sh.fast) {
      uint32_t r = 0;
      for (int d = sh.rank - 1; d >= 0; --d) {
        const uint32_t q = (__umulhi(i, sh.mag[d]) + i) >> sh.shr[d];
        r += (i - q * static_cast<uint32_t>(sh.dims[d])) * static_cast<uint32_t>(st.st[d]);
        i = q;
      }
      return r;
    }
  }
  I r = 0;
  for (int d = sh.rank - 1; d >= 0; --d) {
    const I dim = static_cast<I>(sh.dims[d]);
    const I q = i / dim;
    r += (i - q * dim) * static_cast<I>(st.st[d]);
    i = q;
  }
  return r;
}

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n items: enough to fill the card, no more.
inline unsigned grid_for(int64_t n, int per_thread = 1) {
  int64_t blocks = (n + int64_t(kBlock) * per_thread - 1) / (int64_t(kBlock) * per_thread);
  if (blocks < 1) blocks = 1;
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;
  return static_cast<unsigned>(blocks);
}

// for (i = first; i < n; i += stride) over the grid.
#define CANDLE_GRID_LOOP(I, i, n)                                                          \
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < static_cast<I>(n); \
       i += static_cast<I>(blockDim.x) * gridDim.x)

}  // namespace candle::cuda_k
