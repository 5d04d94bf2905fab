// Fused scaled dot-product attention on the CPU (the BackendStorage hook behind
// candle::nn::ops::scaled_dot_product_attention): flash-attention style, no mask tensor and no
// score matrix beyond one block. A first pass transposes each kv head's keys to f32 once (so that
// a row's 64 scores are vector lanes summed in order of the head dim; f16 / bf16 values are
// converted there too, f32 ones read in place). Work items are (batch, head, tile of query rows);
// for each tile the visible keys are visited in blocks of kKeyBlock (the values' columns
// accumulated 64 at a time in registers), and every row keeps a running max, a running sum and an
// f32 accumulator (online softmax). Each output row is computed by one thread in a fixed order, so
// the bytes do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "cpu/clones.h"
#include "cpu/parallel.h"
#include "cpu/vec_math.h"

namespace candle {
namespace {

constexpr size_t kQueryTile = 16;
constexpr size_t kKeyBlock = 64;

// A [b, h, t, d] operand: its data and element strides (the last dim contiguous).
template <typename T>
struct Operand4 {
  const T* data;
  size_t s0, s1, s2;
  const T* row(size_t b, size_t h, size_t t) const { return data + b * s0 + h * s1 + t * s2; }
};

// The layout's rows, with a dense copy (held by `keep`) when the last dim is not contiguous.
template <typename T>
Operand4<T> operand(const CpuStorage& s, const Layout& l, std::shared_ptr<CpuStorage>& keep) {
  const auto& st = l.stride();
  if (l.dims()[3] <= 1 || st[3] == 1) return {s.data<T>() + l.start_offset(), st[0], st[1], st[2]};
  keep = CpuStorage::alloc(s.dtype(), l.elem_count());
  s.copy_strided_src(*keep, 0, l);
  const auto& d = l.dims();
  return {keep->data<T>(), d[1] * d[2] * d[3], d[2] * d[3], d[3]};
}

template <typename T>
void to_f32(const T* src, size_t n, float* dst) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(src, src + n, dst);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

// 8 floats (GCC's vector extension: one ymm in the AVX2 / AVX-512 clones, two SSE registers in the
// default one), so that a row of accumulators stays in registers across a loop
// (unaligned and aliasing floats: loads and stores through it are plain unaligned moves)
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*reinterpret_cast<const v8f*>(p))
#define store8(p, v) (*reinterpret_cast<v8f*>(p) = (v))

// s[j] = scale * dot(q, k_j) for the kKeyBlock keys of a block, from kt, the block's keys transposed
// (row i of kt, ldk floats apart, holds element i of the keys; the lanes past the block's keys may
// hold anything and are not used): each dot product summed in order of i, the keys in the vector
// lanes (no horizontal sums)
CANDLE_TARGET_CLONES void block_scores(const float* q, const float* kt, size_t ldk, size_t d, float scale,
                                       float* s) {
  constexpr size_t W = kKeyBlock / 8;
  v8f acc[W] = {};
  for (size_t i = 0; i < d; ++i) {
    const float qi = q[i];
    const float* kr = kt + i * ldk;
#pragma GCC unroll 8
    for (size_t w = 0; w < W; ++w) acc[w] += qi * load8(kr + 8 * w);
  }
#pragma GCC unroll 8
  for (size_t w = 0; w < W; ++w) store8(s + 8 * w, acc[w] * scale);
}

// acc = acc * corr + sum_j p[j] * v[j] over the n rows of v (ldv floats apart, dv used), the columns
// in chunks of 64 held in registers across the keys; keys of weight 0 are skipped (a masked key's
// value may be anything)
template <size_t W>
inline void accumulate_chunk(float* acc, size_t ldv, float corr, const float* p, const float* v, size_t n) {
  v8f a[W];
#pragma GCC unroll 8
  for (size_t w = 0; w < W; ++w) a[w] = load8(acc + 8 * w) * corr;
  for (size_t j = 0; j < n; ++j) {
    const float pj = p[j];
    if (pj == 0.0f) continue;
    const float* vr = v + j * ldv;
#pragma GCC unroll 8
    for (size_t w = 0; w < W; ++w) a[w] += pj * load8(vr + 8 * w);
  }
#pragma GCC unroll 8
  for (size_t w = 0; w < W; ++w) store8(acc + 8 * w, a[w]);
}
CANDLE_TARGET_CLONES void scale_accumulate(float* acc, size_t dv, float corr, const float* p, const float* v,
                                           size_t ldv, size_t n) {
  size_t c = 0;
  for (; c + 64 <= dv; c += 64) accumulate_chunk<8>(acc + c, ldv, corr, p, v + c, n);
  for (; c + 8 <= dv; c += 8) accumulate_chunk<1>(acc + c, ldv, corr, p, v + c, n);
  for (; c < dv; ++c) {
    float x = acc[c] * corr;
    for (size_t j = 0; j < n; ++j)
      if (p[j] != 0.0f) x += p[j] * v[j * ldv + c];
    acc[c] = x;
  }
}

// s[j] = exp(s[j] - m) (0 where s[j] is -inf), returning their sum in a fixed order (8 partial sums)
CANDLE_TARGET_CLONES float exp_block(float* s, size_t n, float m) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < n; ++j) s[j] = s[j] == neg_inf ? 0.0f : cpu::vm::exp_f32(s[j] - m);
  float part[8] = {};
  for (size_t j = 0; j < n; ++j) part[j % 8] += s[j];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}
// kt[i * ldk + j] = k[j * lds + i] for the nb keys (rows of k) and d elements: 8 x 8 tiles in
// registers, the rest one by one
CANDLE_TARGET_CLONES void transpose_keys(const float* k, size_t lds, size_t nb, size_t d, float* kt,
                                         size_t ldk) {
  size_t j = 0;
  for (; j + 8 <= nb; j += 8) {
    size_t i = 0;
    for (; i + 8 <= d; i += 8) {
      v8f r[8];
      for (size_t a = 0; a < 8; ++a) r[a] = load8(k + (j + a) * lds + i);
      v8f t[8], u[8];
      for (size_t a = 0; a < 4; ++a) {
        t[2 * a] = __builtin_shufflevector(r[2 * a], r[2 * a + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[2 * a + 1] = __builtin_shufflevector(r[2 * a], r[2 * a + 1], 2, 10, 3, 11, 6, 14, 7, 15);
      }
      for (size_t a = 0; a < 2; ++a) {
        u[4 * a] = __builtin_shufflevector(t[4 * a], t[4 * a + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[4 * a + 1] = __builtin_shufflevector(t[4 * a], t[4 * a + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[4 * a + 2] = __builtin_shufflevector(t[4 * a + 1], t[4 * a + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[4 * a + 3] = __builtin_shufflevector(t[4 * a + 1], t[4 * a + 3], 2, 3, 10, 11, 6, 7, 14, 15);
      }
      for (size_t a = 0; a < 4; ++a) {
        store8(kt + (i + a) * ldk + j, __builtin_shufflevector(u[a], u[a + 4], 0, 1, 2, 3, 8, 9, 10, 11));
        store8(kt + (i + a + 4) * ldk + j,
               __builtin_shufflevector(u[a], u[a + 4], 4, 5, 6, 7, 12, 13, 14, 15));
      }
    }
    for (; i < d; ++i)
      for (size_t a = 0; a < 8; ++a) kt[i * ldk + j + a] = k[(j + a) * lds + i];
  }
  for (; j < nb; ++j)
    for (size_t i = 0; i < d; ++i) kt[i * ldk + j] = k[j * lds + i];
}
#undef load8
#undef store8

// dst[i * ldk + j] = key j0 + j's element i in f32, for the nb keys from j0 of kv head (bi, kvh)
template <typename T>
void keys_transposed(const Operand4<T>& k, size_t bi, size_t kvh, size_t j0, size_t nb, size_t d, float* dst,
                     size_t ldk) {
  if constexpr (std::is_same_v<T, float>) {
    transpose_keys(k.row(bi, kvh, j0), k.s2, nb, d, dst, ldk);
  } else {
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < nb; ++j) dst[i * ldk + j] = static_cast<float>(k.row(bi, kvh, j0 + j)[i]);
  }
}

struct Dims {
  size_t b, h, hkv, tq, tk, d, dv;
};

// The bytes the keys transposed (and the values in f32, for f16 / bf16) may take once per kv head
// (CANDLE_CPU_ATTN_SHARED_MB, default 64; read at each call); above it each work item transposes (and
// converts) the blocks it visits itself (the same bits either way).
size_t shared_keys_limit() {
  const char* e = std::getenv("CANDLE_CPU_ATTN_SHARED_MB");
  if (!e || !*e) return size_t{64} << 20;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(e, &end, 10);
  return end && *end == '\0' ? static_cast<size_t>(std::min<unsigned long long>(mb, 1ull << 20)) << 20
                             : size_t{64} << 20;
}

template <typename T>
StoragePtr attention_impl(const Operand4<T>& q, const Operand4<T>& k, const Operand4<T>& v, const Dims& n,
                          const AttentionParams& p) {
  auto out = CpuStorage::alloc(dtype_of<T>, n.b * n.h * n.tq * n.dv);
  T* o = out->template data<T>();
  const size_t group = n.h / n.hkv;
  const size_t tiles = (n.tq + kQueryTile - 1) / kQueryTile;
  const size_t offset = n.tk - n.tq;  // position of query 0 (tq <= tk checked by the caller)
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // the visible keys [lo, hi) of the query at position pos
  auto key_range = [&](size_t pos, size_t& lo, size_t& hi) {
    hi = p.causal ? pos + 1 : n.tk;
    lo = (p.sliding_window > 0 && pos + 1 > p.sliding_window) ? pos + 1 - p.sliding_window : 0;
    if (lo > hi) lo = hi;
  };
  // Each kv head's keys transposed ([d][ldk]: a block of kKeyBlock keys from any j0 is kt + j0, the
  // lanes past tk zero) and, for f16 / bf16, its values in f32 ([tk][dv]), once for every query head
  // and tile that reads them (decode with 8 query heads per kv head transposed each block 8 times)
  constexpr bool kValuesInPlace = std::is_same_v<T, float>;
  // (a block from an off-grid j0, a sliding window's, reaches into one block past the last; without a
  // window the blocks start on the grid: no such block to fill, which a decode step did once per layer)
  const size_t nblk = (n.tk + kKeyBlock - 1) / kKeyBlock;
  const size_t ldk = (nblk + (p.sliding_window > 0 ? 1 : 0)) * kKeyBlock;
  const size_t kv_heads = n.b * n.hkv;
  const bool shared =
      (kv_heads * (n.d * ldk + (kValuesInPlace ? 0 : n.tk * n.dv))) * sizeof(float) <= shared_keys_limit();
  std::unique_ptr<float[]> kt_all, v_all;
  if (shared) {
    kt_all.reset(new float[kv_heads * n.d * ldk]);
    if (!kValuesInPlace) v_all.reset(new float[kv_heads * n.tk * n.dv]);
    // (~16K floats a chunk: at a decode's short contexts one chunk of 64K ran on the calling thread)
    const size_t grain = std::max<size_t>(1, (size_t{16} << 10) / (kKeyBlock * (n.d + n.dv)));
    cpu::parallel_for(kv_heads * nblk, grain, [&](size_t u0, size_t u1) {
      for (size_t u = u0; u < u1; ++u) {
        const size_t blk = u % nblk, bk = u / nblk, bi = bk / n.hkv, kvh = bk % n.hkv;
        const size_t j0 = blk * kKeyBlock, nb = std::min(kKeyBlock, n.tk - j0);
        float* kt = kt_all.get() + bk * n.d * ldk;
        keys_transposed(k, bi, kvh, j0, nb, n.d, kt + j0, ldk);
        // the zero lanes past tk (the rest of the last block, and the block after it where there is one)
        if (blk + 1 == nblk)
          for (size_t i = 0; i < n.d; ++i) std::fill(kt + i * ldk + j0 + nb, kt + (i + 1) * ldk, 0.0f);
        if constexpr (!kValuesInPlace)
          for (size_t j = 0; j < nb; ++j)
            to_f32(v.row(bi, kvh, j0 + j), n.dv, v_all.get() + (bk * n.tk + j0 + j) * n.dv);
      }
    });
  }
  // a unit (one query tile of one head) costs about rows x tk x (d + dv) multiply-adds: units
  // grouped so that a thread's share is worth waking it for (~64K of them; a decode over a short
  // cache stays on the calling thread)
  const size_t unit_work = std::max<size_t>(1, std::min(kQueryTile, n.tq) * n.tk * (n.d + n.dv));
  const size_t grain = std::max<size_t>(1, (size_t{64} << 10) / unit_work);
  cpu::parallel_for(n.b * n.h * tiles, grain, [&](size_t u0, size_t u1) {
    std::vector<float> qf(kQueryTile * n.d), kt, vf;
    if (!shared) {
      kt.resize(kKeyBlock * n.d);
      if (!kValuesInPlace) vf.resize(kKeyBlock * n.dv);
    }
    std::vector<float> acc(kQueryTile * n.dv), m(kQueryTile), l(kQueryTile), s(kKeyBlock);
    for (size_t u = u0; u < u1; ++u) {
      const size_t tile = u % tiles, bh = u / tiles, hi_ = bh % n.h, bi = bh / n.h, kvh = hi_ / group;
      const size_t r0 = tile * kQueryTile, rows = std::min(kQueryTile, n.tq - r0);
      size_t tile_lo = n.tk, tile_hi = 0;
      for (size_t r = 0; r < rows; ++r) {
        to_f32(q.row(bi, hi_, r0 + r), n.d, qf.data() + r * n.d);
        size_t lo, hi;
        key_range(offset + r0 + r, lo, hi);
        tile_lo = std::min(tile_lo, lo);
        tile_hi = std::max(tile_hi, hi);
      }
      std::fill(acc.begin(), acc.begin() + rows * n.dv, 0.0f);
      std::fill(m.begin(), m.begin() + rows, neg_inf);
      std::fill(l.begin(), l.begin() + rows, 0.0f);
      for (size_t j0 = tile_lo; j0 < tile_hi; j0 += kKeyBlock) {
        const size_t nb = std::min(kKeyBlock, tile_hi - j0);
        // the block's keys transposed (kb, ldk apart) and values (vb, ldv apart)
        const size_t bk = bi * n.hkv + kvh;
        const float *kb = kt.data(), *vb = vf.data();
        size_t kld = kKeyBlock, ldv = n.dv;
        if (shared) {
          kb = kt_all.get() + bk * n.d * ldk + j0;
          kld = ldk;
        } else {
          keys_transposed(k, bi, kvh, j0, nb, n.d, kt.data(), kKeyBlock);
          for (size_t i = 0; nb < kKeyBlock && i < n.d; ++i)
            std::fill(kt.begin() + static_cast<std::ptrdiff_t>(i * kKeyBlock + nb),
                      kt.begin() + static_cast<std::ptrdiff_t>((i + 1) * kKeyBlock), 0.0f);
        }
        if constexpr (kValuesInPlace) {
          vb = v.row(bi, kvh, j0);
          ldv = v.s2;
        } else if (shared) {
          vb = v_all.get() + (bk * n.tk + j0) * n.dv;
        } else {
          for (size_t j = 0; j < nb; ++j) to_f32(v.row(bi, kvh, j0 + j), n.dv, vf.data() + j * n.dv);
        }
        for (size_t r = 0; r < rows; ++r) {
          size_t lo, hi;
          key_range(offset + r0 + r, lo, hi);
          const size_t a = std::max(lo, j0), e = std::min(hi, j0 + nb);
          if (a >= e) continue;
          // scores of the visible keys [a, e) of this block; the rest -inf
          block_scores(qf.data() + r * n.d, kb, kld, n.d, p.scale, s.data());
          float mb = neg_inf;
          for (size_t j = 0; j < nb; ++j) {
            if (j + j0 < a || j + j0 >= e) {
              s[j] = neg_inf;
              continue;
            }
            if (p.softcap > 0.0f) s[j] = p.softcap * std::tanh(s[j] / p.softcap);
            mb = std::max(mb, s[j]);
          }
          const float m_new = std::max(m[r], mb);
          if (m_new == neg_inf) continue;  // every score -inf so far: nothing to add
          const float corr = m[r] == neg_inf ? 0.0f : cpu::vm::exp_f32(m[r] - m_new);
          const float sum = exp_block(s.data(), nb, m_new);
          l[r] = l[r] * corr + sum;
          m[r] = m_new;
          scale_accumulate(acc.data() + r * n.dv, n.dv, corr, s.data(), vb, ldv, nb);
        }
      }
      for (size_t r = 0; r < rows; ++r) {
        T* dst = o + ((bi * n.h + hi_) * n.tq + r0 + r) * n.dv;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (size_t c = 0; c < n.dv; ++c) dst[c] = cast_value<T>(acc[r * n.dv + c] * inv);
      }
    }
  });
  return out;
}

}  // namespace

StoragePtr CpuStorage::scaled_dot_product_attention(const Layout& q_l, const BackendStorage& k,
                                                    const Layout& k_l, const BackendStorage& v,
                                                    const Layout& v_l, const AttentionParams& p) const {
  const auto* kc = dynamic_cast<const CpuStorage*>(&k);
  const auto* vc = dynamic_cast<const CpuStorage*>(&v);
  if (!kc || !vc || k.dtype() != dtype() || v.dtype() != dtype()) return nullptr;
  if (q_l.dims().size() != 4 || k_l.dims().size() != 4 || v_l.dims().size() != 4) return nullptr;
  const auto &qd = q_l.dims(), &kd = k_l.dims(), &vd = v_l.dims();
  Dims n{qd[0], qd[1], kd[1], qd[2], kd[2], qd[3], vd[3]};
  if (kd[0] != n.b || vd[0] != n.b || vd[1] != n.hkv || vd[2] != n.tk || kd[3] != n.d || n.hkv == 0 ||
      n.h % n.hkv != 0 || n.tq > n.tk)
    return nullptr;
  if (p.kv_len) {
    // the keys held: the first kv_len positions of the buffers (their rows keep their strides)
    const auto* lc = dynamic_cast<const CpuStorage*>(p.kv_len);
    if (!lc || lc->dtype() != DType::U32 || p.kv_len_offset >= lc->elem_count()) return nullptr;
    const size_t len = lc->data<uint32_t>()[p.kv_len_offset];
    if (len < n.tq || len > n.tk)
      throw Error(ErrorKind::InvalidArgument, "scaled_dot_product_attention: the key count " +
                                                  std::to_string(len) + " is not between the " +
                                                  std::to_string(n.tq) + " queries and the buffers' " +
                                                  std::to_string(n.tk) + " positions");
    n.tk = len;
  }
  return dispatch_float(dtype(), "scaled_dot_product_attention", [&]<typename T>() -> StoragePtr {
    if (n.b * n.h * n.tq * n.dv == 0) return CpuStorage::alloc(dtype(), 0);
    std::shared_ptr<CpuStorage> kq, kk, kv;
    return attention_impl<T>(operand<T>(*this, q_l, kq), operand<T>(*kc, k_l, kk), operand<T>(*vc, v_l, kv),
                             n, p);
  });
}

}  // namespace candle
