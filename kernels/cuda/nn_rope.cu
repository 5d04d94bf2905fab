// candle::nn's rotary embeddings (rope, rope_i, rope_thd; semantics of src/cpu/nn_fused.cpp): one
// thread per rotated pair, x / cos / sin read through their strides, the output dense. Each
// output is x0 c - x1 s or x0 s + x1 c rounded per operation as the CPU does, so f32 results are
// the CPU's bytes.
#include "launch_nn.h"
#include "nn_common.cuh"

namespace candle::cuda_k {
namespace {

using namespace nn;

template <typename S, RopeKind K, typename I>
__global__ void rope_kernel(const S* __restrict__ x, const S* __restrict__ cs, const S* __restrict__ sn,
                            RopeGeo g, S* __restrict__ y, I pairs) {
  pdl_entry();
  using C = compute_t<S>;
  const I d1 = static_cast<I>(g.dims[1]), d2 = static_cast<I>(g.dims[2]), d = static_cast<I>(g.dims[3]);
  const I half = d / 2;
  CANDLE_GRID_LOOP(I, p, pairs) {
    const I i = p % half, r = p / half;
    const I i2 = r % d2, r1 = r / d2;
    const I i1 = r1 % d1, bi = r1 / d1;
    const I t = K == RopeKind::HalvesThd ? i1 : i2;
    const I e0 = K == RopeKind::Interleaved ? 2 * i : i;
    const I e1 = K == RopeKind::Interleaved ? 2 * i + 1 : i + half;
    const I xb = bi * static_cast<I>(g.xs[0]) + i1 * static_cast<I>(g.xs[1]) + i2 * static_cast<I>(g.xs[2]);
    const I xs3 = static_cast<I>(g.xs[3]);
    const C x0 = load(x[xb + e0 * xs3]), x1 = load(x[xb + e1 * xs3]);
    const C c =
        load(cs[bi * static_cast<I>(g.cs[0]) + t * static_cast<I>(g.cs[1]) + i * static_cast<I>(g.cs[2])]);
    const C s =
        load(sn[bi * static_cast<I>(g.ss[0]) + t * static_cast<I>(g.ss[1]) + i * static_cast<I>(g.ss[2])]);
    const I ob = r * d;
    y[ob + e0] = store<S>(sub_rn(mul_rn(x0, c), mul_rn(x1, s)));
    y[ob + e1] = store<S>(add_rn(mul_rn(x0, s), mul_rn(x1, c)));
  }
}

template <typename S, RopeKind K>
cudaError_t launch_rope(const S* x, const S* c, const S* s, const RopeGeo& g, S* y, int64_t pairs,
                        cudaStream_t st) {
  // 32-bit index math when every offset fits (strides are non-negative)
  int64_t span = g.dims[0] * g.dims[1] * g.dims[2] * g.dims[3];
  for (int k = 0; k < 4; ++k) span += (g.dims[k] - 1) * g.xs[k];
  const int64_t t_max = g.dims[1] > g.dims[2] ? g.dims[1] : g.dims[2];
  for (const int64_t* cst : {g.cs, g.ss}) {
    const int64_t o = (g.dims[0] - 1) * cst[0] + (t_max - 1) * cst[1] + (g.dims[3] / 2) * cst[2];
    span = o > span ? o : span;
  }
  if (span < (int64_t(1) << 31))
    rope_kernel<S, K, uint32_t>
        <<<grid_for(pairs), kBlock, 0, st>>>(x, c, s, g, y, static_cast<uint32_t>(pairs));
  else
    rope_kernel<S, K, uint64_t>
        <<<grid_for(pairs), kBlock, 0, st>>>(x, c, s, g, y, static_cast<uint64_t>(pairs));
  return cudaGetLastError();
}

}  // namespace

cudaError_t rope(RopeKind kind, Dt dt, const void* x, const void* cos, const void* sin, const RopeGeo& g,
                 void* out, cudaStream_t s) {
  const int64_t pairs = g.dims[0] * g.dims[1] * g.dims[2] * (g.dims[3] / 2);
  if (pairs <= 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    const S* xp = static_cast<const S*>(x);
    const S* cp = static_cast<const S*>(cos);
    const S* sp = static_cast<const S*>(sin);
    S* yp = static_cast<S*>(out);
    switch (kind) {
      case RopeKind::Halves: return launch_rope<S, RopeKind::Halves>(xp, cp, sp, g, yp, pairs, s);
      case RopeKind::Interleaved: return launch_rope<S, RopeKind::Interleaved>(xp, cp, sp, g, yp, pairs, s);
      case RopeKind::HalvesThd: return launch_rope<S, RopeKind::HalvesThd>(xp, cp, sp, g, yp, pairs, s);
    }
    return cudaErrorInvalidValue;
  });
}

}  // namespace candle::cuda_k
