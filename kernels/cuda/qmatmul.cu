// The quantized matrix-vector product of decoding (m <= kQmvMaxRows activation rows): the
// activations are quantized on the GPU to 8-bit blocks as the CPU quantizes them (quantize_acts_q8: one
// scale per 32, or per 256 for the K-quants, stored per 32), then one warp per
// weight row (one to four warps for long rows) walks the row's items (quant.cuh: a block, or the units of a
// super-block that share quant bytes), lane by lane so that a warp's loads cover contiguous bytes, decodes
// each item once and takes its integer dot products (__dp4a) with all m activation rows. Per unit of 32:
//   y += dx * (d * sum_h sc_h * sum_{i in h} q_i xq_i - dm * sum_h mn_h * sum_{i in h} xq_i)
// over its two halves h of 16, in f32.
#include "common.cuh"
#include "launch_quant.h"
#include "matvec.cuh"
#include "quant.cuh"

namespace candle::cuda_k {
namespace {

using namespace quant;

// The CPU's activation quantizers (src/quantized/qmatmul_cpu.cpp), with the same float operations
// so that the same activations give the same quants and scales: one warp per block of 32 for the
// weight types of 32 (the Q8_0 form: d = amax / 127 rounded to f16, q = round(x * (127 / amax)),
// ties to even), one per block of 256 for those of 256 (the Q8_K form: the first element of the
// largest magnitude, vmax, maps to -127: q = round(x * (-127 / vmax)), d = vmax / -127, written for
// each of its 8 blocks of 32); the quants clamped to [-127, 127], NaN to 0, and the sums of each 16.
template <typename S>
__global__ void quantize_acts_k(const S* __restrict__ x, uint64_t blocks, int8_t* __restrict__ q,
                                float* __restrict__ d, int32_t* __restrict__ sums) {
  pdl_entry();
  const unsigned lane = threadIdx.x % 32;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  for (uint64_t b = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; b < blocks;
       b += warps) {
    const float v = load(x[b * 32 + lane]);
    float amax = fabsf(v);
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const int qi = max(-127, min(127, __float2int_rn(v * id)));
    q[b * 32 + lane] = static_cast<int8_t>(qi);
    int s = qi;
    for (int o = 8; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);  // within each half-warp
    if (lane % 16 == 0) sums[b * 2 + lane / 16] = s;
    if (lane == 0) d[b] = __half2float(__float2half_rn(amax / 127.0f));
  }
}

// Lane l of the warp of a block of 256 takes elements 8l..8l+7 (block of 32 l / 4, half l / 2).
template <typename S>
__global__ void quantize_acts_256_k(const S* __restrict__ x, uint64_t blocks, int8_t* __restrict__ q,
                                    float* __restrict__ d, int32_t* __restrict__ sums) {
  pdl_entry();
  const unsigned lane = threadIdx.x % 32;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  for (uint64_t b = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; b < blocks;
       b += warps) {
    const S* xb = x + b * 256 + lane * 8;
    float v[8], amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[i] = load(xb[i]);
      amax = fmaxf(amax, fabsf(v[i]));
    }
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    // the first element of magnitude amax: the smallest index among the lanes' first ones
    int first = 256;
#pragma unroll
    for (int i = 7; i >= 0; --i)
      if (fabsf(v[i]) == amax) first = static_cast<int>(lane) * 8 + i;
    for (int o = 16; o > 0; o /= 2) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    float vmax = 0.0f;
    if (amax > 0.0f) vmax = __shfl_sync(0xffffffffu, v[first % 8], first / 8);
    const float iscale = amax > 0.0f ? -127.0f / vmax : 0.0f;
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int qi = max(-127, min(127, __float2int_rn(v[i] * iscale)));
      q[b * 256 + lane * 8 + i] = static_cast<int8_t>(qi);
      s += qi;
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    if (lane % 2 == 0) sums[b * 16 + lane / 2] = s;
    if (lane % 4 == 0) d[b * 8 + lane / 4] = amax > 0.0f ? vmax / -127.0f : 0.0f;
  }
}

constexpr int kWarpsPerBlock = 4;
// items a lane decodes before their dot products (4 was slower on the H200: 297.7 against 309.7
// tokens/s on the LLaMA-7B shape, Q4_0, and 643 against 687 on the TinyLlama Q4_K_M)
constexpr int kItemsInFlight = 2;

// W warps share a row (W = 1, 2 or 4): a long row's items are spread over W * 32 lanes, so that
// each lane has about one or two in flight rather than several one after another, and the W
// partial sums are added in shared memory in warp order. A lane decodes P items (their loads in
// flight together) before it takes their dot products.
template <uint32_t T, int M, int W, int P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qmatvec_k(const uint8_t* __restrict__ w, uint64_t row_bytes, int n, int k, int m,
              const int8_t* __restrict__ xq, const float* __restrict__ xd, const int32_t* __restrict__ xs,
              float* __restrict__ y) {
  using Q = QT<T>;
  constexpr int kU = Q::kUnits, kItemElems = 32 * kU, kItemsPerBlock = Q::kQK / kItemElems;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int row = static_cast<int>(blockIdx.x) * (kWarpsPerBlock / W) + warp / W;
  const bool valid = row < n;  // (no early return: the W > 1 sum meets at a barrier)
  const int lane = static_cast<int>(threadIdx.x % 32) + 32 * (warp % W);
  const uint8_t* wr = w + static_cast<uint64_t>(valid ? row : 0) * row_bytes;
  const int items = valid ? k / kItemElems : 0, units = k / 32;
  // The lane's first two items brought into L2 while the kernel before this one still runs (under
  // a programmatic launch, pdl_entry() waits for it): a prefetch is no load, so even weights the
  // previous kernel were writing would be read after the wait, from the coherent L2.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (int it = lane, i = 0; i < 2 && it < items; it += 32 * W, ++i)
    asm volatile(
        "prefetch.global.L2 [%0];" ::"l"(wr + static_cast<uint64_t>(it / kItemsPerBlock) * Q::kSize));
#endif
  pdl_entry();
  float acc[M];
#pragma unroll
  for (int j = 0; j < M; ++j) acc[j] = 0.0f;
  for (int it0 = lane; it0 < items; it0 += 32 * W * P) {
    Item<kU> q[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int it = it0 + 32 * W * p;
      if (p == 0 || it < items)
        Q::decode(wr + static_cast<uint64_t>(it / kItemsPerBlock) * Q::kSize, it % kItemsPerBlock, q[p]);
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int it = it0 + 32 * W * p;
      if (p > 0 && it >= items) break;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int unit = it * kU + u;
#pragma unroll
        for (int j = 0; j < M; ++j) {
          if (j >= m) break;
          const int8_t* xp = xq + static_cast<uint64_t>(j) * k + static_cast<uint64_t>(unit) * 32;
          const int4 a0 = *reinterpret_cast<const int4*>(xp), a1 = *reinterpret_cast<const int4*>(xp + 16);
          const Item<kU>& qp = q[p];
          const int s0 =
              __dp4a(qp.q[u][3], a0.w,
                     __dp4a(qp.q[u][2], a0.z, __dp4a(qp.q[u][1], a0.y, __dp4a(qp.q[u][0], a0.x, 0))));
          const int s1 =
              __dp4a(qp.q[u][7], a1.w,
                     __dp4a(qp.q[u][6], a1.z, __dp4a(qp.q[u][5], a1.y, __dp4a(qp.q[u][4], a1.x, 0))));
          const uint64_t xb = static_cast<uint64_t>(j) * units + unit;
          float v = qp.d * static_cast<float>(qp.sc[u][0] * s0 + qp.sc[u][1] * s1);
          if constexpr (Q::kHasMin)
            v -= qp.dm * static_cast<float>(qp.mn[u][0] * xs[2 * xb] + qp.mn[u][1] * xs[2 * xb + 1]);
          acc[j] += xd[xb] * v;
        }
      }
    }
  }
  finish_rows<M, W, kWarpsPerBlock>(acc, warp, lane, valid, m, n, row, y);
}

template <uint32_t T, int M, int W, int P>
cudaError_t launch_qmv_w(const void* w, size_t row_bytes, size_t n, size_t k, size_t m, const int8_t* q,
                         const float* d, const int32_t* sums, float* y, cudaStream_t s) {
  constexpr size_t kRows = kWarpsPerBlock / W;
  const auto blocks = static_cast<unsigned>((n + kRows - 1) / kRows);
  qmatvec_k<T, M, W, P><<<blocks, kWarpsPerBlock * 32, 0, s>>>(static_cast<const uint8_t*>(w), row_bytes,
                                                               static_cast<int>(n), static_cast<int>(k),
                                                               static_cast<int>(m), q, d, sums, y);
  return cudaGetLastError();
}

// Warps a row by the row's items (warps_per_row).
template <uint32_t T, int M>
cudaError_t launch_qmv(const void* w, size_t row_bytes, size_t n, size_t k, size_t m, const int8_t* q,
                       const float* d, const int32_t* sums, float* y, cudaStream_t s) {
  const size_t items = k / (32 * QT<T>::kUnits);
  const int wr = warps_per_row(items, n);
  if (wr == 4) return launch_qmv_w<T, M, 4, kItemsInFlight>(w, row_bytes, n, k, m, q, d, sums, y, s);
  if (wr == 2) return launch_qmv_w<T, M, 2, kItemsInFlight>(w, row_bytes, n, k, m, q, d, sums, y, s);
  return launch_qmv_w<T, M, 1, kItemsInFlight>(w, row_bytes, n, k, m, q, d, sums, y, s);
}

}  // namespace

cudaError_t quantize_acts_q8(Dt dt, const void* x, size_t m, size_t k, size_t group, int8_t* q, float* d,
                             int32_t* sums, cudaStream_t s) {
  if (group != 32 && group != 256) return cudaErrorInvalidValue;
  const uint64_t blocks = static_cast<uint64_t>(m) * (k / group);
  if (blocks == 0) return cudaSuccess;
  const auto grid = grid_for(static_cast<int64_t>(blocks) * 32);
  auto run = [&](auto* xs) {
    if (group == 32)
      quantize_acts_k<<<grid, kBlock, 0, s>>>(xs, blocks, q, d, sums);
    else
      quantize_acts_256_k<<<grid, kBlock, 0, s>>>(xs, blocks, q, d, sums);
  };
  switch (dt) {
    case Dt::F32: run(static_cast<const float*>(x)); break;
    case Dt::F16: run(static_cast<const __half*>(x)); break;
    case Dt::BF16: run(static_cast<const __nv_bfloat16*>(x)); break;
    default: return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

cudaError_t qmatvec(uint32_t ggml_type, const void* w, size_t row_bytes, size_t n, size_t k, size_t m,
                    const int8_t* q, const float* d, const int32_t* sums, float* y, cudaStream_t s) {
  if (n == 0 || m == 0) return cudaSuccess;
  if (m > kQmvMaxRows || n > INT32_MAX || k > INT32_MAX) return cudaErrorInvalidValue;
  return with_qtype<true>(ggml_type, [&]<uint32_t T>() {
    if (m == 1) return launch_qmv<T, 1>(w, row_bytes, n, k, m, q, d, sums, y, s);
    if (m == 2) return launch_qmv<T, 2>(w, row_bytes, n, k, m, q, d, sums, y, s);
    if (m <= 4) return launch_qmv<T, 4>(w, row_bytes, n, k, m, q, d, sums, y, s);
    return launch_qmv<T, 8>(w, row_bytes, n, k, m, q, d, sums, y, s);
  });
}

}  // namespace candle::cuda_k
