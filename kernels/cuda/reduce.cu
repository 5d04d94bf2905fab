// The reduction entry points: plan sizes and the dispatch to the per-op files.
#include "reduce.cuh"

namespace candle::cuda_k {

size_t reduce_scratch_bytes(ReduceOp, Dt dt, const ReduceArgs& a, int sm_count) {
  size_t esize = 0;
  with_dtype(dt, [&]<typename S>() {
    esize = sizeof(S);
    return cudaSuccess;
  });
  if (esize == 0) return 0;
  const red::Plan p = red::plan(a, sm_count, esize);
  if (p.chunks <= 1) return 0;
  return static_cast<size_t>(a.n_out) * static_cast<size_t>(p.chunks) * red::kMaxPartialBytes;
}

cudaError_t reduce(ReduceOp op, Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count,
                   void* scratch, cudaStream_t s) {
  if (a.n_out <= 0 || a.R <= 0) return cudaErrorInvalidValue;
  switch (op) {
    case ReduceOp::Sum: return red::reduce_sum(dt, x, a, out, sm_count, scratch, s);
    case ReduceOp::Min: return red::reduce_minmax(false, dt, x, a, out, sm_count, scratch, s);
    case ReduceOp::Max: return red::reduce_minmax(true, dt, x, a, out, sm_count, scratch, s);
    case ReduceOp::ArgMin: return red::reduce_arg(false, dt, x, a, out, sm_count, scratch, s);
    case ReduceOp::ArgMax: return red::reduce_arg(true, dt, x, a, out, sm_count, scratch, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace candle::cuda_k
