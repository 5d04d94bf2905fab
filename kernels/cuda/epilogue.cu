// The convolution epilogue: bias and activation applied in place after a convolution that had none
// (cuDNN's output), in one pass.
#include "ew.cuh"
#include "launch_epilogue.h"

namespace candle::cuda_k {
namespace {

struct NoAct {
  template <typename C>
  __device__ __forceinline__ C operator()(C x) const {
    return x;
  }
};

template <typename S, typename F>
__global__ void bias_act_k(S* __restrict__ out, const S* __restrict__ bias, uint64_t n, uint64_t channels,
                           uint64_t inner, F f) {
  pdl_entry();
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(blockDim.x) * gridDim.x) {
    auto v = load(out[i]);
    if (bias) v = v + load(bias[(i / inner) % channels]);
    out[i] = store<S>(f(v));
  }
}

template <typename S, typename F>
cudaError_t go(void* out, const void* bias, size_t batch, size_t channels, size_t inner, F f,
               cudaStream_t s) {
  const uint64_t n = static_cast<uint64_t>(batch) * channels * inner;
  if (n == 0) return cudaSuccess;
  bias_act_k<<<grid_for(static_cast<int64_t>(n)), kBlock, 0, s>>>(
      static_cast<S*>(out), static_cast<const S*>(bias), n, channels, inner, f);
  return cudaGetLastError();
}

}  // namespace

cudaError_t bias_act_inplace(Dt dt, void* out, const void* bias, size_t batch, size_t channels, size_t inner,
                             int act_op, cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    if constexpr (is_int_v<S> || std::is_same_v<S, f8>) {
      return cudaErrorNotSupported;
    } else {
      if (act_op < 0) return go<S>(out, bias, batch, channels, inner, NoAct{}, s);
      return ew::with_unary(static_cast<UnaryOp>(act_op), [&]<UnaryOp OP>() {
        return go<S>(out, bias, batch, channels, inner, ew::UnaryF<OP>{}, s);
      });
    }
  });
}

}  // namespace candle::cuda_k
