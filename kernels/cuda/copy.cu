// Strided copies and fills by element size (any dtype: the bytes are moved, never converted).
#include "common.cuh"

namespace candle::cuda_k {
namespace {

template <typename I, typename E>
__global__ void copy_k(const E* __restrict__ x, const __grid_constant__ EwStrides xs, E* __restrict__ out,
                       const __grid_constant__ EwShape sh) {
  CANDLE_GRID_LOOP(I, i, sh.n) out[i] = x[offset_in<I>(i, sh, xs)];
}

template <typename I, typename E>
__global__ void fill_k(E v, E* __restrict__ out, const __grid_constant__ EwStrides os,
                       const __grid_constant__ EwShape sh) {
  CANDLE_GRID_LOOP(I, i, sh.n) out[offset_in<I>(i, sh, os)] = v;
}

}  // namespace

cudaError_t copy_strided(size_t esize, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                         cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  return with_esize(esize, [&]<typename E>() {
    auto px = static_cast<const E*>(x);
    auto po = static_cast<E*>(out);
    if (sh.wide || sh.n > int64_t(UINT32_MAX))
      copy_k<uint64_t><<<grid_for(sh.n), kBlock, 0, s>>>(px, xs, po, sh);
    else
      copy_k<uint32_t><<<grid_for(sh.n), kBlock, 0, s>>>(px, xs, po, sh);
    return cudaGetLastError();
  });
}

cudaError_t fill(size_t esize, uint64_t bits, void* out, const EwStrides& os, const EwShape& sh,
                 cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  return with_esize(esize, [&]<typename E>() {
    auto po = static_cast<E*>(out);
    const E v = static_cast<E>(bits);
    if (sh.wide || sh.n > int64_t(UINT32_MAX))
      fill_k<uint64_t><<<grid_for(sh.n), kBlock, 0, s>>>(v, po, os, sh);
    else
      fill_k<uint32_t><<<grid_for(sh.n), kBlock, 0, s>>>(v, po, os, sh);
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
