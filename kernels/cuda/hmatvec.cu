// The f16 / bf16 weight matrix-vector product of decoding (m <= kQmvMaxRows rows of f32 x): one to
// four warps a weight row, each lane reading 8 weights (16 bytes) at a time, the warp's loads
// contiguous, two such loads in flight, converted to f32 and multiplied with x in f32 (f32
// accumulation; x is not rounded to the weight's type as cuBLAS's mixed GEMM needs it).
#include <cuda_fp16.h>

#include "common.cuh"
#include "launch_quant.h"
#include "matvec.cuh"

namespace candle::cuda_k {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ void widen(const uint4& r, bool bf16, float (&f)[8]) {
  const uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (bf16) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    } else {
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
}

template <bool kBf16, int M, int W>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    hmatvec_k(const uint16_t* __restrict__ w, int n, int k, int m, const float* __restrict__ x,
              float* __restrict__ y) {
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int row = static_cast<int>(blockIdx.x) * (kWarpsPerBlock / W) + warp / W;
  const bool valid = row < n;  // (no early return: the W > 1 sum meets at a barrier)
  const int lane = static_cast<int>(threadIdx.x % 32) + 32 * (warp % W);
  const uint16_t* wr = w + static_cast<uint64_t>(valid ? row : 0) * k;
  const int chunks = valid ? k / 8 : 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int c = lane, i = 0; i < 2 && c < chunks; c += 32 * W, ++i)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(wr + static_cast<uint64_t>(c) * 8));
#endif
  pdl_entry();
  float acc[M];
#pragma unroll
  for (int j = 0; j < M; ++j) acc[j] = 0.0f;
  for (int c0 = lane; c0 < chunks; c0 += 2 * 32 * W) {
    uint4 raw[2];
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int c = c0 + p * 32 * W;
      raw[p] = p == 0 || c < chunks ? __ldg(reinterpret_cast<const uint4*>(wr) + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const int c = c0 + p * 32 * W;
      if (p > 0 && c >= chunks) break;
      float f[8];
      widen(raw[p], kBf16, f);
#pragma unroll
      for (int j = 0; j < M; ++j) {
        if (j >= m) break;
        const float4* xp = reinterpret_cast<const float4*>(x + static_cast<uint64_t>(j) * k) + 2 * c;
        const float4 a = xp[0], b = xp[1];
        float s = acc[j];
        s = fmaf(f[0], a.x, s);
        s = fmaf(f[1], a.y, s);
        s = fmaf(f[2], a.z, s);
        s = fmaf(f[3], a.w, s);
        s = fmaf(f[4], b.x, s);
        s = fmaf(f[5], b.y, s);
        s = fmaf(f[6], b.z, s);
        s = fmaf(f[7], b.w, s);
        acc[j] = s;
      }
    }
  }
  finish_rows<M, W, kWarpsPerBlock>(acc, warp, lane, valid, m, n, row, y);
}

template <bool kBf16, int M>
cudaError_t launch_hmv(const void* w, size_t n, size_t k, size_t m, const float* x, float* y,
                       cudaStream_t s) {
  const int wr = warps_per_row(k / 8, n);  // by 16-byte chunks
  auto run = [&]<int W>() {
    constexpr size_t kRows = kWarpsPerBlock / W;
    const auto blocks = static_cast<unsigned>((n + kRows - 1) / kRows);
    hmatvec_k<kBf16, M, W><<<blocks, kWarpsPerBlock * 32, 0, s>>>(
        static_cast<const uint16_t*>(w), static_cast<int>(n), static_cast<int>(k), static_cast<int>(m), x, y);
    return cudaGetLastError();
  };
  if (wr == 4) return run.template operator()<4>();
  if (wr == 2) return run.template operator()<2>();
  return run.template operator()<1>();
}

}  // namespace

cudaError_t half_matvec(bool bf16, const void* w, size_t n, size_t k, size_t m, const float* x, float* y,
                        cudaStream_t s) {
  if (n == 0 || m == 0) return cudaSuccess;
  if (m > kQmvMaxRows || k % 8 != 0 || n > INT32_MAX || k > INT32_MAX) return cudaErrorInvalidValue;
  auto by_m = [&]<bool B>() {
    if (m == 1) return launch_hmv<B, 1>(w, n, k, m, x, y, s);
    if (m == 2) return launch_hmv<B, 2>(w, n, k, m, x, y, s);
    if (m <= 4) return launch_hmv<B, 4>(w, n, k, m, x, y, s);
    return launch_hmv<B, 8>(w, n, k, m, x, y, s);
  };
  return bf16 ? by_m.template operator()<true>() : by_m.template operator()<false>();
}

}  // namespace candle::cuda_k
