// Inclusive prefix sums (cumsum) of a dense [pre, len, post] tensor along len.
//  - post > 1 (or short rows): one thread per (pre, post) column walks the column in order,
//    threads along post reading coalesced rows;
//  - post == 1 with long rows: one block per row, tiles of kBlock * kPer elements: each thread
//    sums its kPer consecutive elements, a block-wide exclusive scan of those sums gives each
//    thread its start, and a carry runs from tile to tile.
// Accumulators as the sums of reduce.cuh: f32/f64 in f64, f16/bf16/f8 in f32, integers in
// 64-bit unsigned (exact modulo the dtype).
#include "reduce.cuh"

namespace candle::cuda_k {
namespace {

template <typename S>
using Sum = red::SumR<S>;

template <typename S>
__global__ void cumsum_cols_k(const S* __restrict__ x, S* __restrict__ out, int64_t pre, int64_t len,
                              int64_t post) {
  pdl_entry();
  using A = typename Sum<S>::P;
  CANDLE_GRID_LOOP(int64_t, t, pre * post) {
    const int64_t p = t / post, q = t - p * post;
    const int64_t base = p * len * post + q;
    A acc = A(0);
    for (int64_t i = 0; i < len; ++i) {
      acc += Sum<S>::elem(x[base + i * post], 0);
      out[base + i * post] = Sum<S>::finish(acc);
    }
  }
}

template <typename X>
__device__ __forceinline__ X shfl_up(X v, int d) {
  unsigned long long u = 0;
  memcpy(&u, &v, sizeof(X));
  u = __shfl_up_sync(0xffffffffu, u, d);
  X r;
  memcpy(&r, &u, sizeof(X));
  return r;
}

constexpr int kPer = 8;

template <typename S>
__global__ void __launch_bounds__(kBlock)
    cumsum_rows_k(const S* __restrict__ x, S* __restrict__ out, int64_t rows, int64_t len) {
  pdl_entry();
  using A = typename Sum<S>::P;
  constexpr int kWarps = kBlock / 32;
  __shared__ A warp_sum[kWarps];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S* xr = x + row * len;
    S* yr = out + row * len;
    A carry = A(0);
    for (int64_t t0 = 0; t0 < len; t0 += int64_t(kBlock) * kPer) {
      const int64_t b = t0 + int64_t(tid) * kPer;
      A own = A(0);
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        if (b + k < len) own += Sum<S>::elem(xr[b + k], 0);
      // inclusive scan in the warp, then over the warps' totals
      A inc = own;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        A y = shfl_up(inc, d);
        if (lane >= d) inc += y;
      }
      A exc = shfl_up(inc, 1);
      if (lane == 0) exc = A(0);
      if (lane == 31) warp_sum[warp] = inc;
      __syncthreads();
      A before = A(0), total = A(0);
      for (int w = 0; w < kWarps; ++w) {
        if (w < warp) before += warp_sum[w];
        total += warp_sum[w];
      }
      __syncthreads();
      A acc = carry + (before + exc);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (b + k < len) {
          acc += Sum<S>::elem(xr[b + k], 0);
          yr[b + k] = Sum<S>::finish(acc);
        }
      }
      carry += total;
    }
  }
}

}  // namespace

cudaError_t cumsum(Dt dt, const void* x, void* out, int64_t pre, int64_t len, int64_t post, cudaStream_t s) {
  if (pre * len * post == 0) return cudaSuccess;
  return with_dtype(dt, [&]<typename S>() {
    auto px = static_cast<const S*>(x);
    auto po = static_cast<S*>(out);
    if (post == 1 && len >= 512) {
      const int64_t blocks = pre < 65535LL * 32 ? pre : 65535LL * 32;
      cumsum_rows_k<S><<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(px, po, pre, len);
    } else {
      cumsum_cols_k<S><<<grid_for(pre * post), kBlock, 0, s>>>(px, po, pre, len, post);
    }
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
