// The element-wise kernels (ew_*.cu): unary ops, affine, powf, elu, binary, cmp, where_cond, casts. One
// thread per output element in a grid-stride loop; operands are read through their strides (a dense operand
// skips the index arithmetic); f16 / bf16 / f8e4m3 compute in f32 and round once, as the CPU. Integer
// arithmetic wraps (unsigned arithmetic, no signed-overflow UB), x / 0 = 0.
#include <type_traits>

#pragma once

#include "common.cuh"
#include "pack.cuh"

namespace candle::cuda_k::ew {

template <typename C>
using wide_unsigned_t = std::conditional_t<(sizeof(C) < 4), uint32_t, std::make_unsigned_t<C>>;
template <typename C>
__device__ __forceinline__ C wrap_add(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename C>
__device__ __forceinline__ C wrap_sub(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename C>
__device__ __forceinline__ C wrap_mul(C a, C b) {
  using U = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// Products and sums without FMA contraction (the CPU compiles these with fp-contract=off).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

constexpr bool unary_int_ok(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sqr || op == UnaryOp::Relu ||
         op == UnaryOp::Sign || op == UnaryOp::Ceil || op == UnaryOp::Floor || op == UnaryOp::Round;
}

template <UnaryOp OP>
struct UnaryF {
  template <typename C>
  __device__ __forceinline__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (OP == UnaryOp::Neg)
        return wrap_sub(C(0), x);
      else if constexpr (OP == UnaryOp::Abs) {
        if constexpr (std::is_signed_v<C>)
          return x < 0 ? wrap_sub(C(0), x) : x;
        else
          return x;
      } else if constexpr (OP == UnaryOp::Sqr)
        return wrap_mul(x, x);
      else if constexpr (OP == UnaryOp::Relu)
        return x > 0 ? x : C(0);
      else if constexpr (OP == UnaryOp::Sign) {
        if constexpr (std::is_signed_v<C>)
          return static_cast<C>((x > 0) - (x < 0));
        else
          return static_cast<C>(x != 0);
      } else
        return x;
    } else {
      if constexpr (OP == UnaryOp::Neg)
        return -x;
      else if constexpr (OP == UnaryOp::Recip)
        return C(1) / x;
      else if constexpr (OP == UnaryOp::Exp)
        return exp(x);
      else if constexpr (OP == UnaryOp::Log)
        return log(x);
      else if constexpr (OP == UnaryOp::Sin)
        return sin(x);
      else if constexpr (OP == UnaryOp::Cos)
        return cos(x);
      else if constexpr (OP == UnaryOp::Tanh)
        return tanh(x);
      else if constexpr (OP == UnaryOp::Abs)
        return fabs(x);
      else if constexpr (OP == UnaryOp::Sqr)
        return x * x;
      else if constexpr (OP == UnaryOp::Sqrt)
        return sqrt(x);
      else if constexpr (OP == UnaryOp::Gelu) {
        // 0.5 x (1 + tanh(u)) == x * sigmoid(2u), without the cancellation for x < 0
        C u2 = C(1.5957691216057307117) * (x + C(0.044715) * (x * x * x));
        return x / (C(1) + exp(-u2));
      } else if constexpr (OP == UnaryOp::GeluErf)
        return C(0.5) * x * erfc(-x * C(0.70710678118654752440));
      else if constexpr (OP == UnaryOp::Erf)
        return erf(x);
      else if constexpr (OP == UnaryOp::Relu)
        return x > C(0) ? x : C(0);
      else if constexpr (OP == UnaryOp::Silu)
        return x / (C(1) + exp(-x));
      else if constexpr (OP == UnaryOp::Sigmoid)
        return C(1) / (C(1) + exp(-x));
      else if constexpr (OP == UnaryOp::Ceil)
        return ceil(x);
      else if constexpr (OP == UnaryOp::Floor)
        return floor(x);
      else if constexpr (OP == UnaryOp::Round)
        return round(x);
      else
        return static_cast<C>((x > C(0)) - (x < C(0)));
    }
  }
};

template <typename C>
struct AffineF {
  C mul, add;
  __device__ __forceinline__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return wrap_add(wrap_mul(x, mul), add);
    else
      return add_rn(mul_rn(x, mul), add);
  }
};
template <typename C>
struct AffineViaDouble {
  double mul, add;
  __device__ __forceinline__ C operator()(C x) const {
    return convert<C>(add_rn(mul_rn(static_cast<double>(x), mul), add));
  }
};
template <typename C>
struct PowfF {
  C e;
  __device__ __forceinline__ C operator()(C x) const { return pow(x, e); }
};
template <typename C>
struct EluF {
  C alpha;
  __device__ __forceinline__ C operator()(C x) const { return x >= C(0) ? x : alpha * expm1(x); }
};

template <BinaryOp OP>
struct BinaryF {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (OP == BinaryOp::Add) {
      if constexpr (std::is_integral_v<C>)
        return wrap_add(a, b);
      else
        return a + b;
    } else if constexpr (OP == BinaryOp::Sub) {
      if constexpr (std::is_integral_v<C>)
        return wrap_sub(a, b);
      else
        return a - b;
    } else if constexpr (OP == BinaryOp::Mul) {
      if constexpr (std::is_integral_v<C>)
        return wrap_mul(a, b);
      else
        return a * b;
    } else if constexpr (OP == BinaryOp::Div) {
      if constexpr (std::is_integral_v<C>) {
        if (b == 0) return C(0);
        if constexpr (std::is_signed_v<C>) {
          if (b == C(-1)) return wrap_sub(C(0), a);
        }
        return static_cast<C>(a / b);
      } else {
        return a / b;
      }
    } else if constexpr (OP == BinaryOp::Maximum) {
      if constexpr (std::is_integral_v<C>)
        return a < b ? b : a;
      else
        return (a > b || a != a) ? a : b;
    } else if constexpr (OP == BinaryOp::Minimum) {
      if constexpr (std::is_integral_v<C>)
        return b < a ? b : a;
      else
        return (a < b || a != a) ? a : b;
    } else {
      if constexpr (std::is_integral_v<C>)
        return a;  // refused by the host code
      else
        return pow(a, b);
    }
  }
};

template <CmpOp OP>
struct CmpF {
  template <typename C>
  __device__ __forceinline__ uint8_t operator()(C a, C b) const {
    if constexpr (OP == CmpOp::Eq)
      return a == b;
    else if constexpr (OP == CmpOp::Ne)
      return a != b;
    else if constexpr (OP == CmpOp::Lt)
      return a < b;
    else if constexpr (OP == CmpOp::Le)
      return a <= b;
    else if constexpr (OP == CmpOp::Gt)
      return a > b;
    else
      return a >= b;
  }
};

// ---- kernels ----
// Dense operands: each thread moves one 16-byte pack per step (8 halves, 4 floats, 2 doubles).
template <typename S>
constexpr int pack_of() {
  return sizeof(S) >= 16 ? 1 : static_cast<int>(16 / sizeof(S));
}

template <typename S, typename F>
__global__ void map1_dense_k(const S* __restrict__ x, S* __restrict__ out, uint64_t n, F f) {
  pdl_entry();
  constexpr int V = pack_of<S>();
  using P = Pack<S, V>;
  const uint64_t np = n / V, stride = static_cast<uint64_t>(blockDim.x) * gridDim.x;
  const uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = t; i < np; i += stride) {
    const P a = reinterpret_cast<const P*>(x)[i];
    P r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = store<S>(f(load(a.v[j])));
    reinterpret_cast<P*>(out)[i] = r;
  }
  for (uint64_t i = np * V + t; i < n; i += stride) out[i] = store<S>(f(load(x[i])));
}

template <typename S, typename O, typename F>
__global__ void map2_dense_k(const S* __restrict__ a, const S* __restrict__ b, O* __restrict__ out,
                             uint64_t n, F f) {
  pdl_entry();
  constexpr int V = pack_of<S>();
  using P = Pack<S, V>;
  using PO = Pack<O, V>;
  const uint64_t np = n / V, stride = static_cast<uint64_t>(blockDim.x) * gridDim.x;
  const uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = t; i < np; i += stride) {
    const P pa = reinterpret_cast<const P*>(a)[i], pb = reinterpret_cast<const P*>(b)[i];
    PO r;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      auto v = f(load(pa.v[j]), load(pb.v[j]));
      if constexpr (std::is_same_v<O, uint8_t>)
        r.v[j] = v;
      else
        r.v[j] = store<O>(v);
    }
    reinterpret_cast<PO*>(out)[i] = r;
  }
  for (uint64_t i = np * V + t; i < n; i += stride) {
    auto v = f(load(a[i]), load(b[i]));
    if constexpr (std::is_same_v<O, uint8_t>)
      out[i] = v;
    else
      out[i] = store<O>(v);
  }
}

template <typename I, typename S, typename F>
__global__ void map1_k(const S* __restrict__ x, const __grid_constant__ EwStrides xs, S* __restrict__ out,
                       const __grid_constant__ EwShape sh, F f) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n) out[i] = store<S>(f(load(x[offset_in<I>(i, sh, xs)])));
}

template <typename I, typename S, typename O, typename F>
__global__ void map2_k(const S* __restrict__ a, const __grid_constant__ EwStrides as, const S* __restrict__ b,
                       const __grid_constant__ EwStrides bs, O* __restrict__ out,
                       const __grid_constant__ EwShape sh, F f) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n) {
    auto r = f(load(a[offset_in<I>(i, sh, as)]), load(b[offset_in<I>(i, sh, bs)]));
    if constexpr (std::is_same_v<O, uint8_t>)
      out[i] = r;
    else
      out[i] = store<O>(r);
  }
}

// One dense operand and one broadcast one whose element for output i is (i / inner) % mid: a row
// repeated (inner 1), a per-channel value (inner = the pixels of a channel), a scalar (mid 1).
// 32-bit indices with multiply-high division (n < 2^31). Mode: 0 one broadcast value per pack
// (inner a multiple of the pack), 1 the broadcast operand read as packs too (inner 1, mid a
// multiple of the pack, aligned), 2 per element.
struct BcastArgs {
  uint32_t inner, mid, mag_inner, shr_inner, mag_mid, shr_mid;
  bool swap;  // the broadcast operand is the left one
};
__device__ __forceinline__ uint32_t fast_div(uint32_t i, uint32_t mag, uint32_t shr) {
  return (__umulhi(i, mag) + i) >> shr;
}
__device__ __forceinline__ uint32_t bcast_index(uint32_t i, const BcastArgs& b) {
  const uint32_t q = b.inner == 1 ? i : fast_div(i, b.mag_inner, b.shr_inner);
  return q - fast_div(q, b.mag_mid, b.shr_mid) * b.mid;
}

template <int Mode, typename S, typename O, typename F>
__global__ void map2_bcast_k(const S* __restrict__ d, const S* __restrict__ bc, O* __restrict__ out,
                             uint32_t n, const __grid_constant__ BcastArgs ba, F f) {
  pdl_entry();
  constexpr int V = pack_of<S>();
  using P = Pack<S, V>;
  using PO = Pack<O, V>;
  auto one = [&](compute_t<S> x, compute_t<S> y) {
    auto v = ba.swap ? f(y, x) : f(x, y);
    if constexpr (std::is_same_v<O, uint8_t>)
      return static_cast<O>(v);
    else
      return store<O>(v);
  };
  const uint32_t np = n / V, stride = blockDim.x * gridDim.x;
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t i = t; i < np; i += stride) {
    const P pd = reinterpret_cast<const P*>(d)[i];
    PO r;
    if constexpr (Mode == 0) {
      const compute_t<S> y = load(bc[bcast_index(i * V, ba)]);
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = one(load(pd.v[j]), y);
    } else if constexpr (Mode == 1) {
      const P pb = reinterpret_cast<const P*>(bc)[bcast_index(i * V, ba) / V];
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = one(load(pd.v[j]), load(pb.v[j]));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = one(load(pd.v[j]), load(bc[bcast_index(i * V + j, ba)]));
    }
    reinterpret_cast<PO*>(out)[i] = r;
  }
  for (uint32_t i = np * V + t; i < n; i += stride) out[i] = one(load(d[i]), load(bc[bcast_index(i, ba)]));
}

// The (inner, mid) of a broadcast operand's strides over sh (stride 0 innermost, then contiguous,
// then stride 0), or false.
inline bool bcast_pattern(const EwShape& sh, const EwStrides& st, uint32_t& inner, uint32_t& mid) {
  int d = sh.rank - 1;
  uint64_t in = 1, md = 1;
  for (; d >= 0 && st.st[d] == 0; --d) in *= static_cast<uint64_t>(sh.dims[d]);
  for (; d >= 0 && st.st[d] == static_cast<int64_t>(md); --d) md *= static_cast<uint64_t>(sh.dims[d]);
  for (; d >= 0; --d)
    if (st.st[d] != 0) return false;
  inner = static_cast<uint32_t>(in);
  mid = static_cast<uint32_t>(md);
  return true;
}

template <typename I, typename CT, typename V>
__global__ void where_k(const CT* __restrict__ c, const __grid_constant__ EwStrides cs,
                        const V* __restrict__ t, const __grid_constant__ EwStrides ts,
                        const V* __restrict__ f, const __grid_constant__ EwStrides fs, V* __restrict__ out,
                        const __grid_constant__ EwShape sh) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n)
  out[i] = c[offset_in<I>(i, sh, cs)] != 0 ? t[offset_in<I>(i, sh, ts)] : f[offset_in<I>(i, sh, fs)];
}

// Dense casts: packs of V elements (V = what fits 16 bytes of the wider type).
template <typename From, typename To>
__global__ void cast_dense_k(const From* __restrict__ x, To* __restrict__ out, uint64_t n) {
  pdl_entry();
  constexpr int V = pack_of<From>() < pack_of<To>() ? pack_of<From>() : pack_of<To>();
  using PF = Pack<From, V>;
  using PT = Pack<To, V>;
  const uint64_t np = n / V, stride = static_cast<uint64_t>(blockDim.x) * gridDim.x;
  const uint64_t t = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto one = [](From v) {
    if constexpr (std::is_same_v<From, To>)
      return v;
    else
      return store<To>(convert<To>(load(v)));
  };
  for (uint64_t i = t; i < np; i += stride) {
    const PF a = reinterpret_cast<const PF*>(x)[i];
    PT r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = one(a.v[j]);
    reinterpret_cast<PT*>(out)[i] = r;
  }
  for (uint64_t i = np * V + t; i < n; i += stride) out[i] = one(x[i]);
}

template <typename I, typename From, typename To>
__global__ void cast_k(const From* __restrict__ x, const __grid_constant__ EwStrides xs, To* __restrict__ out,
                       const __grid_constant__ EwShape sh) {
  pdl_entry();
  CANDLE_GRID_LOOP(I, i, sh.n) {
    if constexpr (std::is_same_v<From, To>)
      out[i] = x[offset_in<I>(i, sh, xs)];
    else
      out[i] = store<To>(convert<To>(load(x[offset_in<I>(i, sh, xs)])));
  }
}

inline bool wide(const EwShape& sh) { return sh.wide || sh.n > int64_t(UINT32_MAX); }

template <typename S, typename F>
cudaError_t launch_map1(const void* x, const EwStrides& xs, void* out, const EwShape& sh, F f,
                        cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  constexpr int V = pack_of<S>();
  if (xs.dense && aligned_to(x, sizeof(S) * V) && aligned_to(out, sizeof(S) * V)) {
    map1_dense_k<<<grid_for(sh.n, V), kBlock, 0, s>>>(static_cast<const S*>(x), static_cast<S*>(out),
                                                      static_cast<uint64_t>(sh.n), f);
    return cudaGetLastError();
  }
  if (wide(sh))
    map1_k<uint64_t>
        <<<grid_for(sh.n), kBlock, 0, s>>>(static_cast<const S*>(x), xs, static_cast<S*>(out), sh, f);
  else
    map1_k<uint32_t>
        <<<grid_for(sh.n), kBlock, 0, s>>>(static_cast<const S*>(x), xs, static_cast<S*>(out), sh, f);
  return cudaGetLastError();
}

template <typename S, typename O, typename F>
cudaError_t launch_map2(const void* a, const EwStrides& as, const void* b, const EwStrides& bs, void* out,
                        const EwShape& sh, F f, cudaStream_t s) {
  if (sh.n == 0) return cudaSuccess;
  auto pa = static_cast<const S*>(a);
  auto pb = static_cast<const S*>(b);
  auto po = static_cast<O*>(out);
  constexpr int V = pack_of<S>();
  if (as.dense && bs.dense && aligned_to(a, sizeof(S) * V) && aligned_to(b, sizeof(S) * V) &&
      aligned_to(out, sizeof(O) * V)) {
    map2_dense_k<<<grid_for(sh.n, V), kBlock, 0, s>>>(pa, pb, po, static_cast<uint64_t>(sh.n), f);
    return cudaGetLastError();
  }
  if ((as.dense != bs.dense) && !sh.wide && sh.n < (int64_t(1) << 31)) {
    BcastArgs ba{};
    ba.swap = bs.dense;
    const S* d = ba.swap ? pb : pa;
    const S* bc = ba.swap ? pa : pb;
    if (aligned_to(d, sizeof(S) * V) && aligned_to(out, sizeof(O) * V) &&
        bcast_pattern(sh, ba.swap ? as : bs, ba.inner, ba.mid)) {
      EwShape div;  // the multiply-high constants of inner and mid
      div.rank = 2, div.n = sh.n, div.dims[0] = ba.inner, div.dims[1] = ba.mid;
      set_fast_div(div);
      ba.mag_inner = div.mag[0], ba.shr_inner = div.shr[0], ba.mag_mid = div.mag[1], ba.shr_mid = div.shr[1];
      const unsigned grid = grid_for(sh.n, V);
      const auto n = static_cast<uint32_t>(sh.n);
      if (ba.inner % V == 0)
        map2_bcast_k<0><<<grid, kBlock, 0, s>>>(d, bc, po, n, ba, f);
      else if (ba.inner == 1 && ba.mid % V == 0 && aligned_to(bc, sizeof(S) * V))
        map2_bcast_k<1><<<grid, kBlock, 0, s>>>(d, bc, po, n, ba, f);
      else
        map2_bcast_k<2><<<grid, kBlock, 0, s>>>(d, bc, po, n, ba, f);
      return cudaGetLastError();
    }
  }
  if (wide(sh))
    map2_k<uint64_t><<<grid_for(sh.n), kBlock, 0, s>>>(pa, as, pb, bs, po, sh, f);
  else
    map2_k<uint32_t><<<grid_for(sh.n), kBlock, 0, s>>>(pa, as, pb, bs, po, sh, f);
  return cudaGetLastError();
}

template <typename Fn>
inline cudaError_t with_unary(UnaryOp op, Fn&& fn) {
  switch (op) {
#define CANDLE_U(N) \
  case UnaryOp::N: return fn.template operator()<UnaryOp::N>();
    CANDLE_U(Neg)
    CANDLE_U(Recip)
    CANDLE_U(Exp)
    CANDLE_U(Log)
    CANDLE_U(Sin)
    CANDLE_U(Cos)
    CANDLE_U(Tanh) CANDLE_U(Abs) CANDLE_U(Sqr) CANDLE_U(Sqrt) CANDLE_U(Gelu) CANDLE_U(GeluErf) CANDLE_U(Erf)
        CANDLE_U(Relu) CANDLE_U(Silu) CANDLE_U(Ceil) CANDLE_U(Floor) CANDLE_U(Round) CANDLE_U(Sign)
            CANDLE_U(Sigmoid)
#undef CANDLE_U
  }
  return cudaErrorInvalidValue;
}

}  // namespace candle::cuda_k::ew
