// candle::nn's last-dim row ops: softmax, rms_norm, layer_norm (semantics of src/cpu/nn_fused.cpp).
// A warp per row for rows up to kWarpRowMax elements (8 rows per block), else a block per row;
// sums and maxima by warp shuffles (and shared memory across a block's warps), in the compute
// type (f32 for the small floats, f64 for f64). Rows are read two or three times (the passes of
// the CPU's kernels); the element-wise steps round like the CPU's (no FMA contraction).
#include "launch_nn.h"
#include "nn_common.cuh"
#include "qacts.cuh"

namespace candle::cuda_k {
namespace {

using namespace nn;

constexpr int64_t kWarpRowMax = 1024;
constexpr int kRowsPerBlock = 8;
constexpr int kCache = 8;  // rms_norm: row elements a thread keeps in registers
// The most threads a row's block has: the rms_norm kernels' registers for a cached row do not fit
// 1024 threads a block (cudaErrorLaunchOutOfResources for rows past 8192 elements), and
// __launch_bounds__ holds every row kernel to what 512 threads may use.
constexpr int kMaxThreads = 512;

// The sum (max when `is_max`) of v over the threads of a row: the warp (kWarp) or the block.
template <bool kWarp, bool is_max, typename C>
__device__ __forceinline__ C reduce_row(C v, C* red) {
  v = is_max ? warp_max(v) : warp_sum(v);
  if constexpr (kWarp) {
    return v;
  } else {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();  // the previous reduction's reads of red are done
    if (lane == 0) red[w] = v;
    __syncthreads();
    const C ident = is_max ? -std::numeric_limits<C>::infinity() : C(0);
    C r = lane < nw ? red[lane] : ident;
    return is_max ? warp_max(r) : warp_sum(r);  // every warp forms the total itself
  }
}

template <typename S, RowOp OP, bool kWarp>
__global__ void __launch_bounds__(kMaxThreads)
    row_kernel(const S* __restrict__ x, int64_t n_rows, int64_t d, int64_t rs, const S* __restrict__ a,
               int64_t as, const S* __restrict__ b, int64_t bs, float eps, S* __restrict__ y,
               const __grid_constant__ ActsQ8Out q8) {
  pdl_entry();
  using C = compute_t<S>;
  __shared__ C red[32];
  const int64_t lane = kWarp ? (threadIdx.x & 31) : threadIdx.x;
  const int64_t nthr = kWarp ? 32 : blockDim.x;
  const int64_t step = kWarp ? int64_t(blockDim.x >> 5) * gridDim.x : int64_t(gridDim.x);
  int64_t row = kWarp ? int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5) : int64_t(blockIdx.x);
  const C n = static_cast<C>(d);
  for (; row < n_rows; row += step) {
    const S* xr = x + row * rs;
    S* yr = y + row * d;
    // AddRmsNorm: the row is x + h (h = b's row), rounded to S as the add rounds it; the sums go to
    // the first half of y, the normed row to the second
    S* ys = yr;
    if constexpr (OP == RowOp::AddRmsNorm) yr = y + (n_rows + row) * d;
    auto xval = [&](int64_t i) -> C {
      if constexpr (OP == RowOp::AddRmsNorm) {
        const S sum = store<S>(add_rn(load(xr[i]), load(b[row * bs + i])));
        ys[i] = sum;
        return load(sum);
      } else {
        return load(xr[i]);
      }
    };
    // the norms' rows quantized for a quantized matmul (q8 asks for it: a decode step's few rows),
    // read back as written (rounded to S) once the row's threads have written them
    auto quantize_row = [&] {
      if constexpr ((OP == RowOp::RmsNorm || OP == RowOp::AddRmsNorm) &&
                    (std::is_same_v<S, float> || std::is_same_v<S, __half> ||
                     std::is_same_v<S, __nv_bfloat16>)) {
        if (q8.q[0] == nullptr && q8.q[1] == nullptr) return;
        if constexpr (kWarp)
          __syncwarp();
        else
          __syncthreads();
        const uint64_t warp = kWarp ? 0 : threadIdx.x >> 5, warps = kWarp ? 1 : blockDim.x >> 5;
        qacts::warp_share([&](uint64_t i) { return static_cast<float>(load(yr[i])); },
                          static_cast<uint64_t>(d), static_cast<uint64_t>(row * d), warp, warps,
                          threadIdx.x & 31, q8, true);
      }
    };
    if constexpr (OP == RowOp::Softmax) {
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t i = lane; i < d; i += nthr) {
        const C v = load(xr[i]);
        m = v > m ? v : m;
      }
      m = reduce_row<kWarp, true>(m, red);
      // a NaN anywhere makes the sum NaN and so every output, as on the CPU; a row of -inf
      // gives exp(NaN) everywhere, as the CPU's (-inf) - (-inf)
      C s = 0;
      for (int64_t i = lane; i < d; i += nthr) s += exp_c(sub_rn(load(xr[i]), m));
      s = reduce_row<kWarp, false>(s, red);
      for (int64_t i = lane; i < d; i += nthr) yr[i] = store<S>(div_rn(exp_c(sub_rn(load(xr[i]), m)), s));
    } else {
      if constexpr (OP == RowOp::RmsNorm || OP == RowOp::AddRmsNorm) {
        // a row of up to kCache elements a thread (a decode step's hidden state): x and alpha are
        // read once, all loads in flight together, and kept in registers for the output (the
        // same operations in the same order as the loops below)
        if (d <= nthr * kCache) {
          C xv[kCache], av[kCache], q = 0;
          [[maybe_unused]] C hv[kCache];
#pragma unroll
          for (int u = 0; u < kCache; ++u) {
            const int64_t i = lane + u * nthr;
            xv[u] = i < d ? load(xr[i]) : C(0);
            if constexpr (OP == RowOp::AddRmsNorm) hv[u] = i < d ? load(b[row * bs + i]) : C(0);
            av[u] = i < d ? static_cast<C>(load(a[i * as])) : C(0);
          }
          if constexpr (OP == RowOp::AddRmsNorm) {
            // the sums after every load is in flight (a store between them would order the loads
            // after it)
#pragma unroll
            for (int u = 0; u < kCache; ++u) {
              const int64_t i = lane + u * nthr;
              const S sum = store<S>(add_rn(xv[u], hv[u]));
              if (i < d) ys[i] = sum;
              xv[u] = i < d ? load(sum) : C(0);
            }
          }
#pragma unroll
          for (int u = 0; u < kCache; ++u)
            if (lane + u * nthr < d) q = add_rn(q, mul_rn(xv[u], xv[u]));
          const C denom = sqrt_rn(add_rn(div_rn(reduce_row<kWarp, false>(q, red), n), static_cast<C>(eps)));
#pragma unroll
          for (int u = 0; u < kCache; ++u) {
            const int64_t i = lane + u * nthr;
            if (i < d) yr[i] = store<S>(mul_rn(div_rn(xv[u], denom), av[u]));
          }
          quantize_row();
          continue;
        }
      }
      C mean = 0;
      if constexpr (OP == RowOp::LayerNorm) {
        C s = 0;
        for (int64_t i = lane; i < d; i += nthr) s += load(xr[i]);
        mean = div_rn(reduce_row<kWarp, false>(s, red), n);
      }
      C q = 0;
      for (int64_t i = lane; i < d; i += nthr) {
        const C dv = sub_rn(xval(i), mean);  // (AddRmsNorm: writes the sum, read back below)
        q = add_rn(q, mul_rn(dv, dv));
      }
      const C var = div_rn(reduce_row<kWarp, false>(q, red), n);
      const C denom = sqrt_rn(add_rn(var, static_cast<C>(eps)));
      for (int64_t i = lane; i < d; i += nthr) {
        const C xn = div_rn(sub_rn(OP == RowOp::AddRmsNorm ? load(ys[i]) : load(xr[i]), mean), denom);
        C v = mul_rn(xn, static_cast<C>(load(a[i * as])));
        if constexpr (OP == RowOp::LayerNorm) v = add_rn(v, static_cast<C>(load(b[i * bs])));
        yr[i] = store<S>(v);
      }
      quantize_row();
    }
  }
}

template <typename S, RowOp OP>
cudaError_t launch_rows(const S* x, int64_t n_rows, int64_t d, int64_t rs, const S* a, int64_t as, const S* b,
                        int64_t bs, float eps, S* y, const ActsQ8Out& q8, cudaStream_t s) {
  constexpr int64_t kMaxGrid = 65535LL * 32;
  if (d <= kWarpRowMax) {
    int64_t blocks = (n_rows + kRowsPerBlock - 1) / kRowsPerBlock;
    blocks = blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks);
    row_kernel<S, OP, true><<<static_cast<unsigned>(blocks), 32 * kRowsPerBlock, 0, s>>>(
        x, n_rows, d, rs, a, as, b, bs, eps, y, q8);
  } else {
    int threads = 128;  // about 8 elements a thread, 128..kMaxThreads threads
    while (threads < kMaxThreads && int64_t(threads) * 8 < d) threads *= 2;
    const int64_t blocks = n_rows > kMaxGrid ? kMaxGrid : (n_rows < 1 ? 1 : n_rows);
    row_kernel<S, OP, false>
        <<<static_cast<unsigned>(blocks), threads, 0, s>>>(x, n_rows, d, rs, a, as, b, bs, eps, y, q8);
  }
  return cudaGetLastError();
}

// silu(x) * up as the two element-wise ops give it: silu rounded to S as the unary kernel rounds it,
// then the product rounded to S.
template <typename S, typename C>
__device__ __forceinline__ S silu_times(C x, C up) {
  const C sx = load(store<S>(x / (C(1) + exp(-x))));
  return store<S>(sx * up);
}

// I: the index type, uint32_t where every offset fits (a 64-bit division per element is slow)
template <typename S, typename I>
__global__ void silu_mul_k(const S* __restrict__ g, I gs, const S* __restrict__ u, I us, I n_rows, I d,
                           S* __restrict__ out) {
  pdl_entry();
  using C = compute_t<S>;
  CANDLE_GRID_LOOP(I, i, n_rows * d) {
    const int64_t r = i / d, c = i - r * d;
    out[i] = silu_times<S, C>(load(g[r * gs + c]), load(u[r * us + c]));
  }
}

// silu_mul over a few rows that are also quantized (q8; d a multiple of 32): a warp per unit of
// 256 values where the blocks of 256 are asked for (a lane's 8 adjacent ones, all their loads in
// flight together), else per block of 32 (more warps: LLaMA-7B's 11008 values in 344),
// each value made, stored and quantized as it was stored.
template <typename S>
__global__ void silu_mul_q8_k(const S* __restrict__ g, int64_t gs, const S* __restrict__ u, int64_t us,
                              int64_t n_rows, int64_t d, S* __restrict__ out,
                              const __grid_constant__ ActsQ8Out q8) {
  pdl_entry();
  using C = compute_t<S>;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  const uint64_t warp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31;
  const uint64_t n = static_cast<uint64_t>(n_rows * d);
  if (q8.q[1]) {  // (d % 256 == 0)
    for (uint64_t un = warp; un < n / 256; un += warps) {
      const int64_t i0 = static_cast<int64_t>(un * 256 + lane * 8), r = i0 / d,
                    c = i0 - r * d;  // (d % 8 == 0)
      C gv[8], uv[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) gv[j] = load(g[r * gs + c + j]), uv[j] = load(u[r * us + c + j]);
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const S y = silu_times<S, C>(gv[j], uv[j]);
        out[i0 + j] = y;
        v[j] = static_cast<float>(load(y));
      }
      qacts::unit256(v, lane, un, q8);
    }
  } else {
    for (uint64_t b = warp; b < n / 32; b += warps) {
      const int64_t i = static_cast<int64_t>(b * 32 + lane), r = i / d, c = i - r * d;
      const S y = silu_times<S, C>(load(g[r * gs + c]), load(u[r * us + c]));
      out[i] = y;
      qacts::block32(static_cast<float>(load(y)), lane, b, q8.q[0], q8.d[0], q8.sums[0]);
    }
  }
}

}  // namespace

cudaError_t silu_mul(Dt dt, const void* gate, int64_t g_stride, const void* up, int64_t u_stride,
                     int64_t n_rows, int64_t d, void* out, cudaStream_t s, const ActsQ8Out& q8) {
  if (n_rows <= 0 || d <= 0) return cudaSuccess;
  if (q8.any()) {
    if (d % 32 != 0 || (q8.q[1] && d % 256 != 0)) return cudaErrorInvalidValue;
    auto run = [&]<typename S>() -> cudaError_t {
      const int64_t n = n_rows * d, threads = q8.q[1] ? n / 8 : n;  // 32 a unit of 256 or block of 32
      silu_mul_q8_k<S><<<grid_for(threads), kBlock, 0, s>>>(static_cast<const S*>(gate), g_stride,
                                                            static_cast<const S*>(up), u_stride, n_rows, d,
                                                            static_cast<S*>(out), q8);
      return cudaGetLastError();
    };
    switch (dt) {
      case Dt::F32: return run.template operator()<float>();
      case Dt::F16: return run.template operator()<__half>();
      case Dt::BF16: return run.template operator()<__nv_bfloat16>();
      default: return cudaErrorInvalidValue;
    }
  }
  const int64_t reach = (n_rows - 1) * (g_stride > u_stride ? g_stride : u_stride) + d;
  const bool small = reach < int64_t(INT32_MAX) && n_rows * d < int64_t(INT32_MAX);
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    const auto gp = static_cast<const S*>(gate);
    const auto up_p = static_cast<const S*>(up);
    const auto op = static_cast<S*>(out);
    if (small)
      silu_mul_k<S, uint32_t><<<grid_for(n_rows * d), kBlock, 0, s>>>(
          gp, static_cast<uint32_t>(g_stride), up_p, static_cast<uint32_t>(u_stride),
          static_cast<uint32_t>(n_rows), static_cast<uint32_t>(d), op);
    else
      silu_mul_k<S, int64_t>
          <<<grid_for(n_rows * d), kBlock, 0, s>>>(gp, g_stride, up_p, u_stride, n_rows, d, op);
    return cudaGetLastError();
  });
}

cudaError_t row_op(RowOp op, Dt dt, const void* x, int64_t n_rows, int64_t d, int64_t row_stride,
                   const void* alpha, int64_t a_st, const void* beta, int64_t b_st, float eps, void* out,
                   cudaStream_t s, const ActsQ8Out& q8) {
  if (n_rows <= 0 || d <= 0) return cudaSuccess;
  if (q8.any() &&
      (d % 32 != 0 || (q8.q[1] && d % 256 != 0) || (op != RowOp::RmsNorm && op != RowOp::AddRmsNorm) ||
       (dt != Dt::F32 && dt != Dt::F16 && dt != Dt::BF16)))
    return cudaErrorInvalidValue;
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    const S* xp = static_cast<const S*>(x);
    const S* ap = static_cast<const S*>(alpha);
    const S* bp = static_cast<const S*>(beta);
    S* yp = static_cast<S*>(out);
    switch (op) {
      case RowOp::Softmax:
        return launch_rows<S, RowOp::Softmax>(xp, n_rows, d, row_stride, ap, a_st, bp, b_st, eps, yp, q8, s);
      case RowOp::RmsNorm:
        return launch_rows<S, RowOp::RmsNorm>(xp, n_rows, d, row_stride, ap, a_st, bp, b_st, eps, yp, q8, s);
      case RowOp::LayerNorm:
        return launch_rows<S, RowOp::LayerNorm>(xp, n_rows, d, row_stride, ap, a_st, bp, b_st, eps, yp, q8,
                                                s);
      case RowOp::AddRmsNorm:
        return launch_rows<S, RowOp::AddRmsNorm>(xp, n_rows, d, row_stride, ap, a_st, bp, b_st, eps, yp, q8,
                                                 s);
    }
    return cudaErrorInvalidValue;
  });
}

}  // namespace candle::cuda_k
