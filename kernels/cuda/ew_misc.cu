// affine, powf, elu, where_cond and casts (functors and kernels: ew.cuh).
#include "ew.cuh"

namespace candle::cuda_k {

using namespace ew;

cudaError_t affine(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double mul,
                   double add, bool int_exact, cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    using C = compute_t<S>;
    if constexpr (is_int_v<S>) {
      if (!int_exact) return launch_map1<S>(x, xs, out, sh, AffineViaDouble<C>{mul, add}, s);
      return launch_map1<S>(x, xs, out, sh, AffineF<C>{static_cast<C>(mul), static_cast<C>(add)}, s);
    } else {
      return launch_map1<S>(x, xs, out, sh, AffineF<C>{static_cast<C>(mul), static_cast<C>(add)}, s);
    }
  });
}

cudaError_t powf(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double e,
                 cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    using C = compute_t<S>;
    if constexpr (is_int_v<S>)
      return cudaErrorNotSupported;
    else
      return launch_map1<S>(x, xs, out, sh, PowfF<C>{static_cast<C>(e)}, s);
  });
}

cudaError_t elu(Dt dt, const void* x, const EwStrides& xs, void* out, const EwShape& sh, double alpha,
                cudaStream_t s) {
  return with_dtype(dt, [&]<typename S>() -> cudaError_t {
    using C = compute_t<S>;
    if constexpr (is_int_v<S>)
      return cudaErrorNotSupported;
    else
      return launch_map1<S>(x, xs, out, sh, EluF<C>{static_cast<C>(alpha)}, s);
  });
}

cudaError_t where_cond(Dt cond_dt, const void* cond, const EwStrides& cs, size_t esize, const void* t,
                       const EwStrides& ts, const void* f, const EwStrides& fs, void* out, const EwShape& sh,
                       cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  return with_dtype(cond_dt, [&]<typename CS>() -> cudaError_t {
    if constexpr (!is_int_v<CS>) {
      return cudaErrorNotSupported;
    } else {
      return with_esize(esize, [&]<typename V>() -> cudaError_t {
        auto pc = static_cast<const CS*>(cond);
        auto pt = static_cast<const V*>(t);
        auto pf = static_cast<const V*>(f);
        auto po = static_cast<V*>(out);
        if (wide(sh))
          where_k<uint64_t><<<grid_for(sh.n), kBlock, 0, s>>>(pc, cs, pt, ts, pf, fs, po, sh);
        else
          where_k<uint32_t><<<grid_for(sh.n), kBlock, 0, s>>>(pc, cs, pt, ts, pf, fs, po, sh);
        return cudaGetLastError();
      });
    }
  });
}

cudaError_t cast(Dt from, Dt to, const void* x, const EwStrides& xs, void* out, const EwShape& sh,
                 cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  return with_dtype(from, [&]<typename F>() {
    return with_dtype(to, [&]<typename T>() -> cudaError_t {
      auto px = static_cast<const F*>(x);
      auto po = static_cast<T*>(out);
      constexpr int V = pack_of<F>() < pack_of<T>() ? pack_of<F>() : pack_of<T>();
      if (xs.dense && aligned_to(x, sizeof(F) * V) && aligned_to(out, sizeof(T) * V)) {
        cast_dense_k<<<grid_for(sh.n, V), kBlock, 0, s>>>(px, po, static_cast<uint64_t>(sh.n));
        return cudaGetLastError();
      }
      if (wide(sh))
        cast_k<uint64_t><<<grid_for(sh.n), kBlock, 0, s>>>(px, xs, po, sh);
      else
        cast_k<uint32_t><<<grid_for(sh.n), kBlock, 0, s>>>(px, xs, po, sh);
      return cudaGetLastError();
    });
  });
}

}  // namespace candle::cuda_k
