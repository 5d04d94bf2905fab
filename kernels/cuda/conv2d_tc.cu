// conv2d / conv1d as an implicit GEMM on tensor cores (WMMA): per (image, group), OUT[co, pixel] =
// W[co, k] x X[k, pixel] with k = (ci, ky, kx), the X tile gathered straight from the input through
// its strides as in conv2d.cu (padding reads 0). f16 / bf16 operands multiply in m16n16k16 steps,
// f32 ones rounded to TF32 in m16n16k8 steps, all accumulated in f32. A block of 8 warps (2 along
// co x 4 along pixels) computes a BM x 128 output tile (BM = 64 or 128) in 32-deep k slices,
// double-buffered in shared memory: the global loads of slice t + 1 go to registers before the
// tensor-core steps on slice t, then to the other buffer, one barrier per slice. The taps of a
// slice are staged in shared memory two slices ahead (one 16-byte read per k instead of three
// global ones). Epilogue: each warp stages 16 x 32 of its accumulators in shared memory, adds the
// bias, activates and rounds once, and writes rows of 32 consecutive pixels.
#include <mma.h>

#include "conv_common.cuh"
#include "launch_conv.h"

namespace candle::cuda_k {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int BN = 128, BK = 32, kWarps = 8, kThreads = 32 * kWarps;
constexpr int WN = BN / 4;        // the pixels of one warp's sub-tile (4 warps along the pixels)
constexpr int kStageLd = WN + 4;  // a staging row of the epilogue, in floats (padded)
static_assert(WN == 32, "the epilogue writes one pixel per lane");
static_assert(kThreads % BN == 0 && BK % (kThreads / BN) == 0, "the gather covers whole slices");

// The WMMA operand type and k depth of a storage type.
template <typename S>
struct Mma;
template <>
struct Mma<__half> {
  using Op = __half;
  static constexpr int KS = 16;
};
template <>
struct Mma<__nv_bfloat16> {
  using Op = __nv_bfloat16;
  static constexpr int KS = 16;
};
template <>
struct Mma<float> {
  using Op = wmma::precision::tf32;
  static constexpr int KS = 8;
};

// The dynamic shared memory of a block: two A slices [BM][LDA] (weights, k fastest), two B slices
// [BN][LDB] (the gathered input, also k fastest: a thread writes its pixel's 16 k as 16-byte
// vectors), the epilogue's staging over them, then two slices of taps {offset, dy, dx, unused}.
// Rows are padded by 16 bytes, which spreads the vector writes and a fragment's rows over the
// banks and keeps every fragment 32-byte aligned.
template <typename S, int BM>
struct Smem {
  static constexpr int kPad = 16 / static_cast<int>(sizeof(S));
  static constexpr int LDA = BK + kPad, LDB = BK + kPad;
  static constexpr size_t a_bytes = size_t{BM} * LDA * sizeof(S);
  static constexpr size_t b_bytes = size_t{BN} * LDB * sizeof(S);
  static constexpr size_t pipe_bytes = 2 * (a_bytes + b_bytes);
  static constexpr size_t stage_bytes = size_t{kWarps} * 16 * kStageLd * sizeof(float);
  static constexpr size_t taps_at = pipe_bytes > stage_bytes ? pipe_bytes : stage_bytes;
  static constexpr size_t bytes(size_t index_size) { return taps_at + 2 * BK * 4 * index_size; }
  static_assert(a_bytes % 32 == 0 && b_bytes % 32 == 0 && taps_at % 32 == 0, "fragment alignment");
  static_assert((LDA * sizeof(S)) % 16 == 0, "16-byte row starts");
};

// NE elements of S held packed in 32-bit registers (two f16 / bf16 per register), written to
// shared memory as 16-byte vectors.
template <typename S, int NE>
struct Packed {
  static constexpr int kWords = NE * static_cast<int>(sizeof(S)) / 4;
  static_assert(kWords % 4 == 0, "whole 16-byte vectors");
  uint32_t w[kWords];
  __device__ __forceinline__ void set(int i, S v) {
    if constexpr (sizeof(S) == 4) {
      w[i] = __float_as_uint(v);
    } else {
      uint32_t b;
      if constexpr (std::is_same_v<S, __half>)
        b = __half_as_ushort(v);
      else
        b = __bfloat16_as_ushort(v);
      if (i & 1)
        w[i / 2] |= b << 16;
      else
        w[i / 2] = b;
    }
  }
  // 16-byte vector q (elements q * 16 / sizeof(S) ..)
  __device__ __forceinline__ void set_vec(int q, uint4 v) {
    w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z, w[4 * q + 3] = v.w;
  }
  __device__ __forceinline__ void put(S* dst) const {  // dst: 16-byte aligned
#pragma unroll
    for (int q = 0; q < kWords / 4; ++q)
      reinterpret_cast<uint4*>(dst)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
  }
};

template <typename I>
struct Tap {
  I off, dy, dx;
};

// One staged tap (16-byte aligned: a single 128-bit read for int32 indices).
template <typename I>
__device__ __forceinline__ Tap<I> read_tap(const I* t) {
  if constexpr (sizeof(I) == 4) {
    const int4 v = *reinterpret_cast<const int4*>(t);
    return {v.x, v.y, v.z};
  } else {
    const longlong2 v = *reinterpret_cast<const longlong2*>(t);
    return {static_cast<I>(v.x), static_cast<I>(v.y), t[2]};
  }
}

template <typename S, int BM, typename I>
__global__ void __launch_bounds__(kThreads)
    conv2d_tc_k(const S* __restrict__ x, const S* __restrict__ w, const int64_t* __restrict__ taps,
                const S* __restrict__ bias, S* __restrict__ out, ConvArgs a) {
  pdl_entry();
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = Smem<S, BM>;
  using Op = typename Mma<S>::Op;
  constexpr int KS = Mma<S>::KS, LDA = L::LDA, LDB = L::LDB;
  constexpr int WM = BM / 2, FM = WM / 16, FN = WN / 16;
  // weights: a thread loads 8 consecutive k of one row per pass (4 threads per row of the slice)
  constexpr int A_CHUNK = 8, A_ROWS = kThreads / (BK / A_CHUNK), A_PASSES = BM / A_ROWS;
  // input: a thread gathers B_PER consecutive k of one pixel
  constexpr int B_PER = BK / (kThreads / BN);
  constexpr int VE = 16 / static_cast<int>(sizeof(S));  // elements per 16-byte vector
  static_assert(BM % A_ROWS == 0 && A_CHUNK % VE == 0 && B_PER % VE == 0, "tile shapes");
  extern __shared__ __align__(128) unsigned char smem[];
  S* const As = reinterpret_cast<S*>(smem);
  S* const Bs = reinterpret_cast<S*>(smem + 2 * L::a_bytes);
  float* const stage = reinterpret_cast<float*>(smem);
  I* const tap_s = reinterpret_cast<I*>(smem + L::taps_at);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;
  const I ow = static_cast<I>(a.ow), ih = static_cast<I>(a.ih), iw = static_cast<I>(a.iw);
  const I N = static_cast<I>(a.oh) * ow, K = static_cast<I>(a.ci_g * a.kh * a.kw);
  const I co_g = static_cast<I>(a.co_g), groups = static_cast<I>(a.groups);
  const I n0 = static_cast<I>(blockIdx.x) * BN, m0 = static_cast<I>(blockIdx.y) * BM;
  const int a_m = tid / (BK / A_CHUNK), a_k = (tid % (BK / A_CHUNK)) * A_CHUNK;
  // whole 16-byte weight vectors: every row starts 16-byte aligned and a vector is in or out of K
  const bool a_vec = K % VE == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  const int b_n = tid % BN, b_k = (tid / BN) * B_PER;  // a warp shares b_k: its taps are broadcasts
  const I pn = n0 + b_n;
  const bool pn_ok = pn < N;
  const I oy = pn_ok ? pn / ow : 0, ox = pn_ok ? pn - (pn / ow) * ow : 0;
  const I iy0 = oy * static_cast<I>(a.s_h) - static_cast<I>(a.pad_h);
  const I ix0 = ox * static_cast<I>(a.s_w) - static_cast<I>(a.pad_w);
  const I pix_off = iy0 * static_cast<I>(a.sh) + ix0 * static_cast<I>(a.sw);
  const I nk = (K + BK - 1) / BK;
  const S zero = store<S>(0.0f);
  const I nbg = static_cast<I>(a.b) * groups;
  for (I bg = blockIdx.z; bg < nbg; bg += gridDim.z) {
    const I bi = bg / groups, g = bg - (bg / groups) * groups;
    const S* xg = x + bi * static_cast<I>(a.sb) + g * static_cast<I>(a.ci_g) * static_cast<I>(a.sc);
    const S* wg = w + g * co_g * K;

    // the taps of the slice at k0 into tap buffer `buf` (threads 0 .. BK - 1)
    auto stage_taps = [&](int buf, I k0) {
      if (tid < BK) {
        const I gk = k0 + tid;
        I* t = tap_s + (buf * BK + tid) * 4;
        if (gk < K) {
          t[0] = static_cast<I>(taps[3 * gk]);
          t[1] = static_cast<I>(taps[3 * gk + 1]);
          t[2] = static_cast<I>(taps[3 * gk + 2]);
        } else {
          t[0] = t[1] = t[2] = 0;
        }
      }
    };
    Packed<S, A_CHUNK> ra[A_PASSES];
    Packed<S, B_PER> rb;
    // the slice at k0 from global memory into registers (its taps in tap buffer `buf`)
    auto load_slice = [&](int buf, I k0) {
      const I gk0 = k0 + a_k;
#pragma unroll
      for (int p = 0; p < A_PASSES; ++p) {
        const I m = m0 + a_m + A_ROWS * p;
        const S* src = wg + (m < co_g ? m : 0) * K + gk0;  // (rows past c_out are read as 0)
        if (a_vec) {
#pragma unroll
          for (int q = 0; q < A_CHUNK / VE; ++q)
            ra[p].set_vec(q, m < co_g && gk0 + q * VE < K ? *reinterpret_cast<const uint4*>(src + q * VE)
                                                          : make_uint4(0, 0, 0, 0));
        } else {
#pragma unroll
          for (int e = 0; e < A_CHUNK; ++e) ra[p].set(e, m < co_g && gk0 + e < K ? src[e] : zero);
        }
      }
      const I* tb = tap_s + (buf * BK + b_k) * 4;
#pragma unroll
      for (int j = 0; j < B_PER; ++j) {
        S v = zero;
        if (pn_ok && k0 + b_k + j < K) {
          const Tap<I> t = read_tap(tb + j * 4);
          const I iy = iy0 + t.dy, ix = ix0 + t.dx;
          if (iy >= 0 && iy < ih && ix >= 0 && ix < iw) v = xg[t.off + pix_off];
        }
        rb.set(j, v);
      }
    };
    // the registers into shared buffer `buf`
    auto store_slice = [&](int buf) {
      S* as = As + buf * BM * LDA;
#pragma unroll
      for (int p = 0; p < A_PASSES; ++p) ra[p].put(as + (a_m + A_ROWS * p) * LDA + a_k);
      rb.put(Bs + buf * BN * LDB + b_n * LDB + b_k);
    };

    wmma::fragment<wmma::accumulator, 16, 16, KS, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    // the warp's products over shared buffer `buf` (B is [pixel][k]: column-major for WMMA)
    auto mma_slice = [&](int buf) {
      const S* as = As + buf * BM * LDA + wm * WM * LDA;
      const S* bs = Bs + buf * BN * LDB + wn * WN * LDB;
#pragma unroll
      for (int ks = 0; ks < BK / KS; ++ks) {
        wmma::fragment<wmma::matrix_b, 16, 16, KS, Op, wmma::col_major> fb[FN];
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          wmma::load_matrix_sync(fb[j], bs + j * 16 * LDB + ks * KS, LDB);
          if constexpr (std::is_same_v<S, float>)
            for (int e = 0; e < fb[j].num_elements; ++e) fb[j].x[e] = wmma::__float_to_tf32(fb[j].x[e]);
        }
        // one A fragment at a time (fewer live registers)
#pragma unroll
        for (int i = 0; i < FM; ++i) {
          wmma::fragment<wmma::matrix_a, 16, 16, KS, Op, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, as + i * 16 * LDA + ks * KS, LDA);
          if constexpr (std::is_same_v<S, float>)
            for (int e = 0; e < fa.num_elements; ++e) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
#pragma unroll
          for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa, fb[j], acc[i][j]);
        }
      }
    };

    // Slice t is read from shared buffer t & 1 and its taps from tap buffer t & 1. Iteration t
    // writes shared buffer (t + 1) & 1 (last read in iteration t - 1) and tap buffer t & 1 (last
    // read by the loads of slice t, in iteration t - 1); the barrier closing each iteration orders
    // both against their next readers.
    stage_taps(0, 0);
    if (nk > 1) stage_taps(1, BK);
    __syncthreads();
    load_slice(0, 0);
    store_slice(0);
    __syncthreads();
    for (I t = 0; t < nk; ++t) {
      const int cur = static_cast<int>(t & 1);
      const bool more = t + 1 < nk;
      if (more) load_slice(cur ^ 1, (t + 1) * BK);
      if (t + 2 < nk) stage_taps(cur, (t + 2) * BK);
      mma_slice(cur);
      if (more) store_slice(cur ^ 1);
      __syncthreads();
    }

    // epilogue, 16 co rows of the warp's sub-tile at a time (the staging overlaps the slice
    // buffers: every warp is past its last product here)
    float* st = stage + warp * 16 * kStageLd;
    const I co_total = groups * co_g;
    const I n = n0 + wn * WN + lane;
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int j = 0; j < FN; ++j)
        wmma::store_matrix_sync(st + j * 16, acc[i][j], kStageLd, wmma::mem_row_major);
      __syncwarp();
      for (int r = 0; r < 16; ++r) {
        const I m = m0 + wm * WM + i * 16 + r;
        if (m >= co_g || n >= N) continue;
        const I co = g * co_g + m;
        float v = st[r * kStageLd + lane];
        if (a.has_bias) v = v + load(bias[co * static_cast<I>(a.bias_st)]);
        if (a.act >= 0) v = conv::activate(a.act, v);
        out[(bi * co_total + co) * N + n] = store<S>(v);
      }
      __syncwarp();
    }
    __syncthreads();  // the next (image, group) refills the slice buffers
  }
#endif
}

template <typename S, int BM>
cudaError_t launch_tc(const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                      const ConvArgs& a, cudaStream_t s) {
  const int64_t N = a.oh * a.ow;
  const int64_t tiles = (N + BN - 1) / BN, mt = (a.co_g + BM - 1) / BM;
  if (tiles > 0x7fffffffLL || mt > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(mt),
                  static_cast<unsigned>(std::min<int64_t>(a.b * a.groups, 65535)));
  auto kernel = a.wide ? conv2d_tc_k<S, BM, int64_t> : conv2d_tc_k<S, BM, int32_t>;
  const size_t bytes = Smem<S, BM>::bytes(a.wide ? sizeof(int64_t) : sizeof(int32_t));
  if (bytes > 48 * 1024) {
    // above the default limit of dynamic shared memory (f32 tiles): opt in
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  kernel<<<grid, kThreads, bytes, s>>>(static_cast<const S*>(x), static_cast<const S*>(w), taps,
                                       static_cast<const S*>(bias), static_cast<S*>(out), a);
  return cudaGetLastError();
}

template <typename S>
cudaError_t run_tc(const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                   const ConvArgs& a, cudaStream_t s) {
  // 128-row tiles only where the channels fill them (64 channels, the common case, fit one 64-row tile)
  if (a.co_g > 64) return launch_tc<S, 128>(x, w, taps, bias, out, a, s);
  return launch_tc<S, 64>(x, w, taps, bias, out, a, s);
}

}  // namespace

cudaError_t conv2d_tc(Dt dt, const void* x, const void* w, const int64_t* taps, const void* bias, void* out,
                      const ConvArgs& a, cudaStream_t s) {
  if (dt != Dt::F32 && dt != Dt::F16 && dt != Dt::BF16) return cudaErrorInvalidValue;
  if (a.oh * a.ow == 0 || a.co_g == 0 || a.b * a.groups == 0) return cudaSuccess;
  switch (dt) {
    case Dt::F32: return run_tc<float>(x, w, taps, bias, out, a, s);
    case Dt::F16: return run_tc<__half>(x, w, taps, bias, out, a, s);
    default: return run_tc<__nv_bfloat16>(x, w, taps, bias, out, a, s);
  }
}

}  // namespace candle::cuda_k
