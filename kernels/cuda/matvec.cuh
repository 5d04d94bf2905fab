// The end shared by the matrix-vector kernels (qmatmul.cu, hmatvec.cu): W warps a row in blocks of
// kWarps warps, each lane holding M partial sums.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace candle::cuda_k {

// Warps a row: 4 for rows of 128 units (items, 16-byte chunks) or more, 2 from 64 (units per lane:
// a few at most), fewer where the matrix has rows enough to fill the GPU many times over.
inline int warps_per_row(size_t units, size_t n) {
  int wr = units >= 128 ? 4 : (units >= 64 ? 2 : 1);
  while (wr > 1 && n * static_cast<size_t>(wr) > 32768) wr /= 2;
  return wr;
}

// Each warp's sums reduced over its lanes, the row's W warps added in shared memory in warp order,
// and lane 0 of the row's first warp writing y[j * n + row] for j < m (nothing for an invalid row).
// lane: the lane within the row's W * 32; every thread of the block must call it (a barrier).
template <int M, int W, int kWarps>
__device__ __forceinline__ void finish_rows(float (&acc)[M], int warp, int lane, bool valid, int m, int n,
                                            int row, float* __restrict__ y) {
#pragma unroll
  for (int j = 0; j < M; ++j)
    for (int o = 16; o > 0; o /= 2) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
  if constexpr (W > 1) {
    __shared__ float part[kWarps][M];
    if (lane % 32 == 0) {
#pragma unroll
      for (int j = 0; j < M; ++j) part[warp][j] = acc[j];
    }
    __syncthreads();
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < M; ++j)
        for (int v = 1; v < W; ++v) acc[j] += part[warp + v][j];
    }
  }
  if (valid && lane == 0) {
#pragma unroll
    for (int j = 0; j < M; ++j)
      if (j < m) y[static_cast<uint64_t>(j) * n + row] = acc[j];
  }
}

}  // namespace candle::cuda_k
