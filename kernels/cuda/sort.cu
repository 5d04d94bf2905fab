// Stable arg-sort of the rows of a dense [rows, len] tensor: a bitonic sorting network over
// (value, index) keys. The keys' order is total (value with NaN largest, then index), so any
// sorting network gives exactly the stable order. Rows padded to a power of two with keys that
// sort after everything.
//  - rows up to kSharedMax: in shared memory, one block for one row (or several short ones);
//  - longer rows: the same network in global memory, one launch per stage.
#include "common.cuh"
#include "launch_reduce.h"

namespace candle::cuda_k {
namespace {

constexpr uint32_t kPad = 0xffffffffu;
constexpr int64_t kSharedMax = 8192;
constexpr int kSortThreads = 512;

template <typename V>
__device__ __forceinline__ bool nan_of(V v) {
  if constexpr (std::is_floating_point_v<V>)
    return v != v;
  else
    return false;
}

// The CPU's "less": a < b, NaN the largest.
template <typename V>
__device__ __forceinline__ bool lessv(V a, V b) {
  return a < b || (!nan_of(a) && nan_of(b));
}

// Whether key (av, ai) goes before (bv, bi).
template <typename V>
__device__ __forceinline__ bool before(V av, uint32_t ai, V bv, uint32_t bi, bool asc) {
  if (ai == kPad) return false;
  if (bi == kPad) return true;
  const bool lt = asc ? lessv(av, bv) : lessv(bv, av);
  const bool gt = asc ? lessv(bv, av) : lessv(av, bv);
  return lt || (!gt && ai < bi);
}

inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The shared-memory bytes of `total` keys, rounded up so that the indices after them are aligned.
template <typename V>
__host__ __device__ inline size_t key_bytes(int total) {
  return (sizeof(V) * static_cast<size_t>(total) + 15) / 16 * 16;
}

// One compare-exchange of the bitonic network: elements i < l of a block of p2 keys, stage k.
template <typename V, typename I>
__device__ __forceinline__ void bitonic_exchange(V* keys, uint32_t* idx, I i, I l, I p2, I k, bool asc) {
  if (l <= i) return;
  const bool up = ((i & (p2 - 1)) & k) == 0;
  const V a = keys[i], b = keys[l];
  const uint32_t ia = idx[i], ib = idx[l];
  const bool sw = up ? before(b, ib, a, ia, asc) : before(a, ia, b, ib, asc);
  if (sw) {
    keys[i] = b;
    keys[l] = a;
    idx[i] = ib;
    idx[l] = ia;
  }
}

template <typename S>
__global__ void __launch_bounds__(kSortThreads)
    sort_shared_k(const S* __restrict__ x, uint32_t* __restrict__ out, int64_t rows, int64_t len, int p2,
                  int rpb, bool asc) {
  pdl_entry();
  using V = compute_t<S>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int total = p2 * rpb;
  V* keys = reinterpret_cast<V*>(smem);
  uint32_t* idx = reinterpret_cast<uint32_t*>(smem + key_bytes<V>(total));
  for (int64_t row0 = static_cast<int64_t>(blockIdx.x) * rpb; row0 < rows;
       row0 += static_cast<int64_t>(gridDim.x) * rpb) {
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int64_t row = row0 + i / p2, j = i % p2;
      if (row < rows && j < len) {
        keys[i] = load(x[row * len + j]);
        idx[i] = static_cast<uint32_t>(j);
      } else {
        keys[i] = V(0);
        idx[i] = kPad;
      }
    }
    __syncthreads();
    for (int k = 2; k <= p2; k *= 2) {
      for (int j = k / 2; j > 0; j /= 2) {
        for (int i = threadIdx.x; i < total; i += blockDim.x) {
          bitonic_exchange(keys, idx, i, i ^ j, p2, k, asc);
        }
        __syncthreads();
      }
    }
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int64_t row = row0 + i / p2, j = i % p2;
      if (row < rows && j < len) out[row * len + j] = idx[i];
    }
    __syncthreads();
  }
}

template <typename S>
__global__ void sort_init_k(const S* __restrict__ x, compute_t<S>* __restrict__ keys,
                            uint32_t* __restrict__ idx, int64_t rows, int64_t len, int64_t p2) {
  pdl_entry();
  CANDLE_GRID_LOOP(int64_t, i, rows * p2) {
    const int64_t row = i / p2, j = i - row * p2;
    if (j < len) {
      keys[i] = load(x[row * len + j]);
      idx[i] = static_cast<uint32_t>(j);
    } else {
      keys[i] = compute_t<S>(0);
      idx[i] = kPad;
    }
  }
}

template <typename V>
__global__ void sort_step_k(V* __restrict__ keys, uint32_t* __restrict__ idx, int64_t n, int64_t p2,
                            int64_t k, int64_t j, bool asc) {
  pdl_entry();
  CANDLE_GRID_LOOP(int64_t, i, n) { bitonic_exchange(keys, idx, i, i ^ j, p2, k, asc); }
}

__global__ void sort_out_k(const uint32_t* __restrict__ idx, uint32_t* __restrict__ out, int64_t rows,
                           int64_t len, int64_t p2) {
  pdl_entry();
  CANDLE_GRID_LOOP(int64_t, i, rows * len) {
    const int64_t row = i / len, j = i - row * len;
    out[i] = idx[row * p2 + j];
  }
}

}  // namespace

size_t arg_sort_scratch_bytes(Dt, int64_t rows, int64_t len) {
  const int64_t p2 = pow2_at_least(len);
  if (p2 <= kSharedMax) return 0;
  return static_cast<size_t>(rows) * static_cast<size_t>(p2) * 12;  // 8-byte keys at most, then u32 indices
}

cudaError_t arg_sort(Dt dt, const void* x, uint32_t* out, int64_t rows, int64_t len, bool ascending,
                     void* scratch, cudaStream_t s) {
  if (rows * len == 0) return cudaSuccess;
  return with_dtype(dt, [&]<typename S>() {
    using V = compute_t<S>;
    auto px = static_cast<const S*>(x);
    const int64_t p2 = pow2_at_least(len);
    if (p2 <= kSharedMax) {
      int rpb = static_cast<int>(2048 / p2);
      if (rpb < 1) rpb = 1;
      if (rpb > rows) rpb = static_cast<int>(rows);
      const int total = static_cast<int>(p2) * rpb;
      const size_t bytes = key_bytes<V>(total) + static_cast<size_t>(total) * sizeof(uint32_t);
      if (bytes > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(sort_shared_k<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
        if (e != cudaSuccess) return e;
      }
      int threads = total < kSortThreads ? total : kSortThreads;
      threads = (threads + 31) / 32 * 32;
      int64_t blocks = (rows + rpb - 1) / rpb;
      if (blocks > 65535LL * 32) blocks = 65535LL * 32;
      sort_shared_k<S><<<static_cast<unsigned>(blocks), threads, bytes, s>>>(
          px, out, rows, len, static_cast<int>(p2), rpb, ascending);
      return cudaGetLastError();
    }
    const int64_t n = rows * p2;
    auto keys = static_cast<V*>(scratch);
    auto idx = reinterpret_cast<uint32_t*>(static_cast<char*>(scratch) + static_cast<size_t>(n) * 8);
    sort_init_k<S><<<grid_for(n), kBlock, 0, s>>>(px, keys, idx, rows, len, p2);
    for (int64_t k = 2; k <= p2; k *= 2) {
      for (int64_t j = k / 2; j > 0; j /= 2) {
        sort_step_k<V><<<grid_for(n), kBlock, 0, s>>>(keys, idx, n, p2, k, j, ascending);
      }
    }
    sort_out_k<<<grid_for(rows * len), kBlock, 0, s>>>(idx, out, rows, len, p2);
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
