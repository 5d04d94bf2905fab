// Fused scaled dot-product attention (semantics of src/cpu/attention.cpp): flash-attention style,
// no score matrix. A block of kWarps warps takes kWarps query rows that share one kv head (for
// GQA the rows of the head group, so a decode step's group reads each key once); the keys
// visible to any of its rows are staged through shared memory in tiles of kKeys rows, converted
// to f32. In a tile each lane scores one key (q from shared memory), the warp takes the tile's
// max and sum by shuffles, and each lane keeps dv / 32 f32 accumulators of its row (online
// softmax: running max, running sum, rescaled accumulator). Rows that see no key give zeros.
#include "launch_nn.h"
#include "nn_common.cuh"

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
  int64_t tk = g.tk;  // the keys held: the buffers' length, or the count on the device
  if (o.kv_len) {
    const int64_t n = *o.kv_len;
    tk = n < g.tq ? g.tq : (n > g.tk ? g.tk : n);
    if (tk != n && blockIdx.x == 0 && threadIdx.x == 0 && o.fault &&
        atomicCAS(o.fault, 0u, o.fault_tag) == 0u) {
      o.fault[1] = 0;
      o.fault[2] = static_cast<uint32_t>(n);
      o.fault[3] = 0;
    }
  }
  const int64_t offset = tk - g.tq;  // position of query 0
  // the visible keys [lo, hi) of the query at position pos
  auto key_range = [&](int64_t pos, int64_t& lo, int64_t& hi) {
    hi = o.causal ? pos + 1 : tk;
    lo = (o.window > 0 && pos + 1 > o.window) ? pos + 1 - o.window : 0;
    if (lo > hi) lo = hi;
  };
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

}  // namespace

int attention_splits(const AttnGeo& g, int sm_count) {
  if (g.hkv <= 0) return 1;
  const int64_t units = g.b * g.hkv * (((g.h / g.hkv) * g.tq + kWarps - 1) / kWarps);
  const int64_t target = 2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1);
  // Splits of about 32 keys (of the buffers' length: with a key count on the device the kernel
  // shares out the real range, and splits past it exit at once), from 32 keys on. A decode step
  // has few units (TinyLlama: 4 KV heads x 8 query rows = 8 blocks on 132 SMs), so even a short
  // context is worth splitting: on the H200, Q4_0 TinyLlama tg128 603 -> 794 tokens/s and tg512
  // 531 -> 740 against the earlier 128 keys a split from 256 on (splits of 16 or 64 were slower).
  constexpr int64_t kKeysPerSplit = 32;
  if (units >= target || g.tk < kKeysPerSplit) return 1;
  int64_t splits = (target + units - 1) / units;
  // (one tile a split at most: 216 keys in 6 splits left some blocks 2 tiles, the step's critical path)
  const int64_t by_keys = (g.tk + kKeysPerSplit - 1) / kKeysPerSplit;
  splits = splits < by_keys ? splits : by_keys;
  splits = splits < 64 ? splits : 64;
  return splits < 2 ? 1 : static_cast<int>(splits);
}

size_t attention_part_floats(const AttnGeo& g, int splits) {
  return static_cast<size_t>(g.b * g.h * g.tq) * static_cast<size_t>(splits) * static_cast<size_t>(g.dv + 2);
}

cudaError_t attention(Dt dt, const void* q, const void* k, const void* v, const AttnGeo& g, const AttnOpts& o,
                      int splits, float* part, void* out, cudaStream_t s) {
  if (g.d > kAttnMaxD || g.dv > kAttnMaxD || g.hkv <= 0 || g.h % g.hkv != 0 || g.tq > g.tk || splits < 1 ||
      (splits > 1 && !part))
    return cudaErrorInvalidValue;
  if (g.b * g.h * g.tq * g.dv == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    return launch_attn<S>(static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), g, o,
                          splits, part, static_cast<S*>(out), s);
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

cudaError_t attention_combine(Dt dt, const AttnGeo& g, int splits, const float* part, void* out,
                              cudaStream_t s) {
  const int64_t rows = g.b * g.h * g.tq;
  if (rows * g.dv == 0) return cudaSuccess;
  return with_float(dt, [&]<typename S>() -> cudaError_t {
    combine_kernel<S>
        <<<grid_for(rows * g.dv), kBlock, 0, s>>>(part, splits, rows, g.dv, static_cast<S*>(out));
    return cudaGetLastError();
  });
}

}  // namespace candle::cuda_k
