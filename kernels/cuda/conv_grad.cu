// Convolution gradients: the kernel gradient as a per-weight correlation (one block per weight
// element, each thread summing a fixed stride of the (image, position) terms, then a fixed-order
// tree in shared memory: deterministic), and the bias gradient the same way per channel.
#include "common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

constexpr int kRed = 256;

// Adds the block's `v` values in a fixed tree order; thread 0 gets the sum.
template <typename C>
__device__ __forceinline__ C block_sum(C v, C* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int h = kRed / 2; h > 0; h /= 2) {
    if (static_cast<int>(threadIdx.x) < h) sh[threadIdx.x] = sh[threadIdx.x] + sh[threadIdx.x + h];
    __syncthreads();
  }
  return sh[0];
}

template <typename S, typename I>
__global__ void __launch_bounds__(kRed)
    corr_k(const S* __restrict__ A, const S* __restrict__ B, S* __restrict__ out, CorrArgs c, int64_t n_out) {
  pdl_entry();
  using C = compute_t<S>;
  __shared__ C sh[kRed];
  const int64_t khw = c.kh * c.kw, per_a = c.b_g * khw;
  const I pw = static_cast<I>(c.pw), ph = static_cast<I>(c.ph);
  const I terms = static_cast<I>(c.b) * ph * pw;
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    const int64_t a = o / per_a, r = o - a * per_a;
    const int64_t bl = r / khw, kk = r - bl * khw;
    const int64_t ky = kk / c.kw, kx = kk - ky * c.kw;
    const int64_t bc = (a / c.a_g) * c.b_g + bl;
    const int64_t dy = ky * c.d_h - c.pad_h, dx = kx * c.d_w - c.pad_w;
    const S* Aa = A + a * c.asc;
    const S* Bc = B + bc * c.bsc;
    C acc = C(0);
    for (I t = threadIdx.x; t < terms; t += kRed) {
      const I px = t % pw, q = t / pw;
      const I py = q % ph, img = q / ph;
      const int64_t by = static_cast<int64_t>(py) * c.s_h + dy, bx = static_cast<int64_t>(px) * c.s_w + dx;
      if (by < 0 || by >= c.bh || bx < 0 || bx >= c.bw) continue;
      const C av = load(Aa[static_cast<int64_t>(img) * c.asb + static_cast<int64_t>(py) * c.ash +
                           static_cast<int64_t>(px) * c.asw]);
      const C bv = load(Bc[static_cast<int64_t>(img) * c.bsb + by * c.bsh + bx * c.bsw]);
      acc += av * bv;
    }
    const C s = block_sum(acc, sh);
    if (threadIdx.x == 0) out[o] = store<S>(s);
    __syncthreads();
  }
}

template <typename S>
__global__ void __launch_bounds__(kRed)
    bias_k(const S* __restrict__ g, S* __restrict__ out, int64_t b, int64_t c, int64_t r) {
  pdl_entry();
  using C = compute_t<S>;
  __shared__ C sh[kRed];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    C acc = C(0);
    for (int64_t bi = 0; bi < b; ++bi) {
      const S* row = g + (bi * c + ch) * r;
      for (int64_t i = threadIdx.x; i < r; i += kRed) acc += load(row[i]);
    }
    const C s = block_sum(acc, sh);
    if (threadIdx.x == 0) out[ch] = store<S>(s);
    __syncthreads();
  }
}

template <typename Fn>
cudaError_t with_float(Dt dt, Fn&& fn) {
  switch (dt) {
    case Dt::F32: return fn.template operator()<float>();
    case Dt::F16: return fn.template operator()<__half>();
    case Dt::BF16: return fn.template operator()<__nv_bfloat16>();
    case Dt::F64: return fn.template operator()<double>();
    case Dt::F8E4M3: return fn.template operator()<f8>();
    default: return cudaErrorInvalidValue;
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>(n, 1 << 30)); }

}  // namespace

cudaError_t conv_grad_kernel(Dt dt, const void* a, const void* b, void* out, const CorrArgs& c,
                             cudaStream_t s) {
  const int64_t n_out = c.groups * c.a_g * c.b_g * c.kh * c.kw;
  if (n_out == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    auto pa = static_cast<const S*>(a);
    auto pb = static_cast<const S*>(b);
    auto po = static_cast<S*>(out);
    if (c.wide)
      corr_k<S, uint64_t><<<blocks_for(n_out), kRed, 0, s>>>(pa, pb, po, c, n_out);
    else
      corr_k<S, uint32_t><<<blocks_for(n_out), kRed, 0, s>>>(pa, pb, po, c, n_out);
    return cudaGetLastError();
  });
}

cudaError_t conv_bias_grad(Dt dt, const void* g, void* out, int64_t b, int64_t c, int64_t r, cudaStream_t s) {
  if (c == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    bias_k<S><<<blocks_for(c), kRed, 0, s>>>(static_cast<const S*>(g), static_cast<S*>(out), b, c, r);
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
