// conv2d / conv1d as an implicit GEMM: per (image, group), OUT[co, pixel] = W[co, k] x X[k, pixel]
// with k = (ci, ky, kx), the X tile gathered straight from the input through its strides
// (padding reads 0), no im2col buffer. A block computes a 64 x 64 output tile in 16-deep k slices
// staged in shared memory; each of its 256 threads holds a 4 x 4 micro-tile (rows ty + 16 i,
// pixels tx + 16 j: conflict-free shared reads, coalesced stores). The epilogue adds the bias and
// applies the activation in the compute type, then rounds once.
#include "conv_common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

constexpr int BM = 64, BN = 64, BK = 16, kThreads = 256;

template <typename S, typename I>
__global__ void __launch_bounds__(kThreads)
    conv2d_k(const S* __restrict__ x, const S* __restrict__ w, const int64_t* __restrict__ taps,
             const S* __restrict__ bias, S* __restrict__ out, ConvArgs a) {
  pdl_entry();
  using C = compute_t<S>;
  __shared__ C As[BK][BM];  // weights, As[k][m]
  __shared__ C Bs[BK][BN];  // gathered input, Bs[k][pixel]
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const I ow = static_cast<I>(a.ow), ih = static_cast<I>(a.ih), iw = static_cast<I>(a.iw);
  const I N = static_cast<I>(a.oh) * ow, K = static_cast<I>(a.ci_g * a.kh * a.kw);
  const I co_g = static_cast<I>(a.co_g), groups = static_cast<I>(a.groups);
  const I n0 = static_cast<I>(blockIdx.x) * BN, m0 = static_cast<I>(blockIdx.y) * BM;
  // this thread's input pixel (one column of the B tile) and the rows it loads
  const int ln = tid % BN, lk = tid / BN;
  const I pn = n0 + ln;
  const bool pn_ok = pn < N;
  const I oy = pn_ok ? pn / ow : 0, ox = pn_ok ? pn - (pn / ow) * ow : 0;
  const I iy0 = oy * static_cast<I>(a.s_h) - static_cast<I>(a.pad_h);
  const I ix0 = ox * static_cast<I>(a.s_w) - static_cast<I>(a.pad_w);
  const I pix_off = iy0 * static_cast<I>(a.sh) + ix0 * static_cast<I>(a.sw);
  // the weight elements it loads: row wm, columns wk .. wk + 3 of the slice
  const int wm = tid / 4, wk = (tid % 4) * 4;
  const I nbg = static_cast<I>(a.b) * groups;
  for (I bg = blockIdx.z; bg < nbg; bg += gridDim.z) {
    const I bi = bg / groups, g = bg - (bg / groups) * groups;
    const S* xg = x + bi * static_cast<I>(a.sb) + g * static_cast<I>(a.ci_g) * static_cast<I>(a.sc);
    const bool wrow_ok = m0 + wm < co_g;
    const S* wrow = w + (g * co_g + m0 + (wrow_ok ? wm : 0)) * K;
    C acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = C(0);
    for (I k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const I gk = k0 + wk + j;
        As[wk + j][wm] = (wrow_ok && gk < K) ? load(wrow[gk]) : C(0);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int kk = lk + 4 * j;
        const I gk = k0 + kk;
        C v = C(0);
        if (pn_ok && gk < K) {
          const I dy = static_cast<I>(taps[3 * gk + 1]), dx = static_cast<I>(taps[3 * gk + 2]);
          const I iy = iy0 + dy, ix = ix0 + dx;
          if (iy >= 0 && iy < ih && ix >= 0 && ix < iw) v = load(xg[static_cast<I>(taps[3 * gk]) + pix_off]);
        }
        Bs[kk][ln] = v;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        C av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) av[i] = As[k][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) bv[j] = Bs[k][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
    const I co_total = groups * co_g;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const I m = m0 + ty + 16 * i;
      if (m >= co_g) continue;
      const I co = g * co_g + m;
      const C bv = a.has_bias ? load(bias[co * static_cast<I>(a.bias_st)]) : C(0);
      S* orow = out + (bi * co_total + co) * N;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const I n = n0 + tx + 16 * j;
        if (n >= N) continue;
        C v = acc[i][j];
        if (a.has_bias) v = v + bv;
        if (a.act >= 0) v = conv::activate(a.act, v);
        orow[n] = store<S>(v);
      }
    }
  }
}

}  // namespace

cudaError_t conv2d(Dt dt, const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                   const ConvArgs& a, cudaStream_t s) {
  const int64_t N = a.oh * a.ow;
  if (N == 0 || a.co_g == 0 || a.b * a.groups == 0) return cudaSuccess;
  const int64_t tiles = (N + BN - 1) / BN, mt = (a.co_g + BM - 1) / BM;
  if (tiles > 0x7fffffffLL || mt > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(mt),
                  static_cast<unsigned>(std::min<int64_t>(a.b * a.groups, 65535)));
  auto run = [&]<typename S>() -> cudaError_t {
    auto px = static_cast<const S*>(x);
    auto pw = static_cast<const S*>(w);
    auto pb = static_cast<const S*>(bias);
    auto po = static_cast<S*>(out);
    if (a.wide)
      conv2d_k<S, int64_t><<<grid, kThreads, 0, s>>>(px, pw, taps, pb, po, a);
    else
      conv2d_k<S, int32_t><<<grid, kThreads, 0, s>>>(px, pw, taps, pb, po, a);
    return cudaGetLastError();
  };
  switch (dt) {
    case Dt::F32: return run.template operator()<float>();
    case Dt::F16: return run.template operator()<__half>();
    case Dt::BF16: return run.template operator()<__nv_bfloat16>();
    case Dt::F64: return run.template operator()<double>();
    case Dt::F8E4M3: return run.template operator()<f8>();
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace candle::cuda_k
