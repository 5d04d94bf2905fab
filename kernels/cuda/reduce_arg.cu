// Argmin and argmax (reduce.cuh).
#include "reduce.cuh"

namespace candle::cuda_k::red {

cudaError_t reduce_arg(bool is_max, Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count,
                       void* scratch, cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() {
    return is_max ? run<ArgR<S, true>>(x, a, out, sm_count, scratch, s)
                  : run<ArgR<S, false>>(x, a, out, sm_count, scratch, s);
  });
}

}  // namespace candle::cuda_k::red
