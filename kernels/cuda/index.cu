// Indexing kernels: the ids check, index_select, gather, scatter / scatter_add / index_add.
//
// Ids of any index dtype are read through load_id (a uniform switch on the dtype, which keeps
// the instantiations to one per element type). The dtype's maximum is "no index". check_ids
// runs first: it records the first out-of-range position in the caller's `bad` word (as
// ~position, with atomicMax: the lowest position wins) and a one-thread kernel writes the
// context's fault words from it (up to 4096 ids, one block does both in one launch); the op
// kernels read `bad` and write nothing when it is set, so a failed scatter leaves its destination
// as it was, as the CPU does. Scatters run one thread per (left, right) column of the
// destination, looping over the source positions in order: the last write wins and additions
// happen in the CPU's order.
#include "common.cuh"
#include "launch_reduce.h"

namespace candle::cuda_k {
namespace {

__device__ __forceinline__ int64_t load_id(const void* ids, Dt idt, int64_t i, bool& skip) {
  switch (idt) {
    case Dt::U8: {
      const uint8_t v = static_cast<const uint8_t*>(ids)[i];
      skip = v == 0xffu;
      return v;
    }
    case Dt::U32: {
      const uint32_t v = static_cast<const uint32_t*>(ids)[i];
      skip = v == 0xffffffffu;
      return v;
    }
    case Dt::I16: {
      const int16_t v = static_cast<const int16_t*>(ids)[i];
      skip = v == 32767;
      return v;
    }
    case Dt::I32: {
      const int32_t v = static_cast<const int32_t*>(ids)[i];
      skip = v == 2147483647;
      return v;
    }
    default: {
      const int64_t v = static_cast<const int64_t*>(ids)[i];
      skip = v == 9223372036854775807LL;
      return v;
    }
  }
}

__global__ void check_k(Dt idt, const void* __restrict__ ids, int64_t n, int64_t limit,
                        unsigned long long* __restrict__ bad) {
  pdl_entry();
  CANDLE_GRID_LOOP(int64_t, i, n) {
    bool skip = false;
    const int64_t v = load_id(ids, idt, i, skip);
    if (!skip && (v < 0 || v >= limit)) atomicMax(bad, ~static_cast<unsigned long long>(i));
  }
}

// `bad` (~position of the first bad id, or 0) into the fault words {tag, position, id low, id high}
__device__ void report_bad(Dt idt, const void* __restrict__ ids, uint32_t tag, uint32_t* fault,
                           unsigned long long bad) {
  if (bad == 0) return;
  const int64_t pos = static_cast<int64_t>(~bad);
  bool skip = false;
  const uint64_t raw = static_cast<uint64_t>(load_id(ids, idt, pos, skip));
  if (atomicCAS(fault, 0u, tag) != 0u) return;  // an earlier fault is reported first
  volatile uint32_t* w = fault;
  w[1] = static_cast<uint32_t>(pos);
  w[2] = static_cast<uint32_t>(raw);
  w[3] = static_cast<uint32_t>(raw >> 32);
  __threadfence_system();
}

__global__ void report_k(Dt idt, const void* __restrict__ ids, uint32_t tag, uint32_t* fault,
                         const unsigned long long* __restrict__ bad) {
  pdl_entry();
  report_bad(idt, ids, tag, fault, *bad);
}

// ids and destination columns one block checks and scatters (a decode step's KV write, a rope row),
// with kCheckBlock threads: a LLaMA-7B step writes 32 heads x 128 = 4096 keys and values with ids of
// the same shape, and one block of 256 threads took 14 us for it (16 dependent loads a thread)
constexpr int64_t kSmallIds = 4096;
constexpr unsigned kCheckBlock = 1024;
constexpr int64_t kFewIds = 64;

// check_k and report_k in one block, for the few ids of a decode step (a KV write, a rope row):
// the block finds the lowest bad position, then thread 0 writes `bad` (0 when every id fits, so no
// memset is needed) and reports it. Every thread of the block calls it; all get the same answer.
__device__ bool block_check_ids(Dt idt, const void* __restrict__ ids, int64_t n, int64_t limit, uint32_t tag,
                                uint32_t* fault, unsigned long long* __restrict__ bad) {
  __shared__ unsigned long long first;
  if (threadIdx.x == 0) first = 0;
  __syncthreads();
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    bool skip = false;
    const int64_t v = load_id(ids, idt, i, skip);
    if (!skip && (v < 0 || v >= limit)) atomicMax(&first, ~static_cast<unsigned long long>(i));
  }
  __syncthreads();
  const unsigned long long f = first;
  if (threadIdx.x == 0) {
    *bad = f;
    report_bad(idt, ids, tag, fault, f);
  }
  return f == 0;
}

__global__ void check_small_k(Dt idt, const void* __restrict__ ids, int64_t n, int64_t limit, uint32_t tag,
                              uint32_t* fault, unsigned long long* __restrict__ bad) {
  pdl_entry();
  (void)block_check_ids(idt, ids, n, limit, tag, fault, bad);
}

// Index arithmetic in I: uint32_t when the source and output fit, else int64_t.
template <typename I, typename E>
__global__ void index_select_k(const E* __restrict__ src, Dt idt, const void* __restrict__ ids,
                               E* __restrict__ out, I left, I src_dim, I n, I right,
                               const unsigned long long* __restrict__ bad) {
  pdl_entry();
  if (*bad) return;
  CANDLE_GRID_LOOP(I, i, left * n * right) {
    const I t = i / right, r = i - t * right;
    const I l = t / n, k = t - l * n;
    bool skip = false;
    const I id = static_cast<I>(load_id(ids, idt, k, skip));
    out[i] = skip ? E(0) : src[(l * src_dim + id) * right + r];
  }
}

template <typename I, typename E>
__global__ void gather_k(const E* __restrict__ src, Dt idt, const void* __restrict__ ids, E* __restrict__ out,
                         I left, I src_dim, I n, I right, const unsigned long long* __restrict__ bad) {
  pdl_entry();
  if (*bad) return;
  CANDLE_GRID_LOOP(I, i, left * n * right) {
    const I t = i / right, r = i - t * right;
    const I l = t / n;
    bool skip = false;
    const I id = static_cast<I>(load_id(ids, idt, i, skip));
    out[i] = skip ? E(0) : src[(l * src_dim + id) * right + r];
  }
}

// Whether every index of a [left, src_dim, right] source and a [left, n, right] output fits u32 math.
inline bool fits_u32(int64_t left, int64_t src_dim, int64_t n, int64_t right) {
  const int64_t m = src_dim > n ? src_dim : n;
  return left * m * right < int64_t(INT32_MAX);  // (a grid-stride step past the end still fits)
}

template <typename S>
__device__ __forceinline__ S add_of(S a, S b) {
  if constexpr (is_int_v<S>) {
    using U = std::make_unsigned_t<S>;
    return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return store<S>(load(a) + load(b));
  }
}

// kCheck: one block that checks the ids first (block_check_ids with chk) instead of reading `bad`
template <typename S, bool kAdd, bool kCheck = false>
__global__ void __launch_bounds__(kCheckBlock)
    scatter_k(S* dst, const S* src, Dt idt, const void* __restrict__ ids, int64_t left, int64_t dst_dim,
              int64_t n, int64_t right, bool per_elem, const unsigned long long* __restrict__ bad,
              IdCheckArgs chk = {}) {
  pdl_entry();
  if constexpr (kCheck) {
    if (!block_check_ids(idt, ids, chk.n, chk.limit, chk.tag, chk.fault, chk.bad)) return;
  } else if (*bad) {
    return;
  }
#pragma unroll 4
  CANDLE_GRID_LOOP(int64_t, t, left * right) {
    const int64_t l = t / right, r = t - l * right;
    S* d = dst + l * dst_dim * right + r;
    const S* sp = src + l * n * right + r;
    for (int64_t k = 0; k < n; ++k) {
      bool skip = false;
      const int64_t id = load_id(ids, idt, per_elem ? (l * n + k) * right + r : k, skip);
      if (skip) continue;
      if constexpr (kAdd)
        d[id * right] = add_of(d[id * right], sp[k * right]);
      else
        d[id * right] = sp[k * right];
    }
  }
}

}  // namespace

cudaError_t check_ids(Dt idt, const void* ids, int64_t n, int64_t limit, uint32_t tag, uint32_t* fault,
                      unsigned long long* bad, cudaStream_t s) {
  if (n <= kSmallIds) {
    check_small_k<<<1, kBlock, 0, s>>>(idt, ids, n, limit, tag, fault, bad);
    return cudaGetLastError();
  }
  cudaError_t e = cudaMemsetAsync(bad, 0, sizeof(unsigned long long), s);
  if (e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  check_k<<<grid_for(n), kBlock, 0, s>>>(idt, ids, n, limit, bad);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  report_k<<<1, 1, 0, s>>>(idt, ids, tag, fault, bad);
  return cudaGetLastError();
}

cudaError_t index_select(size_t esize, Dt idt, const void* src, const void* ids, void* out, int64_t left,
                         int64_t src_dim, int64_t n, int64_t right, const unsigned long long* bad,
                         cudaStream_t s) {
  const int64_t total = left * n * right;
  if (total == 0) return cudaSuccess;
  return with_esize(esize, [&]<typename E>() {
    auto ps = static_cast<const E*>(src);
    auto po = static_cast<E*>(out);
    if (fits_u32(left, src_dim, n, right))
      index_select_k<uint32_t, E><<<grid_for(total), kBlock, 0, s>>>(
          ps, idt, ids, po, static_cast<uint32_t>(left), static_cast<uint32_t>(src_dim),
          static_cast<uint32_t>(n), static_cast<uint32_t>(right), bad);
    else
      index_select_k<int64_t, E>
          <<<grid_for(total), kBlock, 0, s>>>(ps, idt, ids, po, left, src_dim, n, right, bad);
    return cudaGetLastError();
  });
}

cudaError_t gather(size_t esize, Dt idt, const void* src, const void* ids, void* out, int64_t left,
                   int64_t src_dim, int64_t n, int64_t right, const unsigned long long* bad, cudaStream_t s) {
  const int64_t total = left * n * right;
  if (total == 0) return cudaSuccess;
  return with_esize(esize, [&]<typename E>() {
    auto ps = static_cast<const E*>(src);
    auto po = static_cast<E*>(out);
    if (fits_u32(left, src_dim, n, right))
      gather_k<uint32_t, E><<<grid_for(total), kBlock, 0, s>>>(
          ps, idt, ids, po, static_cast<uint32_t>(left), static_cast<uint32_t>(src_dim),
          static_cast<uint32_t>(n), static_cast<uint32_t>(right), bad);
    else
      gather_k<int64_t, E><<<grid_for(total), kBlock, 0, s>>>(ps, idt, ids, po, left, src_dim, n, right, bad);
    return cudaGetLastError();
  });
}

namespace {

// scatter_k over the element types: by size for a set, by dtype for an add. kCheck launches one block.
template <bool kCheck>
cudaError_t launch_scatter(bool add, bool per_elem, Dt dt, Dt idt, void* dst, const void* src,
                           const void* ids, int64_t left, int64_t dst_dim, int64_t n, int64_t right,
                           const unsigned long long* bad, const IdCheckArgs& chk, cudaStream_t s) {
  const int64_t cols = left * right;
  // a few ids (a decode step's one position): every block checks them all itself, so the writes
  // spread over the whole grid and still wait for the verdict (the same in every block)
  const bool one_block = kCheck && chk.n > kFewIds;
  const unsigned grid = one_block ? 1u : grid_for(cols), block = one_block ? kCheckBlock : kBlock;
  if (!add) {
    size_t esize = 1;
    switch (dt) {
      case Dt::U8:
      case Dt::F8E4M3: esize = 1; break;
      case Dt::I16:
      case Dt::BF16:
      case Dt::F16: esize = 2; break;
      case Dt::U32:
      case Dt::I32:
      case Dt::F32: esize = 4; break;
      default: esize = 8; break;
    }
    return with_esize(esize, [&]<typename E>() {
      scatter_k<E, false, kCheck><<<grid, block, 0, s>>>(static_cast<E*>(dst), static_cast<const E*>(src),
                                                         idt, ids, left, dst_dim, n, right, per_elem, bad,
                                                         chk);
      return cudaGetLastError();
    });
  }
  return with_dtype(dt, [&]<typename S>() {
    scatter_k<S, true, kCheck><<<grid, block, 0, s>>>(static_cast<S*>(dst), static_cast<const S*>(src), idt,
                                                      ids, left, dst_dim, n, right, per_elem, bad, chk);
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t scatter_checked(bool add, bool per_elem, Dt dt, Dt idt, void* dst, const void* src,
                            const void* ids, int64_t left, int64_t dst_dim, int64_t n, int64_t right,
                            const IdCheckArgs& chk, cudaStream_t s) {
  const int64_t cols = left * right;
  if (cols == 0 || n == 0 || cols > kSmallIds || chk.n > kSmallIds) {
    const cudaError_t e = check_ids(idt, ids, chk.n, chk.limit, chk.tag, chk.fault, chk.bad, s);
    if (e != cudaSuccess) return e;
    return scatter(add, per_elem, dt, idt, dst, src, ids, left, dst_dim, n, right, chk.bad, s);
  }
  return launch_scatter<true>(add, per_elem, dt, idt, dst, src, ids, left, dst_dim, n, right, nullptr, chk,
                              s);
}

cudaError_t scatter(bool add, bool per_elem, Dt dt, Dt idt, void* dst, const void* src, const void* ids,
                    int64_t left, int64_t dst_dim, int64_t n, int64_t right, const unsigned long long* bad,
                    cudaStream_t s) {
  const int64_t cols = left * right;
  if (cols == 0 || n == 0) return cudaSuccess;
  return launch_scatter<false>(add, per_elem, dt, idt, dst, src, ids, left, dst_dim, n, right, bad, {}, s);
}

}  // namespace candle::cuda_k
