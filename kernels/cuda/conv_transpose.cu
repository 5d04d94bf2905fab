// conv_transpose2d / conv_transpose1d: one thread per output element gathering its taps: output
// (oy, ox) takes input (iy, ix) through kernel tap (ky, kx) where iy * s_h = oy + pad_h - ky * d_h
// (and the same along x), summed over the group's input channels, then taps in row-major order.
#include "common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

template <typename S, typename I>
__global__ void conv_transpose2d_k(const S* __restrict__ x, const S* __restrict__ w, S* __restrict__ out,
                                   ConvArgs a, I total) {
  pdl_entry();
  using C = compute_t<S>;
  const I ow = static_cast<I>(a.ow), oh = static_cast<I>(a.oh), co_g = static_cast<I>(a.co_g);
  const I co_total = co_g * static_cast<I>(a.groups), ci_g = static_cast<I>(a.ci_g);
  const I kh = static_cast<I>(a.kh), kw = static_cast<I>(a.kw), ih = static_cast<I>(a.ih),
          iw = static_cast<I>(a.iw);
  const I s_h = static_cast<I>(a.s_h), s_w = static_cast<I>(a.s_w), d_h = static_cast<I>(a.d_h),
          d_w = static_cast<I>(a.d_w);
  CANDLE_GRID_LOOP(I, i, total) {
    I t = i;
    const I ox = t % ow;
    t /= ow;
    const I oy = t % oh;
    t /= oh;
    const I co = t % co_total, bi = t / co_total;
    const I g = co / co_g, c = co - g * co_g;
    const I ty0 = oy + static_cast<I>(a.pad_h), tx0 = ox + static_cast<I>(a.pad_w);
    C acc = C(0);
    for (I cl = 0; cl < ci_g; ++cl) {
      const I ci = g * ci_g + cl;
      const S* xp = x + bi * static_cast<I>(a.sb) + ci * static_cast<I>(a.sc);
      const S* wp = w + (ci * co_g + c) * kh * kw;
      for (I ky = 0; ky < kh; ++ky) {
        const I ty = ty0 - ky * d_h;
        if (ty < 0) break;  // decreasing in ky
        const I iy = ty / s_h;
        if (iy * s_h != ty || iy >= ih) continue;
        for (I kx = 0; kx < kw; ++kx) {
          const I tx = tx0 - kx * d_w;
          if (tx < 0) break;
          const I ix = tx / s_w;
          if (ix * s_w != tx || ix >= iw) continue;
          acc += load(xp[iy * static_cast<I>(a.sh) + ix * static_cast<I>(a.sw)]) * load(wp[ky * kw + kx]);
        }
      }
    }
    out[i] = store<S>(acc);
  }
}

}  // namespace

cudaError_t conv_transpose2d(Dt dt, const void* x, const void* w, void* out, const ConvArgs& a,
                             cudaStream_t s) {
  const int64_t total = a.b * a.groups * a.co_g * a.oh * a.ow;
  if (total == 0) return cudaSuccess;
  auto run = [&]<typename S>() -> cudaError_t {
    auto px = static_cast<const S*>(x);
    auto pw = static_cast<const S*>(w);
    auto po = static_cast<S*>(out);
    if (a.wide)
      conv_transpose2d_k<S, int64_t><<<grid_for(total), kBlock, 0, s>>>(px, pw, po, a, total);
    else
      conv_transpose2d_k<S, int32_t>
          <<<grid_for(total), kBlock, 0, s>>>(px, pw, po, a, static_cast<int32_t>(total));
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
