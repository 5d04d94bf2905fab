// Gradients of pooling and nearest resizing: one thread per input element gathering the output
// cells that reach it, in the row-major order the CPU adds them (no atomics, deterministic).
#include "common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// The (plane, y, x) of input element i of planes h x w.
struct Cell {
  int64_t plane, y, x;
};
__device__ __forceinline__ Cell cell_of(int64_t i, int64_t h, int64_t w) {
  const int64_t x = i % w, q = i / w;
  return {q / h, q % h, x};
}

// The windows (start o * s, length k) of n outputs that cover coordinate v: [lo, hi].
__device__ __forceinline__ void covering(int64_t v, int64_t k, int64_t s, int64_t n, int64_t& lo,
                                         int64_t& hi) {
  lo = v >= k ? (v - k + 1 + s - 1) / s : 0;
  hi = min(n - 1, v / s);
}

template <typename S>
__global__ void max_pool_grad_k(const S* __restrict__ x, const S* __restrict__ g, S* __restrict__ out,
                                PlaneArgs p, int64_t kh, int64_t kw, int64_t s_h, int64_t s_w,
                                int64_t total) {
  pdl_entry();
  using C = compute_t<S>;
  CANDLE_GRID_LOOP(int64_t, i, total) {
    const Cell e = cell_of(i, p.h, p.w);
    const S* xp = x + (e.plane / p.c) * p.sb + (e.plane % p.c) * p.sc;
    const S* gp = g + e.plane * p.oh * p.ow;
    int64_t y0, y1, x0, x1;
    covering(e.y, kh, s_h, p.oh, y0, y1);
    covering(e.x, kw, s_w, p.ow, x0, x1);
    C acc = C(0);
    for (int64_t oy = y0; oy <= y1; ++oy) {
      for (int64_t ox = x0; ox <= x1; ++ox) {
        // the window's pick, as the forward: its first element, then strict > or NaN
        const S* win = xp + oy * s_h * p.sh + ox * s_w * p.sw;
        C m = load(win[0]);
        int64_t at_y = 0, at_x = 0;
        for (int64_t ki = 0; ki < kh; ++ki) {
          for (int64_t kj = ki == 0 ? 1 : 0; kj < kw; ++kj) {
            const C v = load(win[ki * p.sh + kj * p.sw]);
            if (v > m || v != v) {
              m = v;
              at_y = ki;
              at_x = kj;
            }
          }
        }
        if (oy * s_h + at_y == e.y && ox * s_w + at_x == e.x) acc += load(gp[oy * p.ow + ox]);
      }
    }
    out[i] = store<S>(acc);
  }
}

template <typename S>
__global__ void avg_pool_grad_k(const S* __restrict__ g, S* __restrict__ out, PlaneArgs p, int64_t kh,
                                int64_t kw, int64_t s_h, int64_t s_w, int64_t total) {
  pdl_entry();
  using C = compute_t<S>;
  const C div = static_cast<C>(kh * kw);
  CANDLE_GRID_LOOP(int64_t, i, total) {
    const Cell e = cell_of(i, p.h, p.w);
    const S* gp = g + e.plane * p.oh * p.ow;
    int64_t y0, y1, x0, x1;
    covering(e.y, kh, s_h, p.oh, y0, y1);
    covering(e.x, kw, s_w, p.ow, x0, x1);
    C acc = C(0);
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox) acc += load(gp[oy * p.ow + ox]) / div;
    out[i] = store<S>(acc);
  }
}

template <typename S>
__global__ void nearest_grad_k(const S* __restrict__ g, const int64_t* __restrict__ ranges,
                               S* __restrict__ out, PlaneArgs p, int64_t total) {
  pdl_entry();
  using C = compute_t<S>;
  CANDLE_GRID_LOOP(int64_t, i, total) {
    const Cell e = cell_of(i, p.h, p.w);
    const S* gp = g + e.plane * p.oh * p.ow;
    const int64_t y0 = ranges[e.y], y1 = ranges[p.h + e.y];
    const int64_t x0 = ranges[2 * p.h + e.x], x1 = ranges[2 * p.h + p.w + e.x];
    C acc = C(0);
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = x0; x < x1; ++x) acc += load(gp[y * p.ow + x]);
    out[i] = store<S>(acc);
  }
}

template <typename S>
__global__ void bilinear_grad_k(const S* __restrict__ g, const int64_t* __restrict__ tab, int64_t cols_at,
                                const compute_t<S>* __restrict__ wts, S* __restrict__ out, PlaneArgs p,
                                int64_t total) {
  pdl_entry();
  using C = compute_t<S>;
  const int64_t rows_at = p.h + 1;
  const int64_t* cs = tab + cols_at;
  const int64_t ce_at = cols_at + p.w + 1;
  const C* lh = wts;             // lh0[oh], lh1[oh]
  const C* lw = wts + 2 * p.oh;  // lw0[ow], lw1[ow]
  CANDLE_GRID_LOOP(int64_t, i, total) {
    const Cell e = cell_of(i, p.h, p.w);
    const S* gp = g + e.plane * p.oh * p.ow;
    C acc = C(0);
    for (int64_t r = tab[e.y]; r < tab[e.y + 1]; ++r) {
      const int64_t ry = tab[rows_at + r], y = ry >> 1;
      // the w-pass value of output row y at column e.x, in the CPU's order
      C t = C(0);
      for (int64_t q = cs[e.x]; q < cs[e.x + 1]; ++q) {
        const int64_t cx = tab[ce_at + q], x = cx >> 1;
        t = add_rn(t, mul_rn(lw[(cx & 1) * p.ow + x], load(gp[y * p.ow + x])));
      }
      acc = add_rn(acc, mul_rn(lh[(ry & 1) * p.oh + y], t));
    }
    out[i] = store<S>(acc);
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

}  // namespace

cudaError_t max_pool2d_grad(Dt dt, const void* x, const void* g, void* out, const PlaneArgs& p, int64_t kh,
                            int64_t kw, int64_t s_h, int64_t s_w, cudaStream_t s) {
  const int64_t total = p.b * p.c * p.h * p.w;
  if (total == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    max_pool_grad_k<S><<<grid_for(total), kBlock, 0, s>>>(static_cast<const S*>(x), static_cast<const S*>(g),
                                                          static_cast<S*>(out), p, kh, kw, s_h, s_w, total);
    return cudaGetLastError();
  });
}

cudaError_t avg_pool2d_grad(Dt dt, const void* g, void* out, const PlaneArgs& p, int64_t kh, int64_t kw,
                            int64_t s_h, int64_t s_w, cudaStream_t s) {
  const int64_t total = p.b * p.c * p.h * p.w;
  if (total == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    avg_pool_grad_k<S><<<grid_for(total), kBlock, 0, s>>>(static_cast<const S*>(g), static_cast<S*>(out), p,
                                                          kh, kw, s_h, s_w, total);
    return cudaGetLastError();
  });
}

cudaError_t upsample_nearest_grad(Dt dt, const void* g, const int64_t* ranges, void* out, const PlaneArgs& p,
                                  cudaStream_t s) {
  const int64_t total = p.b * p.c * p.h * p.w;
  if (total == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    nearest_grad_k<S>
        <<<grid_for(total), kBlock, 0, s>>>(static_cast<const S*>(g), ranges, static_cast<S*>(out), p, total);
    return cudaGetLastError();
  });
}

cudaError_t upsample_bilinear_grad(Dt dt, const void* g, const int64_t* tab, int64_t cols_at, const void* wts,
                                   void* out, const PlaneArgs& p, cudaStream_t s) {
  const int64_t total = p.b * p.c * p.h * p.w;
  if (total == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() {
    bilinear_grad_k<S><<<grid_for(total), kBlock, 0, s>>>(static_cast<const S*>(g), tab, cols_at,
                                                          static_cast<const compute_t<S>*>(wts),
                                                          static_cast<S*>(out), p, total);
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
