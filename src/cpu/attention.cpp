// Fused scaled dot-product attention on the CPU (the BackendStorage hook behind
// candle::nn::ops::scaled_dot_product_attention): flash-attention style, no mask tensor and no
// score matrix beyond one block. The keys are read transposed in f32 (so that a row's 64 scores are
// vector lanes summed in order of the head dim; f16 / bf16 values are converted too, f32 ones read
// in place): once per kv head for a prompt, block by block for a decode. Work items are (batch, kv
// head, tile of rows), a kv head's rows being its query heads' queries interleaved; for each tile
// the visible keys are visited in blocks of kKeyBlock on a fixed grid, 4 (AVX-512) or 2 rows at a
// time sharing each load of the keys and values, and every row keeps a running max, a running sum
// and an f32 accumulator (online softmax). A row's arithmetic is the same whichever tile, thread or
// group of rows computes it (multiplies and adds unfused: see CMakeLists.txt), so the bytes do not
// depend on the thread count, and a prompt's rows are those of its queries decoded one by one.
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
#include "cpu/host_alloc.h"
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

// acc[r * lda + c] (+)= sum_k x[r * ldx + k] * y[k * ldy + c] for R rows, k in [k0, k1) in order, and
// the L * W columns c held in W vectors of L lanes in registers (from 0 when kZero): every load of y
// shared by the R rows, each output's sum the same whatever R, W and L
template <size_t R, size_t W, size_t L, bool kZero = false>
__attribute__((always_inline)) inline void rank1_updates(float* acc, size_t lda, const float* x, size_t ldx,
                                                         const float* y, size_t ldy, size_t k0, size_t k1) {
  typedef float V __attribute__((vector_size(L * sizeof(float)), aligned(4), may_alias));
  V a[R][W];
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t w = 0; w < W; ++w) a[r][w] = kZero ? V{} : *reinterpret_cast<const V*>(acc + r * lda + L * w);
  for (size_t k = k0; k < k1; ++k) {
    const float* yr = y + k * ldy;
    V yv[W];
#pragma GCC unroll 4
    for (size_t w = 0; w < W; ++w) yv[w] = *reinterpret_cast<const V*>(yr + L * w);
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) {
      const float xk = x[r * ldx + k];
#pragma GCC unroll 4
      for (size_t w = 0; w < W; ++w) a[r][w] += xk * yv[w];
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t w = 0; w < W; ++w) *reinterpret_cast<V*>(acc + r * lda + L * w) = a[r][w];
}

// s[r * kKeyBlock + j] = scale * dot(q_r, k_j) for R query rows (ldq floats apart) and the kKeyBlock
// keys of a block, from kt, the block's keys transposed (row i of kt, ldk floats apart, holds element
// i of the keys; the lanes past the block's keys may hold anything and are not used): each dot product
// summed in order of i, the keys in the vector lanes (no horizontal sums), L x W keys at a time (L 16
// only where the clone has 512-bit registers: GCC spills and shuffles 16-float vectors on AVX2)
template <size_t R, size_t W, size_t L>
CANDLE_TARGET_CLONES void block_scores(const float* q, size_t ldq, const float* kt, size_t ldk, size_t d,
                                       float scale, float* s) {
  static_assert(kKeyBlock % (L * W) == 0);
  for (size_t c = 0; c < kKeyBlock; c += L * W)
    rank1_updates<R, W, L, true>(s + c, kKeyBlock, q, ldq, kt + c, ldk, 0, d);
  for (size_t j = 0; j < R * kKeyBlock; ++j) s[j] *= scale;
}

// acc_r += sum_j p_r[j] * v[j] for R rows (acc_r lda floats apart, p_r kKeyBlock apart) over the keys
// [j0, j1) of a block (v's rows ldv floats apart), in order of j: L x W columns at a time, then L, then
// 8, then one by one
template <size_t R, size_t W, size_t L>
CANDLE_TARGET_CLONES void accumulate_rows(float* acc, size_t lda, size_t dv, const float* p, const float* v,
                                          size_t ldv, size_t j0, size_t j1) {
  size_t c = 0;
  for (; c + L * W <= dv; c += L * W) rank1_updates<R, W, L>(acc + c, lda, p, kKeyBlock, v + c, ldv, j0, j1);
  for (; c + L <= dv; c += L) rank1_updates<R, 1, L>(acc + c, lda, p, kKeyBlock, v + c, ldv, j0, j1);
  for (; c + 8 <= dv; c += 8) rank1_updates<R, 1, 8>(acc + c, lda, p, kKeyBlock, v + c, ldv, j0, j1);
  for (; c < dv; ++c)
    for (size_t r = 0; r < R; ++r) {
      float x = acc[r * lda + c];
      for (size_t j = j0; j < j1; ++j) x += p[r * kKeyBlock + j] * v[j * ldv + c];
      acc[r * lda + c] = x;
    }
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

// the largest of s[0, n) (8 running maxima, then theirs: the same value as one running maximum)
CANDLE_TARGET_CLONES float max_of(const float* s, size_t n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float part[8] = {neg_inf, neg_inf, neg_inf, neg_inf, neg_inf, neg_inf, neg_inf, neg_inf};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (size_t w = 0; w < 8; ++w) part[w] = std::max(part[w], s[j + w]);
  for (; j < n; ++j) part[0] = std::max(part[0], s[j]);
  float m = part[0];
  for (size_t w = 1; w < 8; ++w) m = std::max(m, part[w]);
  return m;
}

// s[j] = exp(s[j] - m) (0 where s[j] is -inf), returning their sum in a fixed order (8 partial sums)
CANDLE_TARGET_CLONES float exp_block(float* s, size_t n, float m) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // (the exponential taken for every lane, then selected, and -fno-trapping-math: the AVX2 clone's
  // loop vectorizes)
  for (size_t j = 0; j < n; ++j) {
    const float e = cpu::vm::exp_f32(s[j] - m);
    s[j] = s[j] == neg_inf ? 0.0f : e;
  }
  float part[8] = {};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (size_t w = 0; w < 8; ++w) part[w] += s[j + w];
  for (; j < n; ++j) part[j % 8] += s[j];
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

// Buffer i (0-3) of the calling thread, at least n floats (kept for the thread's next calls)
std::vector<float>& scratch(size_t i, size_t n) {
  thread_local std::vector<float> bufs[4];
  if (bufs[i].size() < n) bufs[i].resize(n);
  return bufs[i];
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
  const size_t offset = n.tk - n.tq;  // position of query 0 (tq <= tk checked by the caller)
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // the visible keys [lo, hi) of the query at position pos
  auto key_range = [&](size_t pos, size_t& lo, size_t& hi) {
    hi = p.causal ? pos + 1 : n.tk;
    lo = (p.sliding_window > 0 && pos + 1 > p.sliding_window) ? pos + 1 - p.sliding_window : 0;
    if (lo > hi) lo = hi;
  };
  // A kv head's rows are its query heads' rows interleaved (row t * group + g is query t of head
  // kvh * group + g), so the heads that share the keys read each block together (a decode's 8 heads
  // of a kv head are 8 rows), in tiles of 16 rows (4 when that leaves threads idle: a decode). A
  // unit (one tile) costs about rows x tk x (d + dv) multiply-adds: units grouped so that a thread's
  // share is worth waking it for (~64K of them; a decode over a short cache stays on the calling
  // thread), handed out as threads come free, the last tiles (a causal prompt's longest rows) first.
  // A row's bits do not depend on its tile: its blocks are the 64-key grid's and its sums the same.
  const size_t kv_rows = group * n.tq;
  size_t tile_rows = kQueryTile;
  if (n.b * n.hkv * ((kv_rows + tile_rows - 1) / tile_rows) < get_num_threads()) tile_rows = 4;
  const size_t tiles = (kv_rows + tile_rows - 1) / tile_rows;
  // Each kv head's keys transposed ([d][ldk]: a block of kKeyBlock keys from any j0 is kt + j0, the
  // lanes past tk zero) and, for f16 / bf16, its values in f32 ([tk][dv]), once for the tiles that
  // read them where more than 2 do (a prompt); else each tile transposes the blocks it visits into a
  // buffer of one block (a decode: no pass over every key into a buffer of all of them first)
  constexpr bool kValuesInPlace = std::is_same_v<T, float>;
  // (16 floats more than the keys: rows a power of two of bytes apart, 2 KiB at 512 keys, fell into 2
  // of the L1 cache's 64 sets, so a block's 64 rows did not stay in it)
  const size_t nblk = (n.tk + kKeyBlock - 1) / kKeyBlock;
  const size_t ldk = nblk * kKeyBlock + 16;
  const size_t kv_heads = n.b * n.hkv;
  const bool shared =
      tiles > 2 &&
      (kv_heads * (n.d * ldk + (kValuesInPlace ? 0 : n.tk * n.dv))) * sizeof(float) <= shared_keys_limit();
  // (from the CPU's block cache: a fresh mapping per call cost a page fault per 4 KiB)
  std::shared_ptr<void> kt_mem, v_mem;
  float *kt_all = nullptr, *v_all = nullptr;
  if (shared) {
    kt_mem = cpu::host_alloc(kv_heads * n.d * ldk * sizeof(float));
    kt_all = static_cast<float*>(kt_mem.get());
    if (!kValuesInPlace) {
      v_mem = cpu::host_alloc(kv_heads * n.tk * n.dv * sizeof(float));
      v_all = static_cast<float*>(v_mem.get());
    }
    // (~16K floats a chunk: at a decode's short contexts one chunk of 64K ran on the calling thread)
    const size_t grain = std::max<size_t>(1, (size_t{16} << 10) / (kKeyBlock * (n.d + n.dv)));
    cpu::parallel_for(kv_heads * nblk, grain, [&](size_t u0, size_t u1) {
      for (size_t u = u0; u < u1; ++u) {
        const size_t blk = u % nblk, bk = u / nblk, bi = bk / n.hkv, kvh = bk % n.hkv;
        const size_t j0 = blk * kKeyBlock, nb = std::min(kKeyBlock, n.tk - j0);
        float* kt = kt_all + bk * n.d * ldk;
        keys_transposed(k, bi, kvh, j0, nb, n.d, kt + j0, ldk);
        // the zero lanes past tk
        if (blk + 1 == nblk)
          for (size_t i = 0; i < n.d; ++i) std::fill(kt + i * ldk + j0 + nb, kt + (i + 1) * ldk, 0.0f);
        if constexpr (!kValuesInPlace)
          for (size_t j = 0; j < nb; ++j)
            to_f32(v.row(bi, kvh, j0 + j), n.dv, v_all + (bk * n.tk + j0 + j) * n.dv);
      }
    });
  }
  const size_t unit_work = std::max<size_t>(1, std::min(tile_rows, kv_rows) * n.tk * (n.d + n.dv));
  const size_t grain = std::max<size_t>(1, (size_t{64} << 10) / unit_work);
  // 4 rows at a time in 16-float vectors where the vector registers are 32 and 512 bits wide
  // (AVX-512), else 2 rows in 8-float vectors (16 registers of 256 bits)
  // (CANDLE_CPU_ATTN_NARROW=1: the latter everywhere, which the tests use to run both on any CPU)
  const char* narrow = std::getenv("CANDLE_CPU_ATTN_NARROW");
  const bool wide = has_avx512f() && !(narrow && std::string(narrow) == "1");
  cpu::parallel_for_dynamic(n.b * n.hkv * tiles, grain, [&](size_t u0, size_t u1) {
    // (the rows' buffers a thread keeps from call to call: items are handed out one by one, and each
    // handing had allocated them anew)
    std::vector<float>&qf = scratch(0, kQueryTile * n.d), &acc = scratch(1, kQueryTile * n.dv);
    std::vector<float>&kt = scratch(2, shared ? 0 : kKeyBlock * n.d),
    &vf = scratch(3, shared || kValuesInPlace ? 0 : kKeyBlock * n.dv);
    float m[kQueryTile], l[kQueryTile], corr[kQueryTile], s[kQueryTile * kKeyBlock];
    size_t vis_lo[kQueryTile], vis_hi[kQueryTile], pos[kQueryTile];
    for (size_t u = u0; u < u1; ++u) {
      const size_t tile = tiles - 1 - u % tiles, bk = u / tiles, bi = bk / n.hkv, kvh = bk % n.hkv;
      const size_t r0 = tile * tile_rows, rows = std::min(tile_rows, kv_rows - r0);
      // row r: query t of head kvh * group + g
      auto head_of = [&](size_t r) { return kvh * group + (r0 + r) % group; };
      size_t tile_lo = n.tk, tile_hi = 0;
      for (size_t r = 0; r < rows; ++r) {
        const size_t t = (r0 + r) / group;
        pos[r] = offset + t;
        to_f32(q.row(bi, head_of(r), t), n.d, qf.data() + r * n.d);
        size_t lo, hi;
        key_range(pos[r], lo, hi);
        tile_lo = std::min(tile_lo, lo);
        tile_hi = std::max(tile_hi, hi);
      }
      std::fill(acc.begin(), acc.begin() + rows * n.dv, 0.0f);
      std::fill(m, m + rows, neg_inf);
      std::fill(l, l + rows, 0.0f);
      for (size_t j0 = tile_lo / kKeyBlock * kKeyBlock; j0 < tile_hi; j0 += kKeyBlock) {
        const size_t nb = std::min(kKeyBlock, tile_hi - j0);
        // the block's keys transposed (kb, ldk apart) and values (vb, ldv apart)
        const size_t bk = bi * n.hkv + kvh;
        const float *kb = kt.data(), *vb = vf.data();
        size_t kld = kKeyBlock, ldv = n.dv;
        if (shared) {
          kb = kt_all + bk * n.d * ldk + j0;
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
          vb = v_all + (bk * n.tk + j0) * n.dv;
        } else {
          for (size_t j = 0; j < nb; ++j) to_f32(v.row(bi, kvh, j0 + j), n.dv, vf.data() + j * n.dv);
        }
        // every row's scores for the block, R rows at a time
        size_t r = 0;
        auto scores = [&](auto kernel, size_t R) {
          for (; r + R <= rows; r += R)
            kernel(qf.data() + r * n.d, n.d, kb, kld, n.d, p.scale, s + r * kKeyBlock);
        };
        if (wide) {
          scores(block_scores<4, 4, 16>, 4);
          scores(block_scores<2, 4, 16>, 2);
          scores(block_scores<1, 4, 16>, 1);
        } else {
          scores(block_scores<2, 4, 8>, 2);
          scores(block_scores<1, 4, 8>, 1);
        }
        // each row's online softmax: its visible keys [lo, hi) of the block (relative to j0; empty
        // where it sees none, then its accumulator is left as it is), the others' weights 0
        for (r = 0; r < rows; ++r) {
          size_t lo, hi;
          key_range(pos[r], lo, hi);
          const size_t a = std::max(lo, j0), e = std::min(hi, j0 + nb);
          vis_lo[r] = vis_hi[r] = 0;
          corr[r] = 1.0f;
          if (a >= e) continue;
          float* sr = s + r * kKeyBlock;
          std::fill(sr, sr + (a - j0), neg_inf);
          std::fill(sr + (e - j0), sr + nb, neg_inf);
          if (p.softcap > 0.0f)
            for (size_t j = a - j0; j < e - j0; ++j) sr[j] = p.softcap * std::tanh(sr[j] / p.softcap);
          const float mb = max_of(sr + (a - j0), e - a);
          const float m_new = std::max(m[r], mb);
          if (m_new == neg_inf) continue;  // every score -inf so far: nothing to add
          corr[r] = m[r] == neg_inf ? 0.0f : cpu::vm::exp_f32(m[r] - m_new);
          const float sum = exp_block(sr, nb, m_new);
          l[r] = l[r] * corr[r] + sum;
          m[r] = m_new;
          vis_lo[r] = a - j0;
          vis_hi[r] = e - j0;
        }
        // acc = acc * corr + p . v, row by row over the keys only some rows of a group see (zero
        // weights skipped there), the group's rows together over the keys all of them see (in order
        // of the keys either way: a row's bits are the same)
        auto edges = [&](size_t r1, float c, size_t from, size_t to) {
          if (from == to && c == 1.0f) return;
          scale_accumulate(acc.data() + r1 * n.dv, n.dv, c, s + r1 * kKeyBlock + from, vb + from * ldv, ldv,
                           to - from);
        };
        auto accumulate_group = [&](size_t r0g, size_t g, auto together) {
          size_t A = 0, E = kKeyBlock;
          for (size_t i = r0g; i < r0g + g; ++i) {
            A = std::max(A, vis_lo[i]);
            E = std::min(E, vis_hi[i]);
          }
          if (A >= E) {  // no key all of them see
            for (size_t i = r0g; i < r0g + g; ++i)
              if (vis_lo[i] < vis_hi[i]) edges(i, corr[i], vis_lo[i], vis_hi[i]);
            return;
          }
          for (size_t i = r0g; i < r0g + g; ++i) edges(i, corr[i], vis_lo[i], A);
          together(acc.data() + r0g * n.dv, n.dv, n.dv, s + r0g * kKeyBlock, vb, ldv, A, E);
          for (size_t i = r0g; i < r0g + g; ++i)
            if (E < vis_hi[i]) edges(i, 1.0f, E, vis_hi[i]);
        };
        r = 0;
        if (wide) {
          for (; r + 4 <= rows; r += 4) accumulate_group(r, 4, accumulate_rows<4, 4, 16>);
          for (; r + 2 <= rows; r += 2) accumulate_group(r, 2, accumulate_rows<2, 4, 16>);
        } else {
          for (; r + 2 <= rows; r += 2) accumulate_group(r, 2, accumulate_rows<2, 4, 8>);
        }
        for (; r < rows; ++r)
          if (vis_lo[r] < vis_hi[r]) edges(r, corr[r], vis_lo[r], vis_hi[r]);
      }
      for (size_t r = 0; r < rows; ++r) {
        T* dst = o + ((bi * n.h + head_of(r)) * n.tq + (r0 + r) / group) * n.dv;
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
