// Fused scaled dot-product attention (semantics of src/cpu/attention.cpp): flash-attention style,
// no score matrix. A block of kWarps warps takes kWarps query rows that share one kv head (for
// GQA the rows of the head group, so a decode step's group reads each key once); the keys
// visible to any of its rows are staged through shared memory in tiles of kKeys rows, converted
// to f32. In a tile each lane scores one key (q from shared memory), the warp takes the tile's
// max and sum by shuffles, and each lane keeps dv / 32 f32 accumulators of its row (online
// softmax: running max, running sum, rescaled accumulator). Rows that see no key give zeros.
#include <cstdlib>
#include <string>
#include <type_traits>

#include "launch_nn.h"
#include "nn_common.cuh"
#include "pack.cuh"
#include "qacts.cuh"

namespace candle::cuda_k {
namespace {

using namespace nn;

constexpr int kWarps = 4;
constexpr int kKeys = 32;

// Shared memory: Q [kWarps][d], K [kKeys][d + 1] (padded: lanes read different rows without bank
// conflicts), V [kKeys][dv].
inline size_t smem_bytes(int64_t d, int64_t dv) {
  return sizeof(float) * static_cast<size_t>(kWarps * d + kKeys * (d + 1) + kKeys * dv);
}

// The keys held: the buffers' length, or the count on the device (clamped to [tq, tk], a count
// outside reported once).
__device__ __forceinline__ int64_t key_count(const AttnGeo& g, const AttnOpts& o) {
  if (!o.kv_len) return g.tk;
  const int64_t n = *o.kv_len;
  const int64_t tk = n < g.tq ? g.tq : (n > g.tk ? g.tk : n);
  if (tk != n && blockIdx.x == 0 && threadIdx.x == 0 && o.fault &&
      atomicCAS(o.fault, 0u, o.fault_tag) == 0u) {
    o.fault[1] = 0;
    o.fault[2] = static_cast<uint32_t>(n);
    o.fault[3] = 0;
  }
  return tk;
}

// The visible keys [lo, hi) of the query at position pos.
template <typename I>
__device__ __forceinline__ void visible_keys(const AttnOpts& o, I tk, I pos, I& lo, I& hi) {
  hi = o.causal ? pos + 1 : tk;
  lo = (o.window > 0 && pos + 1 > o.window) ? static_cast<I>(pos + 1 - o.window) : 0;
  if (lo > hi) lo = hi;
}

// kAcc: accumulators per lane (dv <= 32 kAcc).
template <typename S, int kAcc>
__global__ void __launch_bounds__(kWarps * 32)
    attn_kernel(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, AttnGeo g,
                AttnOpts o, int splits, float* __restrict__ part, S* __restrict__ out) {
  pdl_entry();
  extern __shared__ float smem[];
  const int d = static_cast<int>(g.d), dv = static_cast<int>(g.dv);
  float* qs = smem;
  float* ks = qs + kWarps * d;
  float* vs = ks + kKeys * (d + 1);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t group = g.h / g.hkv;
  const int64_t rows = group * g.tq;  // query rows per (batch, kv head)
  const int64_t tiles = (rows + kWarps - 1) / kWarps;
  const int64_t units = g.b * g.hkv * tiles;
  const int64_t tk = key_count(g, o);
  const int64_t offset = tk - g.tq;  // position of query 0
  auto key_range = [&](int64_t pos, int64_t& lo, int64_t& hi) { visible_keys(o, tk, pos, lo, hi); };
  for (int64_t uu = blockIdx.x; uu < units * splits; uu += gridDim.x) {
    const int split = static_cast<int>(uu % splits);
    const int64_t u = uu / splits;
    const int64_t tile = u % tiles, bk = u / tiles, kvh = bk % g.hkv, bi = bk / g.hkv;
    // the union of the block's rows' key ranges (every thread forms it: no shared state)
    int64_t tlo = tk, thi = 0;
    for (int w = 0; w < kWarps; ++w) {
      const int64_t r = tile * kWarps + w;
      if (r >= rows) break;
      int64_t lo, hi;
      key_range(offset + r % g.tq, lo, hi);
      tlo = lo < tlo ? lo : tlo;
      thi = hi > thi ? hi : thi;
    }
    if (splits > 1) {  // this block's share of the keys: whole tiles of kKeys, as even as they go
      // (the keys' share rounded up to whole tiles left half the blocks idle: 191 keys in 6 splits
      // took 64 keys each, 3 blocks of 2 tiles)
      const int64_t ntiles = (thi - tlo + kKeys - 1) / kKeys;
      const int64_t chunk = (ntiles + splits - 1) / splits * kKeys;
      const int64_t s0 = tlo + split * chunk, s1 = s0 + chunk < thi ? s0 + chunk : thi;
      tlo = s0 < thi ? s0 : thi;
      thi = s1 > tlo ? s1 : tlo;
    }
    const int64_t r = tile * kWarps + warp;
    const bool valid = r < rows;
    const int64_t hh = kvh * group + (valid ? r / g.tq : 0), qi = valid ? r % g.tq : 0;
    int64_t lo = 0, hi = 0;
    if (valid) key_range(offset + qi, lo, hi);
    __syncthreads();  // the previous unit is done with qs
    if (valid) {
      const S* qr = q + bi * g.qs[0] + hh * g.qs[1] + qi * g.qs[2];
      for (int i = lane; i < d; i += 32) qs[warp * d + i] = static_cast<float>(load(qr[i]));
    }
    float m = neg_inf, l = 0.0f, acc[kAcc];
#pragma unroll
    for (int c = 0; c < kAcc; ++c) acc[c] = 0.0f;
    const S* kb = k + bi * g.ks[0] + kvh * g.ks[1];
    const S* vb = v + bi * g.vs[0] + kvh * g.vs[1];
    for (int64_t j0 = tlo; j0 < thi; j0 += kKeys) {
      const int nb = static_cast<int>(thi - j0 < kKeys ? thi - j0 : kKeys);
      __syncthreads();  // the previous tile's reads are done (and qs is written)
      // kStage keys' and values' elements a thread loaded before any is stored: a load and its
      // store in one iteration waited out a memory latency per element (a decode step's 32-key
      // tile of 64 + 64 floats, 16 such waits a thread, took ~10 us on the H100); 4 with the
      // widest heads' accumulators (8 spilled registers there)
      constexpr int kStage = kAcc >= 8 ? 4 : 8;
      const int nk = nb * d, nv = nb * dv;
      for (int base = threadIdx.x; base < nk || base < nv; base += kStage * blockDim.x) {
        float rk[kStage], rv[kStage];
#pragma unroll
        for (int u = 0; u < kStage; ++u) {
          const int idx = base + u * static_cast<int>(blockDim.x);
          if (idx < nk) {
            const int j = idx / d, i = idx - j * d;
            rk[u] = static_cast<float>(load(kb[(j0 + j) * g.ks[2] + i]));
          }
          if (idx < nv) {
            const int j = idx / dv, c = idx - j * dv;
            rv[u] = static_cast<float>(load(vb[(j0 + j) * g.vs[2] + c]));
          }
        }
#pragma unroll
        for (int u = 0; u < kStage; ++u) {
          const int idx = base + u * static_cast<int>(blockDim.x);
          if (idx < nk) {
            const int j = idx / d, i = idx - j * d;
            ks[j * (d + 1) + i] = rk[u];
          }
          if (idx < nv) vs[idx] = rv[u];
        }
      }
      __syncthreads();
      const int64_t a = lo > j0 ? lo : j0, e = hi < j0 + nb ? hi : j0 + nb;
      if (!valid || a >= e) continue;  // uniform over the warp
      float s = neg_inf;
      const int64_t key = j0 + lane;
      if (key >= a && key < e) {
        const float* qr = qs + warp * d;
        const float* kr = ks + lane * (d + 1);
        float x = 0.0f;
        for (int i = 0; i < d; ++i) x = fmaf(qr[i], kr[i], x);
        x *= o.scale;
        if (o.softcap > 0.0f) x = o.softcap * tanhf(x / o.softcap);
        s = x;
      }
      const float mb = warp_max(s);
      const float m_new = m > mb ? m : mb;
      if (m_new == neg_inf) continue;  // every score -inf so far (uniform over the warp)
      const float corr = m == neg_inf ? 0.0f : expf(m - m_new);
      const float p = s == neg_inf ? 0.0f : expf(s - m_new);
      l = l * corr + warp_sum(p);
      m = m_new;
#pragma unroll
      for (int c = 0; c < kAcc; ++c) acc[c] *= corr;
      for (int jj = 0; jj < nb; ++jj) {
        const float pj = __shfl_sync(kFull, p, jj);
        if (pj == 0.0f) continue;
        const float* vr = vs + jj * dv;
#pragma unroll
        for (int c = 0; c < kAcc; ++c)
          if (lane + 32 * c < dv) acc[c] += pj * vr[lane + 32 * c];
      }
    }
    if (valid && part) {  // the partial result: m, l, acc[dv]
      float* pr = part + (((bi * g.h + hh) * g.tq + qi) * splits + split) * (g.dv + 2);
      if (lane == 0) {
        pr[0] = m;
        pr[1] = l;
      }
#pragma unroll
      for (int c = 0; c < kAcc; ++c)
        if (lane + 32 * c < dv) pr[2 + lane + 32 * c] = acc[c];
    } else if (valid) {
      S* dst = out + ((bi * g.h + hh) * g.tq + qi) * g.dv;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
      for (int c = 0; c < kAcc; ++c)
        if (lane + 32 * c < dv) dst[lane + 32 * c] = store<S>(acc[c] * inv);
    }
  }
}

// out[row][c] from the rows' `splits` partial results: the sums and accumulators rescaled to
// the largest running max (a split that saw no key has max -inf and adds nothing).
template <typename S>
__global__ void combine_kernel(const float* __restrict__ part, int splits, int64_t rows, int64_t dv,
                               S* __restrict__ out) {
  pdl_entry();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t stride = dv + 2;
  CANDLE_GRID_LOOP(int64_t, i, rows * dv) {
    const int64_t row = i / dv, c = i - row * dv;
    const float* pr = part + row * splits * stride;
    float mx = neg_inf;
    for (int sp = 0; sp < splits; ++sp) mx = pr[sp * stride] > mx ? pr[sp * stride] : mx;
    float l = 0.0f, a = 0.0f;
    if (mx != neg_inf) {
      for (int sp = 0; sp < splits; ++sp) {
        const float ms = pr[sp * stride];
        if (ms == neg_inf) continue;
        const float w = expf(ms - mx);
        l += pr[sp * stride + 1] * w;
        a += pr[sp * stride + 2 + c] * w;
      }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    out[i] = store<S>(a * inv);
  }
}

// ---- helpers of the decode kernels ----
// Elements i..i+7 of a key row in f32 (p 16-byte aligned).
template <typename S>
__device__ __forceinline__ void load8(const S* p, float (&f)[8]) {
  if constexpr (sizeof(S) == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    const Pack<S, 8> v = *reinterpret_cast<const Pack<S, 8>*>(p);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = static_cast<float>(load(v.v[e]));
  }
}

// The dot product of 8 query elements (shared memory, 16-byte aligned) with f, into two partial sums
// (halves the dependent chain: a one-row decode's is otherwise d multiply-adds long).
__device__ __forceinline__ void dot8(const float* q, const float (&f)[8], float& sa, float& sb) {
  const float4 qa = *reinterpret_cast<const float4*>(q), qb = *reinterpret_cast<const float4*>(q + 4);
  sa = fmaf(qa.x, f[0], sa);
  sb = fmaf(qb.x, f[4], sb);
  sa = fmaf(qa.y, f[1], sa);
  sb = fmaf(qb.y, f[5], sb);
  sa = fmaf(qa.z, f[2], sa);
  sb = fmaf(qb.z, f[6], sb);
  sa = fmaf(qa.w, f[3], sa);
  sb = fmaf(qb.w, f[7], sb);
}

// A key row's scores against R query rows (qs: R rows of d floats), two partial sums a row.
template <int R, typename S>
__device__ __forceinline__ void score_key(const S* kr, int d, const float* qs, float (&sa)[R],
                                          float (&sb)[R]) {
#pragma unroll 4
  for (int i = 0; i < d; i += 8) {
    float kf[8];
    load8(kr + i, kf);
#pragma unroll
    for (int r = 0; r < R; ++r) dot8(qs + r * d + i, kf, sa[r], sb[r]);
  }
}

// Whether this block is the last of `splits` to get here (its partial results written before, by
// every thread): counts itself in *counter; the last block zeroes it after its merge, for the next
// launch (every split has counted by then). Every thread of the block must call it.
__device__ __forceinline__ bool last_to_finish(uint32_t* counter, int splits) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == static_cast<uint32_t>(splits - 1);
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// A row's merge over its splits' partial results (pr: `splits` records of `stride` floats: running
// max, sum, accumulator; read past L1, other blocks wrote them), by one warp: each split's weight
// exp(max_s - max) into ws, and 1 / the weighted sum of the sums returned (0 when no key was seen).
__device__ __forceinline__ float split_weights(const float* pr, int splits, int stride, float* ws, int lane) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float mx = neg_inf;
  for (int sp = lane; sp < splits; sp += 32) {
    const float x = __ldcg(pr + sp * stride);
    mx = x > mx ? x : mx;
  }
  mx = warp_max(mx);
  float lsum = 0.0f;
  for (int sp = lane; sp < splits; sp += 32) {
    const float ms = __ldcg(pr + sp * stride);
    const float w = (mx == neg_inf || ms == neg_inf) ? 0.0f : expf(ms - mx);
    ws[sp] = w;
    lsum += w * __ldcg(pr + sp * stride + 1);
  }
  lsum = warp_sum(lsum);
  return lsum > 0.0f ? 1.0f / lsum : 0.0f;
}

// A decode step's output rows of one kv head (tq 1: the group's rows, adjacent in out from element
// `first`) quantized for the matmul after attention when q8 asks for it (qacts.cuh), by the block's
// warps once all of them have written their rows.
template <typename S>
__device__ __forceinline__ void quantize_out(const S* __restrict__ out, int64_t first, int64_t elems,
                                             const ActsQ8Out& q8) {
  if (q8.q[0] == nullptr && q8.q[1] == nullptr) return;
  __syncthreads();
  qacts::warp_share(
      [&](uint64_t i) { return static_cast<float>(load(out[first + static_cast<int64_t>(i)])); },
      static_cast<uint64_t>(elems), static_cast<uint64_t>(first), threadIdx.x >> 5, blockDim.x >> 5,
      threadIdx.x & 31, q8, true);
}

// ---- the decode kernel, tile form (by default below 4 query rows a kv head: decode_form) ----
// One block per (batch, kv head, split): its R query rows (the kv head's group x tq, <= 8) against
// the split's keys. Each warp takes 32 keys at a time: a lane loads its key's row straight from
// global memory (16-byte packs) and scores it against every row (q in shared memory), while the
// 32 value rows stream into shared memory (cp.async); the online softmax of each row runs over
// the warp (shuffles), and in the sum lanes own value columns (CV each), so every FMA chain is
// independent of the others. The warps' partial results merge in shared memory, then across the
// splits in the last block of the kv head to finish (an atomic count of the finished splits):
// no second kernel. (The general kernel spent ~3.7k dependent instructions a warp on a 32-key tile:
// one row a warp, a serial 64-term dot product a lane, an index division per staged element.)
// On the H200 (session 29) a TinyLlama step after 1000 tokens took 1103 us against 1310, LLaMA-7B's
// 2864 against 4796; but at ~200 keys Nsight Compute gave this kernel 22 us, as long as the general
// kernel and its merge: a warp carries all R rows (~2k instructions a tile at ~7 cycles each) and
// a short context keeps ~8 warps busy on the whole GPU. The row form below answers that.
constexpr int kDecWarps = 4;
constexpr int kDecMaxSplits = 64;
constexpr int kDecMaxRows = 8;

template <typename S, int R, int CV>
__global__ void __launch_bounds__(kDecWarps * 32)
    attn_decode_kernel(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, AttnGeo g,
                       AttnOpts o, int splits, float* __restrict__ part, uint32_t* __restrict__ counters,
                       S* __restrict__ out, const __grid_constant__ ActsQ8Out q8) {
  pdl_entry();
  constexpr int dv = 32 * CV;
  constexpr int kPerRow = dv * static_cast<int>(sizeof(S)) / 16;  // 16-byte chunks of a value row
  constexpr int kElems = 16 / static_cast<int>(sizeof(S));
  extern __shared__ __align__(16) unsigned char dsm[];
  const int d = static_cast<int>(g.d);
  S* vst = reinterpret_cast<S*>(dsm);  // [warp][32][dv]; after the keys, the warps' sums [warp][R][dv]
  float* qs = reinterpret_cast<float*>(dsm + sizeof(S) * kDecWarps * 32 * dv);  // [R][d]
  float* ps = qs + R * d;                                                       // [warp][32][R]
  __shared__ float xm[kDecWarps][R], xl[kDecWarps][R], ws[R][kDecMaxSplits], inv_l[R];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int group = static_cast<int>(g.h / g.hkv), tq = static_cast<int>(g.tq);
  const int rows = group * tq;  // <= R
  const int tk = static_cast<int>(key_count(g, o));
  const int split = static_cast<int>(blockIdx.x % splits);
  const int64_t unit = blockIdx.x / splits, kvh = unit % g.hkv, bi = unit / g.hkv;
  int lo[R], hi[R], tlo = tk, thi = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    lo[r] = hi[r] = 0;
    if (r < rows) visible_keys(o, tk, tk - tq + r % tq, lo[r], hi[r]);
    if (lo[r] < hi[r]) {
      tlo = lo[r] < tlo ? lo[r] : tlo;
      thi = hi[r] > thi ? hi[r] : thi;
    }
  }
  if (thi < tlo) thi = tlo;
  {  // this split's share: whole 32-key tiles, as even as they go
    const int ntiles = (thi - tlo + 31) / 32;
    const int t0 = static_cast<int>(static_cast<int64_t>(ntiles) * split / splits);
    const int t1 = static_cast<int>(static_cast<int64_t>(ntiles) * (split + 1) / splits);
    const int s0 = tlo + 32 * t0, s1 = tlo + 32 * t1;
    tlo = s0;
    thi = s1 < thi ? s1 : thi;
  }
  // row r's head and query index
  auto row_out = [&](int r) { return (bi * g.h + kvh * group + r / tq) * g.tq + r % tq; };
  for (int idx = threadIdx.x; idx < R * d; idx += blockDim.x) {
    const int r = idx / d, i = idx - r * d;
    float x = 0.0f;
    if (r < rows)
      x = static_cast<float>(
          load(q[bi * g.qs[0] + (kvh * group + r / tq) * g.qs[1] + (r % tq) * g.qs[2] + i]));
    qs[idx] = x;
  }
  __syncthreads();
  float m[R], l[R], acc[R][CV];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = neg_inf;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < CV; ++c) acc[r][c] = 0.0f;
  }
  const S* kb = k + bi * g.ks[0] + kvh * g.ks[1];
  const S* vb = v + bi * g.vs[0] + kvh * g.vs[1];
  S* vw = vst + warp * 32 * dv;
  float* pw = ps + warp * 32 * R;
  for (int j0 = tlo + 32 * warp; j0 < thi; j0 += 32 * kDecWarps) {
    const int nb = thi - j0 < 32 ? thi - j0 : 32;
    for (int c = lane; c < nb * kPerRow; c += 32) {
      const int jj = c / kPerRow, part_i = c - jj * kPerRow;
      cp_async16(vw + jj * dv + part_i * kElems, vb + (j0 + jj) * g.vs[2] + part_i * kElems);
    }
    // scores: two partial sums a row (a 1-row decode's chain is otherwise d FMAs long)
    float sa[R], sb[R];
#pragma unroll
    for (int r = 0; r < R; ++r) sa[r] = sb[r] = 0.0f;
    const int key = j0 + lane;
    if (lane < nb) {
      score_key<R>(kb + key * g.ks[2], d, qs, sa, sb);
    }
    float p[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float x = (sa[r] + sb[r]) * o.scale;
      if (o.softcap > 0.0f) x = o.softcap * tanhf(x / o.softcap);
      const float s = (lane < nb && key >= lo[r] && key < hi[r]) ? x : neg_inf;
      const float mb = warp_max(s);
      const float m_new = m[r] > mb ? m[r] : mb;
      float corr = 1.0f;
      p[r] = 0.0f;
      if (m_new != neg_inf) {  // uniform over the warp
        corr = m[r] == neg_inf ? 0.0f : expf(m[r] - m_new);
        p[r] = s == neg_inf ? 0.0f : expf(s - m_new);
        m[r] = m_new;
      }
      l[r] = l[r] * corr + warp_sum(p[r]);
#pragma unroll
      for (int c = 0; c < CV; ++c) acc[r][c] *= corr;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) pw[lane * R + r] = p[r];
    cp_async_wait_all();
    __syncwarp();
#pragma unroll 4
    for (int jj = 0; jj < nb; ++jj) {
      float pj[R], vf[CV];
#pragma unroll
      for (int r = 0; r < R; r += (R % 4 == 0 ? 4 : 1)) {
        if constexpr (R % 4 == 0) {
          const float4 t = *reinterpret_cast<const float4*>(pw + jj * R + r);
          pj[r] = t.x, pj[r + 1] = t.y, pj[r + 2] = t.z, pj[r + 3] = t.w;
        } else {
          pj[r] = pw[jj * R + r];
        }
      }
      const Pack<S, CV> vp = *reinterpret_cast<const Pack<S, CV>*>(vw + jj * dv + lane * CV);
#pragma unroll
      for (int c = 0; c < CV; ++c) vf[c] = static_cast<float>(load(vp.v[c]));
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[r][c] = fmaf(pj[r], vf[c], acc[r][c]);
    }
    __syncwarp();  // the next tile overwrites vw and pw
  }
  // the warps' results merged: running maxes and sums, the sums of values rescaled to the largest
  __syncthreads();
  float* xacc = reinterpret_cast<float*>(dsm);  // [warp][R][dv] over the value tiles
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; ++r) xm[warp][r] = m[r], xl[warp][r] = l[r];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < CV; ++c) xacc[(warp * R + r) * dv + lane * CV + c] = acc[r][c];
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * dv; idx += blockDim.x) {
    const int r = idx / dv, c = idx - r * dv;
    float mx = neg_inf;
    for (int w = 0; w < kDecWarps; ++w) mx = xm[w][r] > mx ? xm[w][r] : mx;
    float lsum = 0.0f, a = 0.0f;
    if (mx != neg_inf)
      for (int w = 0; w < kDecWarps; ++w) {
        if (xm[w][r] == neg_inf) continue;
        const float e = expf(xm[w][r] - mx);
        lsum += xl[w][r] * e;
        a += xacc[(w * R + r) * dv + c] * e;
      }
    if (splits == 1) {
      out[row_out(r) * dv + c] = store<S>(a * (lsum > 0.0f ? 1.0f / lsum : 0.0f));
    } else {
      float* pr = part + (row_out(r) * splits + split) * (dv + 2);
      if (c == 0) pr[0] = mx, pr[1] = lsum;
      pr[2 + c] = a;
    }
  }
  if (splits == 1) return quantize_out(out, row_out(0) * dv, rows * dv, q8);
  // the last split of the kv head to finish merges them all
  if (!last_to_finish(counters + unit, splits)) return;
  for (int r = warp; r < rows; r += kDecWarps) {
    const float inv = split_weights(part + row_out(r) * splits * (dv + 2), splits, dv + 2, ws[r], lane);
    if (lane == 0) inv_l[r] = inv;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * dv; idx += blockDim.x) {
    const int r = idx / dv, c = idx - r * dv;
    const float* pr = part + row_out(r) * splits * (dv + 2) + 2 + c;
    float a = 0.0f;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp) a += ws[r][sp] * __ldcg(pr + sp * (dv + 2));
    out[row_out(r) * dv + c] = store<S>(a * inv_l[r]);
  }
  if (threadIdx.x == 0) counters[unit] = 0;  // for the next call (every split has counted)
  quantize_out(out, row_out(0) * dv, rows * dv, q8);
}

template <typename S>
constexpr bool decode_dtype() {
  return std::is_same_v<S, float> || std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16>;
}

inline size_t decode_smem_bytes(size_t elem, int64_t d, int64_t dv, int rows) {
  return elem * kDecWarps * 32 * static_cast<size_t>(dv) +
         sizeof(float) * static_cast<size_t>(rows * d + kDecWarps * 32 * rows);
}

template <typename S, int R, int CV>
cudaError_t launch_decode(const S* q, const S* k, const S* v, const AttnGeo& g, const AttnOpts& o, int splits,
                          float* part, uint32_t* counters, S* out, const ActsQ8Out& q8, cudaStream_t s) {
  const size_t bytes = decode_smem_bytes(sizeof(S), g.d, g.dv, R);
  auto kernel = attn_decode_kernel<S, R, CV>;
  if (bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  const int64_t blocks = g.b * g.hkv * splits;
  kernel<<<static_cast<unsigned>(blocks), kDecWarps * 32, bytes, s>>>(q, k, v, g, o, splits, part, counters,
                                                                      out, q8);
  return cudaGetLastError();
}

template <typename S, int R>
cudaError_t decode_by_cv(const S* q, const S* k, const S* v, const AttnGeo& g, const AttnOpts& o, int splits,
                         float* part, uint32_t* counters, S* out, const ActsQ8Out& q8, cudaStream_t s) {
  switch (g.dv) {
    case 64: return launch_decode<S, R, 2>(q, k, v, g, o, splits, part, counters, out, q8, s);
    case 128: return launch_decode<S, R, 4>(q, k, v, g, o, splits, part, counters, out, q8, s);
    default: return launch_decode<S, R, 8>(q, k, v, g, o, splits, part, counters, out, q8, s);
  }
}

// ---- the decode kernel, row form (by default from 4 query rows a kv head: decode_form) ----
// One block per (batch, kv head, split) and one warp per query row of the kv head (its group x tq
// rows, <= 8): a decode step's GQA group shares each value tile, and every warp carries a single
// row, so its chains are short and the SM holds several warps. The split's keys go in tiles of 32:
// each lane scores one key, its row read straight from global memory in 16-byte packs against q in
// shared memory (two partial sums); the warp's online softmax (running max and sum by shuffles);
// then lanes own CV value columns and sum the tile's 32 value rows, which the block brought into
// shared memory with cp.async (double-buffered, issued a tile ahead). A split that is not alone
// writes its running max, sum and accumulator; the last block of the kv head to finish merges
// them, a warp a row.
template <typename S, int CV>
__global__ void __launch_bounds__(kDecMaxRows * 32)
    attn_decode_rows_kernel(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v,
                            AttnGeo g, AttnOpts o, int splits, float* __restrict__ part,
                            uint32_t* __restrict__ counters, S* __restrict__ out,
                            const __grid_constant__ ActsQ8Out q8) {
  pdl_entry();
  constexpr int dv = 32 * CV;
  constexpr int kElems = 16 / static_cast<int>(sizeof(S));  // elements of a 16-byte chunk
  constexpr int kPerRow = dv / kElems;                      // chunks of a value row
  extern __shared__ __align__(16) unsigned char dsm[];
  const int d = static_cast<int>(g.d);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = static_cast<int>(g.h / g.hkv), tq = static_cast<int>(g.tq);
  const int rows = group * tq;                                          // == the block's warps
  S* vbuf = reinterpret_cast<S*>(dsm);                                  // [2][32][dv]
  float* qs = reinterpret_cast<float*>(dsm + sizeof(S) * 2 * 32 * dv);  // [rows][d]
  float* pw = qs + rows * d + warp * 32;                                // [rows][32]: this warp's
  __shared__ float ws[kDecMaxRows][kDecMaxSplits];
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int tk = static_cast<int>(key_count(g, o));
  const int split = static_cast<int>(blockIdx.x % splits);
  const int64_t unit = blockIdx.x / splits, kvh = unit % g.hkv, bi = unit / g.hkv;
  // the rows' visible keys: this warp's, and the union that the splits share out
  int lo = 0, hi = 0, tlo = tk, thi = 0;
  for (int r = 0; r < rows; ++r) {
    int a, e;
    visible_keys(o, tk, tk - tq + r % tq, a, e);
    if (r == warp) lo = a, hi = e;
    if (a < e) {
      tlo = a < tlo ? a : tlo;
      thi = e > thi ? e : thi;
    }
  }
  if (thi < tlo) thi = tlo;
  {  // this split's share: whole 32-key tiles, as even as they go
    const int ntiles = (thi - tlo + 31) / 32;
    const int t0 = static_cast<int>(static_cast<int64_t>(ntiles) * split / splits);
    const int t1 = static_cast<int>(static_cast<int64_t>(ntiles) * (split + 1) / splits);
    const int s1 = tlo + 32 * t1;
    tlo += 32 * t0;
    thi = s1 < thi ? s1 : thi;
  }
  const int64_t row = (bi * g.h + kvh * group + warp / tq) * g.tq + warp % tq;  // of out
  {
    const S* qr = q + bi * g.qs[0] + (kvh * group + warp / tq) * g.qs[1] + (warp % tq) * g.qs[2];
    for (int i = lane; i < d; i += 32) qs[warp * d + i] = static_cast<float>(load(qr[i]));
  }
  const S* kb = k + bi * g.ks[0] + kvh * g.ks[1];
  const S* vb = v + bi * g.vs[0] + kvh * g.vs[1];
  // the value tile at j0 into buffer b, by the whole block
  auto stage_v = [&](int j0, int b) {
    const int nb = thi - j0 < 32 ? thi - j0 : 32;
    S* dst = vbuf + b * 32 * dv;
    for (int c = threadIdx.x; c < nb * kPerRow; c += blockDim.x) {
      const int jj = c / kPerRow, ch = c - jj * kPerRow;
      cp_async16(dst + jj * dv + ch * kElems, vb + (j0 + jj) * g.vs[2] + ch * kElems);
    }
  };
  if (tlo < thi) stage_v(tlo, 0);
  __syncwarp();  // qs of this warp written
  float m = neg_inf, l = 0.0f, acc[CV];
#pragma unroll
  for (int c = 0; c < CV; ++c) acc[c] = 0.0f;
  const float* qr = qs + warp * d;
  for (int j0 = tlo, b = 0; j0 < thi; j0 += 32, b ^= 1) {
    const int nb = thi - j0 < 32 ? thi - j0 : 32;
    const int key = j0 + lane;
    float sa[1] = {0.0f}, sb[1] = {0.0f};
    if (lane < nb) score_key<1>(kb + key * g.ks[2], d, qr, sa, sb);
    float s = neg_inf;
    if (lane < nb && key >= lo && key < hi) {
      s = (sa[0] + sb[0]) * o.scale;
      if (o.softcap > 0.0f) s = o.softcap * tanhf(s / o.softcap);
    }
    const float mb = warp_max(s);
    const float m_new = m > mb ? m : mb;
    float corr = 1.0f, p = 0.0f;
    if (m_new != neg_inf) {  // uniform over the warp
      corr = m == neg_inf ? 0.0f : expf(m - m_new);
      p = s == neg_inf ? 0.0f : expf(s - m_new);
      m = m_new;
    }
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int c = 0; c < CV; ++c) acc[c] *= corr;
    pw[lane] = p;
    cp_async_wait_all();
    __syncthreads();  // the block's value tile is in; the other buffer is free again
    if (j0 + 32 < thi) stage_v(j0 + 32, b ^ 1);
    if (m_new != neg_inf) {
      const S* vt = vbuf + b * 32 * dv + lane * CV;
#pragma unroll 8
      for (int jj = 0; jj < nb; ++jj) {
        const float pj = pw[jj];
        const Pack<S, CV> vp = *reinterpret_cast<const Pack<S, CV>*>(vt + jj * dv);
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[c] = fmaf(pj, static_cast<float>(load(vp.v[c])), acc[c]);
      }
    }
    __syncwarp();  // pw is rewritten by the next tile
  }
  if (splits == 1) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    S* dst = out + row * dv + lane * CV;
#pragma unroll
    for (int c = 0; c < CV; ++c) dst[c] = store<S>(acc[c] * inv);
    return quantize_out(out, (row - warp) * dv, rows * dv, q8);
  }
  {
    float* pr = part + (row * splits + split) * (dv + 2);
    if (lane == 0) pr[0] = m, pr[1] = l;
#pragma unroll
    for (int c = 0; c < CV; ++c) pr[2 + lane * CV + c] = acc[c];
  }
  // the last split of the kv head to finish merges them all, a warp a row
  if (!last_to_finish(counters + unit, splits)) return;
  const float* pr = part + row * splits * (dv + 2);
  const float inv = split_weights(pr, splits, dv + 2, ws[warp], lane);
  __syncwarp();
  float a[CV];
#pragma unroll
  for (int c = 0; c < CV; ++c) a[c] = 0.0f;
#pragma unroll 4
  for (int sp = 0; sp < splits; ++sp) {
    const float w = ws[warp][sp];
#pragma unroll
    for (int c = 0; c < CV; ++c) a[c] += w * __ldcg(pr + sp * (dv + 2) + 2 + lane * CV + c);
  }
  S* dst = out + row * dv + lane * CV;
#pragma unroll
  for (int c = 0; c < CV; ++c) dst[c] = store<S>(a[c] * inv);
  if (threadIdx.x == 0) counters[unit] = 0;  // for the next call (every split has counted)
  quantize_out(out, (row - warp) * dv, rows * dv, q8);
}

inline size_t rows_smem_bytes(size_t elem, int64_t d, int64_t dv, int64_t rows) {
  return elem * 2 * 32 * static_cast<size_t>(dv) + sizeof(float) * static_cast<size_t>(rows * (d + 32));
}

template <typename S, int CV>
cudaError_t launch_rows(const S* q, const S* k, const S* v, const AttnGeo& g, const AttnOpts& o, int splits,
                        float* part, uint32_t* counters, S* out, const ActsQ8Out& q8, cudaStream_t s) {
  const int64_t rows = (g.h / g.hkv) * g.tq;
  const size_t bytes = rows_smem_bytes(sizeof(S), g.d, g.dv, rows);
  auto kernel = attn_decode_rows_kernel<S, CV>;
  if (bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  const int64_t blocks = g.b * g.hkv * splits;
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(32 * rows), bytes, s>>>(
      q, k, v, g, o, splits, part, counters, out, q8);
  return cudaGetLastError();
}

template <typename S>
cudaError_t launch_rows_dv(const S* q, const S* k, const S* v, const AttnGeo& g, const AttnOpts& o,
                           int splits, float* part, uint32_t* counters, S* out, const ActsQ8Out& q8,
                           cudaStream_t s) {
  switch (g.dv) {
    case 64: return launch_rows<S, 2>(q, k, v, g, o, splits, part, counters, out, q8, s);
    case 128: return launch_rows<S, 4>(q, k, v, g, o, splits, part, counters, out, q8, s);
    default: return launch_rows<S, 8>(q, k, v, g, o, splits, part, counters, out, q8, s);
  }
}

template <typename S>
cudaError_t launch_attn(const S* q, const S* k, const S* v, const AttnGeo& g, const AttnOpts& o, int splits,
                        float* part, S* out, cudaStream_t s) {
  const size_t bytes = smem_bytes(g.d, g.dv);
  auto kernel = g.dv <= 64 ? attn_kernel<S, 2> : (g.dv <= 128 ? attn_kernel<S, 4> : attn_kernel<S, 8>);
  if (bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  const int64_t rows = (g.h / g.hkv) * g.tq;
  int64_t units = g.b * g.hkv * ((rows + kWarps - 1) / kWarps) * splits;
  constexpr int64_t kMaxGrid = 65535LL * 32;
  units = units > kMaxGrid ? kMaxGrid : units;
  kernel<<<static_cast<unsigned>(units), kWarps * 32, bytes, s>>>(q, k, v, g, o, splits,
                                                                  splits > 1 ? part : nullptr, out);
  return cudaGetLastError();
}

// Splits for the general kernel: about 32 keys each (of the buffers' length: with a key count on
// the device the kernel shares out the real range, and splits past it exit at once), from 32 keys
// on. A decode step has few units (TinyLlama: 4 KV heads x 8 query rows = 8 blocks on 132 SMs),
// so even a short context is worth splitting: on the H200, Q4_0 TinyLlama tg128 603 -> 794
// tokens/s and tg512 531 -> 740 against the earlier 128 keys a split from 256 on (splits of 16 or
// 64 were slower).
int general_splits(const AttnGeo& g, int sm_count) {
  const int64_t units = g.b * g.hkv * (((g.h / g.hkv) * g.tq + kWarps - 1) / kWarps);
  const int64_t target = 2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  constexpr int64_t kKeysPerSplit = 32;
  if (units >= target || g.tk < kKeysPerSplit) return 1;
  int64_t splits = (target + units - 1) / units;
  // (one tile a split at most: 216 keys in 6 splits left some blocks 2 tiles, the step's critical path)
  const int64_t by_keys = (g.tk + kKeysPerSplit - 1) / kKeysPerSplit;
  splits = splits < by_keys ? splits : by_keys;
  splits = splits < 64 ? splits : 64;
  return splits < 2 ? 1 : static_cast<int>(splits);
}

// The decode kernel's form for `rows` query rows a kv head (CANDLE_CUDA_ATTN_DECODE, read at each
// call so that tests can switch it): "0" none (the general kernel), "rows" the row form (a warp a
// query row), "tile" the tile form; by default the row form from 4 rows (a GQA group) and the tile
// form below. On the H100 (session 30) the row form took TinyLlama Q4_0's tg128 (8 rows) from 820.5
// to 901.8 tokens/s and LLaMA-7B's (1 row) from 350.7 to 332.5; 4 rows were not measured.
AttnPlan::Decode decode_form(int64_t rows) {
  const char* e = std::getenv("CANDLE_CUDA_ATTN_DECODE");
  if (e && std::string(e) == "0") return AttnPlan::Decode::None;
  if (e && std::string(e) == "rows") return AttnPlan::Decode::Rows;
  if (e && std::string(e) == "tile") return AttnPlan::Decode::Tile;
  return rows >= 4 ? AttnPlan::Decode::Rows : AttnPlan::Decode::Tile;
}

// Keys a split (CANDLE_CUDA_ATTN_SPLIT_KEYS, a multiple of 32): by default 128 for the tile form
// (a 32-key tile for each of its 4 warps; on the H200 TinyLlama Q4_0's tg128 was 829 / 849 / 873 /
// 957 tokens/s with 32 / 64 / 128 / 256) and 64 for the row form (two tiles a block, each warp
// taking all of them).
int64_t decode_split_keys(AttnPlan::Decode form) {
  const char* e = std::getenv("CANDLE_CUDA_ATTN_SPLIT_KEYS");
  const long long x = e ? std::atoll(e) : 0;
  if (x >= 32 && x % 32 == 0) return static_cast<int64_t>(x);
  return form == AttnPlan::Decode::Rows ? 64 : 32 * kDecWarps;
}

bool decode_fits(AttnPlan::Decode form, Dt dt, const void* k, const void* v, const AttnGeo& g) {
  if (form == AttnPlan::Decode::None || (dt != Dt::F32 && dt != Dt::F16 && dt != Dt::BF16)) return false;
  const size_t es = dt == Dt::F32 ? 4 : 2, pack = 16 / es;
  const int64_t rows = (g.h / g.hkv) * g.tq;
  if (rows > kDecMaxRows || g.d % 8 != 0 || (g.dv != 64 && g.dv != 128 && g.dv != 256) ||
      g.tk > (int64_t{1} << 30) || g.b * g.hkv > kAttnCounters)
    return false;
  if (!aligned_to(k, 16) || !aligned_to(v, 16)) return false;
  for (int i = 0; i < 3; ++i)
    if (g.ks[i] % static_cast<int64_t>(pack) != 0 || g.vs[i] % static_cast<int64_t>(pack) != 0) return false;
  const size_t bytes = form == AttnPlan::Decode::Rows ? rows_smem_bytes(es, g.d, g.dv, rows)
                                                      : decode_smem_bytes(es, g.d, g.dv, kDecMaxRows);
  return bytes <= 96 * 1024;
}

}  // namespace

AttnPlan attention_plan(Dt dt, const void* k, const void* v, const AttnGeo& g, int sm_count) {
  AttnPlan p;
  if (g.hkv <= 0 || g.h % g.hkv != 0) return p;
  const AttnPlan::Decode form = decode_form((g.h / g.hkv) * g.tq);
  if (!decode_fits(form, dt, k, v, g)) {
    p.splits = general_splits(g, sm_count);
    return p;
  }
  p.decode = form;
  const int64_t units = g.b * g.hkv;
  const int64_t target = 2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  const int64_t step = decode_split_keys(form);
  int64_t splits = (target + units - 1) / units;
  const int64_t by_keys = (g.tk + step - 1) / step;
  splits = splits < by_keys ? splits : by_keys;
  splits = splits < kDecMaxSplits ? splits : kDecMaxSplits;
  p.splits = splits < 2 ? 1 : static_cast<int>(splits);
  return p;
}

size_t attention_part_floats(const AttnGeo& g, int splits) {
  return static_cast<size_t>(g.b * g.h * g.tq) * static_cast<size_t>(splits) * static_cast<size_t>(g.dv + 2);
}

cudaError_t attention(Dt dt, const void* q, const void* k, const void* v, const AttnGeo& g, const AttnOpts& o,
                      const AttnPlan& plan, float* part, uint32_t* counters, void* out, cudaStream_t s,
                      const ActsQ8Out& q8) {
  const int splits = plan.splits;
  const bool decode = plan.decode != AttnPlan::Decode::None;
  if (g.d > kAttnMaxD || g.dv > kAttnMaxD || g.hkv <= 0 || g.h % g.hkv != 0 || g.tq > g.tk || splits < 1 ||
      (splits > 1 && !part) || (decode && (splits > kDecMaxSplits || (splits > 1 && !counters))))
    return cudaErrorInvalidValue;
  if (g.b * g.h * g.tq * g.dv == 0) return cudaSuccess;
  const int64_t span = (g.h / g.hkv) * g.tq * g.dv;  // a kv head's output rows
  if (q8.any() && (!decode || g.tq != 1 || g.dv % 32 != 0 || (q8.q[1] && span % 256 != 0)))
    return cudaErrorInvalidValue;
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    const S *qq = static_cast<const S*>(q), *kk = static_cast<const S*>(k), *vv = static_cast<const S*>(v);
    S* oo = static_cast<S*>(out);
    if constexpr (decode_dtype<S>()) {
      if (plan.decode == AttnPlan::Decode::Rows)
        return launch_rows_dv<S>(qq, kk, vv, g, o, splits, part, counters, oo, q8, s);
      if (decode) {
        const int64_t rows = (g.h / g.hkv) * g.tq;
        if (rows <= 1) return decode_by_cv<S, 1>(qq, kk, vv, g, o, splits, part, counters, oo, q8, s);
        if (rows <= 4) return decode_by_cv<S, 4>(qq, kk, vv, g, o, splits, part, counters, oo, q8, s);
        return decode_by_cv<S, 8>(qq, kk, vv, g, o, splits, part, counters, oo, q8, s);
      }
    }
    if (decode) return cudaErrorInvalidValue;
    cudaError_t e = launch_attn<S>(qq, kk, vv, g, o, splits, part, oo, s);
    if (e != cudaSuccess || splits == 1) return e;
    const int64_t rows = g.b * g.h * g.tq;
    combine_kernel<S><<<grid_for(rows * g.dv), kBlock, 0, s>>>(part, splits, rows, g.dv, oo);
    return cudaGetLastError();
  });
}

namespace {

// one warp a row; the row's scores read three times (max, sum, write), from L2 for the sizes the
// caller's chunks keep
__global__ void softmax_rows_kernel(float* __restrict__ s, int64_t total, int64_t rows, int64_t n, int64_t q0,
                                    int64_t tq, int64_t offset, AttnOpts o) {
  pdl_entry();
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < total;
       row += warps) {
    const int64_t pos = offset + (q0 + row % rows) % tq;
    const int64_t hi0 = o.causal ? pos + 1 : n, hi = hi0 < n ? hi0 : n;
    int64_t lo = (o.window > 0 && pos + 1 > o.window) ? pos + 1 - o.window : 0;
    if (lo > hi) lo = hi;
    float* r = s + row * n;
    float m = neg_inf;
    for (int64_t j = lo + lane; j < hi; j += 32) {
      float x = r[j];
      if (o.softcap > 0.0f) {
        x = o.softcap * tanhf(x / o.softcap);
        r[j] = x;
      }
      m = fmaxf(m, x);
    }
    m = warp_max(m);
    float l = 0.0f;
    if (m != neg_inf)
      for (int64_t j = lo + lane; j < hi; j += 32) l += expf(r[j] - m);
    l = warp_sum(l);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t j = lane; j < n; j += 32)
      r[j] = (j >= lo && j < hi && m != neg_inf) ? expf(r[j] - m) * inv : 0.0f;
  }
}

}  // namespace

cudaError_t attention_softmax_rows(float* s, int64_t blocks, int64_t rows, int64_t n, int64_t q0, int64_t tq,
                                   int64_t offset, const AttnOpts& o, cudaStream_t st) {
  const int64_t total = blocks * rows;
  if (total == 0 || n == 0) return cudaSuccess;
  softmax_rows_kernel<<<grid_for(total * 32), kBlock, 0, st>>>(s, total, rows, n, q0, tq, offset, o);
  return cudaGetLastError();
}

}  // namespace candle::cuda_k
