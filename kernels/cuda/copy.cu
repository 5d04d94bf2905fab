// Strided copies and fills by element size (any dtype: the bytes are moved, never converted).
#include "common.cuh"

namespace candle::cuda_k {
namespace {

template <typename I, typename E>
__global__ void copy_k(const E* __restrict__ x, const __grid_constant__ EwStrides xs, E* __restrict__ out,
                       const __grid_constant__ EwShape sh) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n) out[i] = x[offset_in<I>(i, sh, xs)];
}

template <typename I, typename E>
__global__ void fill_k(E v, E* __restrict__ out, const __grid_constant__ EwStrides os,
                       const __grid_constant__ EwShape sh) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n) out[offset_in<I>(i, sh, os)] = v;
}

// out [B, R, C] dense from x with strides (sb, 1, sc): a transpose of the two inner dims, through
// 32x32 tiles in shared memory so that both the reads (along r) and the writes (along c) coalesce.
template <typename E>
__global__ void transpose_k(const E* __restrict__ x, int64_t sb, int64_t sc, E* __restrict__ out, int64_t R,
                            int64_t C) {
  pdl_entry();
  __shared__ E tile[32][33];
  const int64_t b = blockIdx.z, r0 = static_cast<int64_t>(blockIdx.y) * 32,
                c0 = static_cast<int64_t>(blockIdx.x) * 32;
  const E* xb = x + b * sb;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int64_t r = r0 + threadIdx.x, c = c0 + j;
    if (r < R && c < C) tile[j][threadIdx.x] = xb[r + c * sc];
  }
  __syncthreads();
  E* ob = out + b * R * C;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int64_t r = r0 + j, c = c0 + threadIdx.x;
    if (r < R && c < C) ob[r * C + c] = tile[threadIdx.x][j];
  }
}

// The same transpose for 2-byte elements, moving pairs: a thread reads two rows of one column as
// one 32-bit word and writes two columns of one row as one word, through 64 x 64 tiles (2-byte
// loads left the 32 x 32 kernel at 40% of the bandwidth). Needs 4-byte aligned pairs: even sc and C
// and aligned bases (the caller checks).
__global__ void __launch_bounds__(256)
    transpose_pairs_k(const uint16_t* __restrict__ x, int64_t sb, int64_t sc, uint16_t* __restrict__ out,
                      int64_t R, int64_t C) {
  pdl_entry();
  __shared__ alignas(16) uint16_t tile[64][66];  // tile[c][r]
  const int64_t b = blockIdx.z, r0 = static_cast<int64_t>(blockIdx.y) * 64,
                c0 = static_cast<int64_t>(blockIdx.x) * 64;
  const uint16_t* xb = x + b * sb;
  const int rp = 2 * static_cast<int>(threadIdx.x);  // this thread's row pair (reads), column pair (writes)
#pragma unroll
  for (int j = threadIdx.y; j < 64; j += 8) {
    const int64_t r = r0 + rp, c = c0 + j;
    if (c < C) {
      if (r + 1 < R) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(xb + r + c * sc);
        *reinterpret_cast<uint32_t*>(&tile[j][rp]) = w;
      } else if (r < R) {
        tile[j][rp] = xb[r + c * sc];
      }
    }
  }
  __syncthreads();
  uint16_t* ob = out + b * R * C;
#pragma unroll
  for (int j = threadIdx.y; j < 64; j += 8) {
    const int64_t r = r0 + j, c = c0 + rp;
    if (r < R) {
      if (c + 1 < C)
        *reinterpret_cast<uint32_t*>(ob + r * C + c) =
            static_cast<uint32_t>(tile[rp][j]) | (static_cast<uint32_t>(tile[rp + 1][j]) << 16);
      else if (c < C)
        ob[r * C + c] = tile[rp][j];
    }
  }
}

}  // namespace

cudaError_t copy_transpose(size_t esize, const void* x, int64_t sb, int64_t sc, void* out, int64_t B,
                           int64_t R, int64_t C, cudaStream_t s) {
  if (B == 0 || R == 0 || C == 0) return cudaSuccess;
  if (B > 65535 || (R + 31) / 32 > 65535 || (C + 31) / 32 > (int64_t(1) << 31) - 1)
    return cudaErrorInvalidValue;
  const auto word_aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; };
  if (esize == 2 && sb % 2 == 0 && sc % 2 == 0 && C % 2 == 0 && word_aligned(x) && word_aligned(out)) {
    const dim3 grid(static_cast<unsigned>((C + 63) / 64), static_cast<unsigned>((R + 63) / 64),
                    static_cast<unsigned>(B));
    transpose_pairs_k<<<grid, dim3(32, 8), 0, s>>>(static_cast<const uint16_t*>(x), sb, sc,
                                                   static_cast<uint16_t*>(out), R, C);
    return cudaGetLastError();
  }
  return with_esize(esize, [&]<typename E>() {
    const dim3 grid(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>((R + 31) / 32),
                    static_cast<unsigned>(B));
    transpose_k<E><<<grid, dim3(32, 8), 0, s>>>(static_cast<const E*>(x), sb, sc, static_cast<E*>(out), R, C);
    return cudaGetLastError();
  });
}

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
