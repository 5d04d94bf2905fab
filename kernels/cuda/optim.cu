// The fused AdamW step (semantics of src/cpu/optim.cpp): one thread per element, m, v and theta
// written in place, in the CPU's order of operations with its roundings (each operation on its
// own, or the CPU build's three fused multiply-adds: AdamWConsts::contract); division and square
// root correctly rounded.
#include "launch_nn.h"
#include "nn_common.cuh"

namespace candle::cuda_k {
namespace {

using namespace nn;

__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

template <typename T, typename I, bool kContract>
__global__ void adamw_kernel(T* __restrict__ theta, T* __restrict__ m, T* __restrict__ v,
                             const T* __restrict__ g, I n, T b1, T one_b1, T b2, T one_b2, T scale_m,
                             T scale_v, T decay, T lr, T eps) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, n) {
    const T gi = g[i];
    const T gm = mul_rn(gi, one_b1), gv = mul_rn(mul_rn(gi, gi), one_b2);
    const T mi = kContract ? fma_rn(m[i], b1, gm) : add_rn(mul_rn(m[i], b1), gm);
    const T vi = kContract ? fma_rn(v[i], b2, gv) : add_rn(mul_rn(v[i], b2), gv);
    m[i] = mi;
    v[i] = vi;
    const T denom = add_rn(sqrt_rn(mul_rn(vi, scale_v)), eps);
    const T step = mul_rn(div_rn(mul_rn(mi, scale_m), denom), lr);
    theta[i] = kContract ? fma_rn(theta[i], decay, -step) : sub_rn(mul_rn(theta[i], decay), step);
  }
}

template <typename T>
cudaError_t launch_adamw(void* theta, void* m, void* v, const void* g, int64_t n, const AdamWConsts& c,
                         cudaStream_t s) {
  auto run = [&]<typename I, bool kContract>() {
    adamw_kernel<T, I, kContract><<<grid_for(n), kBlock, 0, s>>>(
        static_cast<T*>(theta), static_cast<T*>(m), static_cast<T*>(v), static_cast<const T*>(g),
        static_cast<I>(n), static_cast<T>(c.b1), static_cast<T>(c.one_b1), static_cast<T>(c.b2),
        static_cast<T>(c.one_b2), static_cast<T>(c.scale_m), static_cast<T>(c.scale_v),
        static_cast<T>(c.decay), static_cast<T>(c.lr), static_cast<T>(c.eps));
  };
  const bool small = n < (int64_t(1) << 31);
  if (small && c.contract)
    run.template operator()<uint32_t, true>();
  else if (small)
    run.template operator()<uint32_t, false>();
  else if (c.contract)
    run.template operator()<uint64_t, true>();
  else
    run.template operator()<uint64_t, false>();
  return cudaGetLastError();
}

}  // namespace

cudaError_t adamw(Dt dt, void* theta, void* m, void* v, const void* g, int64_t n, const AdamWConsts& c,
                  cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (dt == Dt::F32) return launch_adamw<float>(theta, m, v, g, n, c, s);
  if (dt == Dt::F64) return launch_adamw<double>(theta, m, v, g, n, c, s);
  return cudaErrorInvalidValue;
}

}  // namespace candle::cuda_k
