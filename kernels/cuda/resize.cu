// Nearest and bilinear resizing over planes (b, c): one thread per output element; the source
// offsets (and bilinear weights) come from host-computed tables (cpu::nearest_indices,
// cpu::linear_taps), so every device samples the same source positions.
#include "common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

// The plane offset of output i and its (y, x).
template <typename I>
__device__ __forceinline__ int64_t plane_of(I i, const PlaneArgs& p, I& y, I& x) {
  const I ow = static_cast<I>(p.ow), oh = static_cast<I>(p.oh), c = static_cast<I>(p.c);
  I t = i;
  x = t % ow;
  t /= ow;
  y = t % oh;
  const I plane = t / oh;
  return static_cast<int64_t>(plane / c) * p.sb + static_cast<int64_t>(plane % c) * p.sc;
}

template <typename E, typename I>
__global__ void nearest_k(const E* __restrict__ x, const int64_t* __restrict__ offs, E* __restrict__ out,
                          PlaneArgs p, I total) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, total) {
    I y, xx;
    const int64_t base = plane_of<I>(i, p, y, xx);
    out[i] = x[base + offs[y] + offs[p.oh + static_cast<int64_t>(xx)]];
  }
}

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <typename S, typename I>
__global__ void bilinear_k(const S* __restrict__ x, const int64_t* __restrict__ offs,
                           const compute_t<S>* __restrict__ wts, S* __restrict__ out, PlaneArgs p, I total) {
  pdl_entry();
  using C = compute_t<S>;
  const int64_t oh = p.oh, ow = p.ow;
  CANDLE_GRID_LOOP(I, i, total) {
    I y, xx;
    const int64_t base = plane_of<I>(i, p, y, xx);
    const int64_t yy = y, xc = xx;
    const S* r0 = x + base + offs[yy];
    const S* r1 = x + base + offs[oh + yy];
    const int64_t c0 = offs[2 * oh + xc], c1 = offs[2 * oh + ow + xc];
    const C lh0 = wts[yy], lh1 = wts[oh + yy], lw0 = wts[2 * oh + xc], lw1 = wts[2 * oh + ow + xc];
    const C top = add_rn(mul_rn(load(r0[c0]), lw0), mul_rn(load(r0[c1]), lw1));
    const C bottom = add_rn(mul_rn(load(r1[c0]), lw0), mul_rn(load(r1[c1]), lw1));
    out[i] = store<S>(add_rn(mul_rn(top, lh0), mul_rn(bottom, lh1)));
  }
}

}  // namespace

cudaError_t upsample_nearest(size_t esize, const void* x, const int64_t* offs, void* out, const PlaneArgs& p,
                             cudaStream_t s) {
  const int64_t total = p.b * p.c * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  return with_esize(esize, [&]<typename E>() {
    auto px = static_cast<const E*>(x);
    auto po = static_cast<E*>(out);
    if (p.wide)
      nearest_k<E, uint64_t><<<grid_for(total), kBlock, 0, s>>>(px, offs, po, p, uint64_t(total));
    else
      nearest_k<E, uint32_t><<<grid_for(total), kBlock, 0, s>>>(px, offs, po, p, uint32_t(total));
    return cudaGetLastError();
  });
}

cudaError_t upsample_bilinear(Dt dt, const void* x, const int64_t* offs, const void* wts, void* out,
                              const PlaneArgs& p, cudaStream_t s) {
  const int64_t total = p.b * p.c * p.oh * p.ow;
  if (total == 0) return cudaSuccess;
  auto run = [&]<typename S>() -> cudaError_t {
    auto px = static_cast<const S*>(x);
    auto pw = static_cast<const compute_t<S>*>(wts);
    auto po = static_cast<S*>(out);
    if (p.wide)
      bilinear_k<S, uint64_t><<<grid_for(total), kBlock, 0, s>>>(px, offs, pw, po, p, uint64_t(total));
    else
      bilinear_k<S, uint32_t><<<grid_for(total), kBlock, 0, s>>>(px, offs, pw, po, p, uint32_t(total));
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
