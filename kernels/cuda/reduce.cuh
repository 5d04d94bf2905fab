// The reduction kernels, shared by reduce_sum.cu / reduce_minmax.cu / reduce_arg.cu.
//
// Work items are (output o, chunk c) pairs: chunk c of output o folds the reduced positions
// [c * chunk_len, (c + 1) * chunk_len). A group of G threads (1, a warp or a block) takes one
// item: its lanes stride over the chunk, then combine in a fixed tree. With one chunk the
// group writes the output; else it writes a partial and finish_k merges each output's
// partials (in a fixed tree too), so the bytes never depend on timing.
//  - G = 1 ("column" walk): the innermost reduced dim is strided but the last kept dim is
//    contiguous (sum over dim 0 of [4096, 4096]): consecutive threads take consecutive outputs,
//    so every step of their loops reads one coalesced row. Few outputs: R is cut into chunks.
//    Also for short rows (R <= 16).
//  - G = 32: rows up to 1024 elements, one warp each.
//  - G = 256: longer rows; few outputs (sum of everything) are cut into chunks so that the
//    whole GPU works.
#pragma once

#include <algorithm>
#include <limits>

#include "common.cuh"
#include "launch_reduce.h"

namespace candle::cuda_k::red {

template <typename V>
__device__ __forceinline__ bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>)
    return v != v;
  else
    return false;
}

// Shuffles a value of up to 8 bytes down the warp.
template <typename X>
__device__ __forceinline__ X shfl_down(X v, int d) {
  static_assert(sizeof(X) <= 8);
  unsigned long long u = 0;
  memcpy(&u, &v, sizeof(X));
  u = __shfl_down_sync(0xffffffffu, u, d);
  X r;
  memcpy(&r, &u, sizeof(X));
  return r;
}

// ---- reducers: P is a partial, elem() makes one from an element at reduced index r,
// combine() merges two (the left one covering earlier positions), finish() gives the output ----

template <typename S>
struct SumAcc {
  using type =
      std::conditional_t<std::is_same_v<compute_t<S>, float> && !std::is_same_v<S, float>, float, double>;
};

template <typename S>
struct SumR {
  using T = S;
  static constexpr bool kInt = is_int_v<S>;
  using P = std::conditional_t<kInt, unsigned long long, typename SumAcc<S>::type>;
  using Out = S;
  static constexpr int kAhead = 1;
  static constexpr bool kAssociative = false;
  __device__ static P init() { return P(0); }
  __device__ static P elem(S v, int64_t) {
    if constexpr (kInt)
      return static_cast<P>(static_cast<long long>(v));  // wraps modulo 2^64: exact modulo the dtype
    else
      return static_cast<P>(load(v));
  }
  __device__ static P combine(P a, P b) { return a + b; }
  __device__ static P shfl(P p, int d) { return shfl_down(p, d); }
  __device__ static Out finish(P p) {
    if constexpr (kInt)
      return static_cast<S>(p);
    else
      return store<S>(p);
  }
};

template <typename V, bool IsMax>
__device__ __forceinline__ V identity() {
  if constexpr (std::is_floating_point_v<V>)
    return IsMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else
    return IsMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
}

template <typename S, bool IsMax>
struct MinMaxR {
  using T = S;
  using P = compute_t<S>;
  using Out = S;
  static constexpr int kAhead = 8;
  static constexpr bool kAssociative = true;
  __device__ static P init() { return identity<P, IsMax>(); }
  __device__ static P elem(S v, int64_t) { return load(v); }
  // a NaN wins (the first one met, so its bits are an input's): a when it is NaN or not beaten,
  // else b (a NaN b included: every compare with it is false)
  __device__ static P combine(P a, P b) { return (is_nan(a) || (IsMax ? a >= b : a <= b)) ? a : b; }
  __device__ static P shfl(P p, int d) { return shfl_down(p, d); }
  __device__ static Out finish(P p) { return store<S>(p); }
};

template <typename V>
struct ArgP {
  V v;
  uint32_t i;
};

// The best value, the lowest index among equals; any NaN beats a number (lowest index among
// NaNs): a total order, so the tree's shape does not matter.
template <typename S, bool IsMax>
struct ArgR {
  using T = S;
  using V = compute_t<S>;
  using P = ArgP<V>;
  using Out = uint32_t;
  static constexpr int kAhead = 8;
  static constexpr bool kAssociative = true;
  __device__ static P init() { return P{identity<V, IsMax>(), 0xffffffffu}; }
  __device__ static P elem(S v, int64_t r) { return P{load(v), static_cast<uint32_t>(r)}; }
  __device__ static P combine(P a, P b) {
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return b.i < a.i ? b : a;
      return an ? a : b;
    }
    if (IsMax ? b.v > a.v : b.v < a.v) return b;
    if (a.v == b.v && b.i < a.i) return b;
    return a;
  }
  __device__ static P shfl(P p, int d) { return P{shfl_down(p.v, d), __shfl_down_sync(0xffffffffu, p.i, d)}; }
  __device__ static Out finish(P p) { return p.i; }
};

// ---- the plan ----

struct Plan {
  int G = 1;
  int64_t chunks = 1, chunk_len = 0;
  unsigned blocks = 1;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether the column walk can take 16-byte packs of outputs (reduce_cols_k; the pointer's
// alignment is checked at launch): one kept dim of stride 1, one reduced dim, both whole packs.
inline bool cols_packable(const ReduceArgs& a, size_t esize) {
  const int64_t V = static_cast<int64_t>(16 / esize);
  return a.kept.rank == 1 && a.red.rank == 1 && a.kept.stride[0] == 1 && a.red.stride[0] != 1 &&
         a.n_out % V == 0 && a.red.stride[0] % V == 0;
}

// esize: the input's element size.
inline Plan plan(const ReduceArgs& a, int sm_count, size_t esize) {
  Plan p;
  const int64_t sms = sm_count > 0 ? sm_count : 1;
  const bool column = a.red.rank > 0 && a.red.stride[a.red.rank - 1] != 1 && a.kept.rank > 0 &&
                      a.kept.stride[a.kept.rank - 1] == 1 && a.kept.size[a.kept.rank - 1] >= 8;
  if (column || a.R <= 16) {
    p.G = 1;
    const int64_t target = sms * 2048;  // threads
    // the packed walk runs a thread per pack of outputs: more chunks keep the card busy
    const int64_t threads =
        column && cols_packable(a, esize) ? a.n_out / static_cast<int64_t>(16 / esize) : a.n_out;
    if (column && threads < target && a.R >= 128)
      p.chunks = std::min(ceil_div(target, threads), ceil_div(a.R, 64));
  } else if (a.R <= 1024) {
    p.G = 32;
  } else {
    p.G = 256;
    const int64_t target = sms * 8;  // blocks
    if (a.n_out < target)
      p.chunks = std::min<int64_t>(std::min(ceil_div(target, a.n_out), ceil_div(a.R, 8192)), 8192);
  }
  if (p.chunks < 1) p.chunks = 1;
  p.chunk_len = ceil_div(a.R, p.chunks);
  // chunks start on 16-element boundaries, so that every chunk of a contiguous row takes packs
  if (p.chunks > 1 && p.G > 1) p.chunk_len = ceil_div(p.chunk_len, 16) * 16;
  p.chunks = ceil_div(a.R, p.chunk_len);
  const int64_t items = a.n_out * p.chunks;
  const int64_t per_block = kBlock / p.G;
  int64_t blocks = ceil_div(items, per_block);
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;
  p.blocks = static_cast<unsigned>(blocks < 1 ? 1 : blocks);
  return p;
}

constexpr size_t kMaxPartialBytes = 16;

// ---- kernels ----

__device__ __forceinline__ int64_t offset_of(int64_t i, const RedDims& d) {
  if (d.rank == 1) return i * d.stride[0];
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    const int64_t q = i / d.size[k];
    off += (i - q * d.size[k]) * d.stride[k];
    i = q;
  }
  return off;
}

// The partial of V consecutive elements starting at reduced index r. An associative reducer
// (min / max / arg: the leftmost NaN, the lowest index among equals) folds them as a tree, which
// gives the same result with a short dependency chain; a sum folds them in order.
template <typename Red, int V>
__device__ __forceinline__ typename Red::P fold_pack(const typename Red::T* v, int64_t r) {
  if constexpr (Red::kAssociative) {
    typename Red::P t[V];
#pragma unroll
    for (int j = 0; j < V; ++j) t[j] = Red::elem(v[j], r + j);
#pragma unroll
    for (int w = 1; w < V; w *= 2)
#pragma unroll
      for (int j = 0; j + w < V; j += 2 * w) t[j] = Red::combine(t[j], t[j + w]);
    return t[0];
  } else {
    typename Red::P p = Red::elem(v[0], r);
#pragma unroll
    for (int j = 1; j < V; ++j) p = Red::combine(p, Red::elem(v[j], r + j));
    return p;
  }
}

template <typename Red, int G>
__global__ void __launch_bounds__(kBlock)
    reduce_k(const typename Red::T* __restrict__ x, ReduceArgs a, int64_t chunks, int64_t chunk_len,
             typename Red::P* __restrict__ part, typename Red::Out* __restrict__ out) {
  pdl_entry();
  using P = typename Red::P;
  constexpr int kGroups = kBlock / G;
  constexpr int kWarps = G / 32;
  __shared__ P warp_part[kWarps > 1 ? kWarps : 1];
  const int64_t items = a.n_out * chunks;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / G; w < items;
       w += static_cast<int64_t>(gridDim.x) * kGroups) {
    const int64_t o = w % a.n_out, c = w / a.n_out;
    const typename Red::T* xo = x + offset_of(o, a.kept);
    const int64_t r0 = c * chunk_len, r1 = a.R < r0 + chunk_len ? a.R : r0 + chunk_len;
    P p = Red::init();
    int64_t r = r0 + lane;
    if constexpr (G >= 32) {
      // a contiguous row: lanes take 16-byte packs (one load for 4 floats or 8 halves)
      using T = typename Red::T;
      constexpr int V = static_cast<int>(16 / sizeof(T));
      struct alignas(16) Pk {
        T v[V];
      };
      if (a.red.rank == 1 && a.red.stride[0] == 1 && reinterpret_cast<uintptr_t>(xo + r0) % 16 == 0) {
        const Pk* px = reinterpret_cast<const Pk*>(xo + r0);
        const int64_t np = (r1 - r0) / V;
        constexpr int U = Red::kAhead > 1 ? 2 : 1;
        int64_t q = lane;
        for (; q + (U - 1) * G < np; q += U * G) {
          Pk v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) v[u] = px[q + u * G];
#pragma unroll
          for (int u = 0; u < U; ++u) p = Red::combine(p, fold_pack<Red, V>(v[u].v, r0 + (q + u * G) * V));
        }
        for (; q < np; q += G) p = Red::combine(p, fold_pack<Red, V>(px[q].v, r0 + q * V));
        r = r0 + np * V + lane;
      }
    }
    if constexpr (Red::kAhead > 1) {
      // kAhead loads issued before their values are folded in: a reducer whose combine is a chain
      // of compares and selects (max, arg-max) still keeps loads in flight. (Sums are faster
      // without: the compiler's own unrolling keeps them at the bandwidth.)
      for (; r + (Red::kAhead - 1) * G < r1; r += Red::kAhead * G) {
        typename Red::T v[Red::kAhead];
#pragma unroll
        for (int u = 0; u < Red::kAhead; ++u) v[u] = xo[offset_of(r + u * G, a.red)];
#pragma unroll
        for (int u = 0; u < Red::kAhead; ++u) p = Red::combine(p, Red::elem(v[u], r + u * G));
      }
    }
    for (; r < r1; r += G) p = Red::combine(p, Red::elem(xo[offset_of(r, a.red)], r));
    if constexpr (G >= 32) {
#pragma unroll
      for (int d = 16; d > 0; d /= 2) {
        P q = Red::shfl(p, d);
        p = Red::combine(p, q);
      }
    }
    if constexpr (kWarps > 1) {
      if (lane % 32 == 0) warp_part[lane / 32] = p;
      __syncthreads();
      if (lane == 0) {
#pragma unroll
        for (int k = 1; k < kWarps; ++k) p = Red::combine(p, warp_part[k]);
      }
      __syncthreads();
    }
    if (lane == 0) {
      if (chunks == 1)
        out[o] = Red::finish(p);
      else
        part[o * chunks + c] = p;
    }
  }
}

// The column walk over packs: a thread takes V consecutive outputs (one 16-byte load per reduced
// step; V independent accumulators) and keeps eight steps' loads in flight. Each output still folds
// its positions in order, so the results are those of the one-output-per-thread walk. For a kept
// dim of stride 1 and a reduced dim of stride s, both whole packs (sum over dim 0 of [R, n]).
template <typename Red>
__global__ void __launch_bounds__(kBlock)
    reduce_cols_k(const typename Red::T* __restrict__ x, int64_t n_out, int64_t R, int64_t rs, int64_t chunks,
                  int64_t chunk_len, typename Red::P* __restrict__ part,
                  typename Red::Out* __restrict__ out) {
  pdl_entry();
  using T = typename Red::T;
  using P = typename Red::P;
  constexpr int V = static_cast<int>(16 / sizeof(T));
  constexpr int U = 8;
  struct alignas(16) Pk {
    T v[V];
  };
  const int64_t groups = n_out / V, items = groups * chunks;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x; w < items;
       w += static_cast<int64_t>(gridDim.x) * kBlock) {
    const int64_t g = w % groups, c = w / groups;
    const T* xo = x + g * V;
    const int64_t r0 = c * chunk_len, r1 = R < r0 + chunk_len ? R : r0 + chunk_len;
    P p[V];
#pragma unroll
    for (int j = 0; j < V; ++j) p[j] = Red::init();
    int64_t r = r0;
    for (; r + U - 1 < r1; r += U) {
      Pk v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = *reinterpret_cast<const Pk*>(xo + (r + u) * rs);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) p[j] = Red::combine(p[j], Red::elem(v[u].v[j], r + u));
    }
    for (; r < r1; ++r) {
      const Pk v = *reinterpret_cast<const Pk*>(xo + r * rs);
#pragma unroll
      for (int j = 0; j < V; ++j) p[j] = Red::combine(p[j], Red::elem(v.v[j], r));
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t o = g * V + j;
      if (chunks == 1)
        out[o] = Red::finish(p[j]);
      else
        part[o * chunks + c] = p[j];
    }
  }
}

// One warp per output: merges its partials (in chunk order per lane, then a fixed tree).
template <typename Red>
__global__ void __launch_bounds__(kBlock) finish_k(const typename Red::P* __restrict__ part, int64_t n_out,
                                                   int64_t chunks, typename Red::Out* __restrict__ out) {
  pdl_entry();
  using P = typename Red::P;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * (kBlock / 32) + threadIdx.x / 32; o < n_out;
       o += static_cast<int64_t>(gridDim.x) * (kBlock / 32)) {
    P p = Red::init();
    for (int64_t c = lane; c < chunks; c += 32) p = Red::combine(p, part[o * chunks + c]);
#pragma unroll
    for (int d = 16; d > 0; d /= 2) {
      P q = Red::shfl(p, d);
      p = Red::combine(p, q);
    }
    if (lane == 0) out[o] = Red::finish(p);
  }
}

template <typename Red>
cudaError_t run(const void* x, const ReduceArgs& a, void* out, int sm_count, void* scratch, cudaStream_t s) {
  static_assert(sizeof(typename Red::P) <= kMaxPartialBytes);
  using T = typename Red::T;
  using P = typename Red::P;
  using Out = typename Red::Out;
  const Plan p = plan(a, sm_count, sizeof(T));
  auto px = static_cast<const T*>(x);
  auto po = static_cast<Out*>(out);
  auto part = static_cast<P*>(scratch);
  constexpr int64_t V = static_cast<int64_t>(16 / sizeof(T));
  if (p.G == 1 && cols_packable(a, sizeof(T)) && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    int64_t blocks = ceil_div(a.n_out / V * p.chunks, kBlock);
    if (blocks > 65535LL * 32) blocks = 65535LL * 32;
    reduce_cols_k<Red><<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(px, a.n_out, a.R, a.red.stride[0],
                                                                        p.chunks, p.chunk_len, part, po);
  } else {
    switch (p.G) {
      case 1: reduce_k<Red, 1><<<p.blocks, kBlock, 0, s>>>(px, a, p.chunks, p.chunk_len, part, po); break;
      case 32: reduce_k<Red, 32><<<p.blocks, kBlock, 0, s>>>(px, a, p.chunks, p.chunk_len, part, po); break;
      default: reduce_k<Red, 256><<<p.blocks, kBlock, 0, s>>>(px, a, p.chunks, p.chunk_len, part, po); break;
    }
  }
  if (p.chunks > 1) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    int64_t blocks = ceil_div(a.n_out, kBlock / 32);
    if (blocks > 65535LL * 32) blocks = 65535LL * 32;
    finish_k<Red><<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(part, a.n_out, p.chunks, po);
  }
  return cudaGetLastError();
}

// Per-family launchers (reduce_sum.cu, reduce_minmax.cu, reduce_arg.cu).
cudaError_t reduce_sum(Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count, void* scratch,
                       cudaStream_t s);
cudaError_t reduce_minmax(bool is_max, Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count,
                          void* scratch, cudaStream_t s);
cudaError_t reduce_arg(bool is_max, Dt dt, const void* x, const ReduceArgs& a, void* out, int sm_count,
                       void* scratch, cudaStream_t s);

}  // namespace candle::cuda_k::red
