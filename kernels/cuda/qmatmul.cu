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
#include "qacts.cuh"
#include "quant.cuh"

namespace candle::cuda_k {
namespace {

using namespace quant;

// The activation quantizers (qacts.cuh: the CPU's operations), one warp per block of 32 or unit of 256.
template <typename S>
__global__ void quantize_acts_k(const S* __restrict__ x, uint64_t elems,
                                const __grid_constant__ ActsQ8Out o) {
  pdl_entry();
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  const uint64_t warp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  qacts::warp_share([&](uint64_t i) { return static_cast<float>(load(x[i])); }, elems, 0, warp, warps,
                    threadIdx.x % 32, o, false);
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
  const uint64_t elems = static_cast<uint64_t>(m) * k;
  if (elems == 0) return cudaSuccess;
  if (elems % group != 0) return cudaErrorInvalidValue;
  ActsQ8Out o;
  const int f = group == 32 ? 0 : 1;
  o.q[f] = q;
  o.d[f] = d;
  o.sums[f] = sums;
  // a warp per unit of 256 for the blocks of 256, else per block of 32
  const auto grid = grid_for(static_cast<int64_t>(group == 256 ? elems / 8 : elems));
  auto run = [&](auto* xs) { quantize_acts_k<<<grid, kBlock, 0, s>>>(xs, elems, o); };
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
