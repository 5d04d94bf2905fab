// Seeded random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11), counter-based, so thread t computes block (counter + t) on its own: the numbers of
// a draw depend on the seed and the device's running counter only, never on the launch shape.
#include "common.cuh"

namespace candle::cuda_k {
namespace {

struct U4 {
  uint32_t x, y, z, w;
};

__device__ __forceinline__ U4 philox(uint64_t seed, uint64_t ctr) {
  uint32_t c0 = static_cast<uint32_t>(ctr), c1 = static_cast<uint32_t>(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
    const uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// [0, 1) with 24 (f32) or 53 (f64) random bits.
__device__ __forceinline__ float unit_f32(uint32_t b) {
  return static_cast<float>(b >> 8) * 5.9604644775390625e-8f;
}
__device__ __forceinline__ double unit_f64(uint32_t a, uint32_t b) {
  const uint64_t v = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(v & ((1ull << 53) - 1)) * 1.1102230246251565e-16;
}

// Each thread fills 4 elements (f64: 2) of block (counter + t).
template <typename S>
__global__ void uniform_k(S* __restrict__ out, uint64_t n, uint64_t seed, uint64_t counter, double lo,
                          double up) {
  pdl_entry();
  constexpr int per = std::is_same_v<S, double> ? 2 : 4;
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t * per < n;
       t += static_cast<uint64_t>(blockDim.x) * gridDim.x) {
    const U4 r = philox(seed, counter + t);
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < per; ++j) {
      const uint64_t i = t * per + j;
      if (i >= n) break;
      if constexpr (std::is_same_v<S, double>) {
        out[i] = lo + (up - lo) * unit_f64(w[2 * j], w[2 * j + 1]);
      } else {
        const float flo = static_cast<float>(lo), fspan = static_cast<float>(up - lo);
        out[i] = store<S>(flo + fspan * unit_f32(w[j]));
      }
    }
  }
}

// Box-Muller: each pair of uniforms gives two normals.
template <typename S>
__global__ void normal_k(S* __restrict__ out, uint64_t n, uint64_t seed, uint64_t counter, double mean,
                         double sd) {
  pdl_entry();
  constexpr int per = std::is_same_v<S, double> ? 2 : 4;
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t * per < n;
       t += static_cast<uint64_t>(blockDim.x) * gridDim.x) {
    const U4 r = philox(seed, counter + t);
    if constexpr (std::is_same_v<S, double>) {
      const double u1 = 1.0 - unit_f64(r.x, r.y), u2 = unit_f64(r.z, r.w);  // u1 in (0, 1]
      const double rad = sqrt(-2.0 * log(u1));
      double sn, cs;
      sincospi(2.0 * u2, &sn, &cs);
      const double v[2] = {rad * cs, rad * sn};
      for (int j = 0; j < 2; ++j)
        if (t * per + j < n) out[t * per + j] = mean + sd * v[j];
    } else {
      const float w[4] = {unit_f32(r.x), unit_f32(r.y), unit_f32(r.z), unit_f32(r.w)};
      float v[4];
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const float u1 = 1.0f - w[2 * p], u2 = w[2 * p + 1];
        const float rad = sqrtf(-2.0f * logf(u1));
        float sn, cs;
        sincospif(2.0f * u2, &sn, &cs);
        v[2 * p] = rad * cs;
        v[2 * p + 1] = rad * sn;
      }
      const float fm = static_cast<float>(mean), fs = static_cast<float>(sd);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (t * per + j < n) out[t * per + j] = store<S>(fm + fs * v[j]);
    }
  }
}

unsigned rand_grid(size_t n, int per) { return grid_for(static_cast<int64_t>((n + per - 1) / per)); }

}  // namespace

cudaError_t rand_uniform(Dt dt, void* out, size_t n, uint64_t seed, uint64_t counter, double lo, double up,
                         cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    if constexpr (is_int_v<S>) {
      return cudaErrorNotSupported;
    } else {
      constexpr int per = std::is_same_v<S, double> ? 2 : 4;
      uniform_k<S><<<rand_grid(n, per), kBlock, 0, s>>>(static_cast<S*>(out), n, seed, counter, lo, up);
      return cudaGetLastError();
    }
  });
}

cudaError_t rand_normal(Dt dt, void* out, size_t n, uint64_t seed, uint64_t counter, double mean,
                        double stddev, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    if constexpr (is_int_v<S>) {
      return cudaErrorNotSupported;
    } else {
      constexpr int per = std::is_same_v<S, double> ? 2 : 4;
      normal_k<S><<<rand_grid(n, per), kBlock, 0, s>>>(static_cast<S*>(out), n, seed, counter, mean, stddev);
      return cudaGetLastError();
    }
  });
}

}  // namespace candle::cuda_k
