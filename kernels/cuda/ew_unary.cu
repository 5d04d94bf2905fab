// Unary element-wise ops (functors and kernels: ew.cuh).
#include "ew.cuh"

namespace candle::cuda_k {

using namespace ew;

cudaError_t unary(UnaryOp op, Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                  cudaStream_t s) {
  return with_unary(op, [&]<UnaryOp OP>() {
    return with_dtype(dt, [&]<typename S>() -> cudaError_t {
      if constexpr (is_int_v<S> && !unary_int_ok(OP))
        return cudaErrorNotSupported;
      else
        return launch_map1<S>(x, xs, out, sh, UnaryF<OP>{}, s);
    });
  });
}

}  // namespace candle::cuda_k
