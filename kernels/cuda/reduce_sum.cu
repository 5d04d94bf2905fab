// Sums (reduce.cuh).
#include "reduce.cuh"

namespace candle::cuda_k::red {

cudaError_t reduce_sum(Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count, void* scratch,
                       cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() { return run<SumR<S>>(x, a, out, sm_count, scratch, s); });
}

}  // namespace candle::cuda_k::red
