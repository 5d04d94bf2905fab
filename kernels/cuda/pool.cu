// max_pool2d / avg_pool2d: one thread per output element over its window, in the CPU's order
// (rows top to bottom, each left to right), so max picks the same element (NaN included) and
// avg adds in the same order.
#include "common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

// store<S>, with the CPU's NaN for f16 / bf16 (f16: sign | 0x7e00; bf16: the f32's upper half
// | 0x40), which the hardware conversion (a canonical NaN) does not give.
template <typename S, typename C>
__device__ __forceinline__ S store_cpu(C v) {
  if constexpr (std::is_same_v<S, __half>) {
    if (isnan(v)) {
      __half_raw r;
      r.x = static_cast<unsigned short>(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7e00u);
      return r;
    }
  } else if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    if (isnan(v)) {
      __nv_bfloat16_raw r;
      r.x = static_cast<unsigned short>((__float_as_uint(v) >> 16) | 0x40u);
      return r;
    }
  }
  return store<S>(v);
}

// The offset of output i's window's first element.
template <typename I>
__device__ __forceinline__ I window_base(I i, const PlaneArgs& p, int64_t s_h, int64_t s_w) {
  const I ow = static_cast<I>(p.ow), oh = static_cast<I>(p.oh), c = static_cast<I>(p.c);
  I t = i;
  const I ox = t % ow;
  t /= ow;
  const I oy = t % oh;
  const I plane = t / oh;
  return (plane / c) * static_cast<I>(p.sb) + (plane % c) * static_cast<I>(p.sc) +
         oy * static_cast<I>(s_h) * static_cast<I>(p.sh) + ox * static_cast<I>(s_w) * static_cast<I>(p.sw);
}

template <typename S, typename I>
__global__ void max_pool_k(const S* __restrict__ x, S* __restrict__ out, PlaneArgs p, int64_t kh, int64_t kw,
                           int64_t s_h, int64_t s_w, I total) {
  pdl_entry();
  using C = compute_t<S>;
  const I sh = static_cast<I>(p.sh), sw = static_cast<I>(p.sw);
  CANDLE_GRID_LOOP(I, i, total) {
    const S* win = x + window_base<I>(i, p, s_h, s_w);
    C m = load(win[0]);
    for (I ki = 0; ki < static_cast<I>(kh); ++ki) {
      for (I kj = 0; kj < static_cast<I>(kw); ++kj) {
        const C v = load(win[ki * sh + kj * sw]);
        if constexpr (std::is_floating_point_v<C>)
          m = (v > m || v != v) ? v : m;
        else
          m = v > m ? v : m;
      }
    }
    out[i] = store_cpu<S>(m);
  }
}

template <typename S, typename I>
__global__ void avg_pool_k(const S* __restrict__ x, S* __restrict__ out, PlaneArgs p, int64_t kh, int64_t kw,
                           int64_t s_h, int64_t s_w, I total) {
  pdl_entry();
  using C = compute_t<S>;
  const I sh = static_cast<I>(p.sh), sw = static_cast<I>(p.sw);
  const C div = static_cast<C>(kh * kw);
  CANDLE_GRID_LOOP(I, i, total) {
    const S* win = x + window_base<I>(i, p, s_h, s_w);
    C acc = C(0);
    for (I ki = 0; ki < static_cast<I>(kh); ++ki)
      for (I kj = 0; kj < static_cast<I>(kw); ++kj) acc += load(win[ki * sh + kj * sw]);
    out[i] = store_cpu<S>(acc / div);
  }
}

}  // namespace

cudaError_t max_pool2d(Dt dt, const void* x, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                       int64_t s_h, int64_t s_w, cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() {
    const int64_t total = p.b * p.c * p.oh * p.ow;
    if (total == 0) return cudaSuccess;
    auto px = static_cast<const S*>(x);
    auto po = static_cast<S*>(out);
    if (p.wide)
      max_pool_k<S, uint64_t>
          <<<grid_for(total), kBlock, 0, s>>>(px, po, p, kh, kw, s_h, s_w, uint64_t(total));
    else
      max_pool_k<S, uint32_t>
          <<<grid_for(total), kBlock, 0, s>>>(px, po, p, kh, kw, s_h, s_w, uint32_t(total));
    return cudaGetLastError();
  });
}

cudaError_t avg_pool2d(Dt dt, const void* x, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                       int64_t s_h, int64_t s_w, cudaStream_t s) {
  auto run = [&]<typename S>() -> cudaError_t {
    const int64_t total = p.b * p.c * p.oh * p.ow;
    if (total == 0) return cudaSuccess;
    auto px = static_cast<const S*>(x);
    auto po = static_cast<S*>(out);
    if (p.wide)
      avg_pool_k<S, uint64_t>
          <<<grid_for(total), kBlock, 0, s>>>(px, po, p, kh, kw, s_h, s_w, uint64_t(total));
    else
      avg_pool_k<S, uint32_t>
          <<<grid_for(total), kBlock, 0, s>>>(px, po, p, kh, kw, s_h, s_w, uint32_t(total));
    return cudaGetLastError();
  };
  switch (dt) {
    case Dt::F32: return run.template operator()<float>();
    case Dt::F16: return run.template operator()<__half>();
    case Dt::BF16: return run.template operator()<__nv_bfloat16>();
    case Dt::F64: return run.template operator()<double>();
    case Dt::F8E4M3: return run.template operator()<f8>();
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace candle::cuda_k
