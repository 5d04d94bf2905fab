// The CPU matmul of f32 / f16 / bf16 weights (n rows of k) against f32 activations, for
// QMatMul's float weights: AVX-512, AVX2 (+ F16C, FMA) and plain C++, chosen by QmmIsa, with the
// same bits on every ISA and for any thread count (qmatmul_float.inc gives the order of the sums).
// The weights are read as they are (a mapped GGUF's f16 blocks: no f32 copy).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "candle/dtype.h"
#include "cpu/parallel.h"
#include "quantized/qmatmul_cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace candle::quantized {

namespace {

using QfRowsFn = void (*)(const uint8_t*, size_t, size_t, size_t, size_t, const float*, size_t, float*,
                          size_t);

// one weight's value as float
template <GgmlDType T>
float qf_weight(const uint8_t* p) {
  if constexpr (T == GgmlDType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return T == GgmlDType::BF16 ? bf16::to_f32(h) : f16::to_f32(h);
  }
}

// the last steps of the reduction shared by every ISA: 8 partial sums h[l] = a[l] + a[l + 8]
inline float qf_reduce8(const float* h) {
  const float q0 = h[0] + h[4], q1 = h[1] + h[5], q2 = h[2] + h[6], q3 = h[3] + h[7];
  return (q0 + q2) + (q1 + q3);
}

namespace scalar {
#define QF_TARGET
struct Acc {
  float v[16];
};
inline Acc qf_zero() { return Acc{}; }
template <GgmlDType T>
inline Acc qf_wload(const uint8_t* p) {
  Acc a;
  for (int l = 0; l < 16; ++l) a.v[l] = qf_weight<T>(p + l * (T == GgmlDType::F32 ? 4 : 2));
  return a;
}
inline Acc qf_xload(const float* p) {
  Acc a;
  std::memcpy(a.v, p, sizeof a.v);
  return a;
}
inline Acc qf_fma(Acc a, const Acc& w, const Acc& x) {
  for (int l = 0; l < 16; ++l) a.v[l] = std::fma(w.v[l], x.v[l], a.v[l]);
  return a;
}
inline float qf_reduce(const Acc& a) {
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = a.v[l] + a.v[l + 8];
  return qf_reduce8(h);
}
constexpr int kR = 2, kC = 2;
#include "quantized/qmatmul_float.inc"
#undef QF_TARGET
}  // namespace scalar

#if defined(__x86_64__) || defined(__i386__)
namespace avx2 {
#define QF_TARGET __attribute__((target("avx2,fma,f16c")))
#define QF_INLINE QF_TARGET __attribute__((always_inline)) inline
struct Acc {
  __m256 lo, hi;  // lanes 0..7, 8..15
};
QF_INLINE Acc qf_zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
QF_INLINE __m256 qf_bf16x8(const uint8_t* q) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))), 16));
}
template <GgmlDType T>
QF_INLINE Acc qf_wload(const uint8_t* p) {
  if constexpr (T == GgmlDType::F32) {
    return {_mm256_loadu_ps(reinterpret_cast<const float*>(p)),
            _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8)};
  } else if constexpr (T == GgmlDType::F16) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  } else {
    return {qf_bf16x8(p), qf_bf16x8(p + 16)};
  }
}
QF_INLINE Acc qf_xload(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
QF_INLINE Acc qf_fma(Acc a, Acc w, Acc x) {
  return {_mm256_fmadd_ps(w.lo, x.lo, a.lo), _mm256_fmadd_ps(w.hi, x.hi, a.hi)};
}
QF_INLINE float qf_reduce(Acc a) {
  alignas(32) float h[8];
  _mm256_store_ps(h, _mm256_add_ps(a.lo, a.hi));
  return qf_reduce8(h);
}
constexpr int kR = 2, kC = 3;
#include "quantized/qmatmul_float.inc"
#undef QF_INLINE
#undef QF_TARGET
}  // namespace avx2

namespace avx512 {
#define QF_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define QF_INLINE QF_TARGET __attribute__((always_inline)) inline
using Acc = __m512;
QF_INLINE Acc qf_zero() { return _mm512_setzero_ps(); }
template <GgmlDType T>
QF_INLINE Acc qf_wload(const uint8_t* p) {
  if constexpr (T == GgmlDType::F32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (T == GgmlDType::F16) {
    return _mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xFFFF,
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i z = _mm512_setzero_si512();
    const __m512i u =
        _mm512_mask_cvtepu16_epi32(z, 0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_mask_slli_epi32(z, 0xFFFF, u, 16));
  }
}
QF_INLINE Acc qf_xload(const float* p) { return _mm512_loadu_ps(p); }
QF_INLINE Acc qf_fma(Acc a, Acc w, Acc x) { return _mm512_fmadd_ps(w, x, a); }
QF_INLINE float qf_reduce(Acc a) {
  alignas(64) float v[16];
  _mm512_store_ps(v, a);
  float h[8];
  for (int l = 0; l < 8; ++l) h[l] = v[l] + v[l + 8];
  return qf_reduce8(h);
}
constexpr int kR = 4, kC = 6;
#include "quantized/qmatmul_float.inc"
#undef QF_INLINE
#undef QF_TARGET
}  // namespace avx512
#endif

}  // namespace

void qmatmul_cpu_float(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y,
                       QmmIsa isa) {
  QfRowsFn fn = scalar::qf_rows_for(t);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == QmmIsa::Avx512 || isa == QmmIsa::Amx)
    fn = avx512::qf_rows_for(t);
  else if (isa == QmmIsa::Avx2)
    fn = avx2::qf_rows_for(t);
#else
  (void)isa;
#endif
  const size_t row_bytes = k * (t == GgmlDType::F32 ? 4 : 2);
  const auto* wb = static_cast<const uint8_t*>(w);
  // units of 16 rows; a decode's chunks at least ~64 KiB of weights, a batch's at least a unit
  constexpr size_t kUnit = 16;
  const size_t units = (n + kUnit - 1) / kUnit;
  const size_t grain = m == 1 ? std::max<size_t>(1, (size_t{64} << 10) / (kUnit * row_bytes)) : 1;
  cpu::parallel_for(units, grain, [&](size_t u0, size_t u1) {
    fn(wb, row_bytes, u0 * kUnit, std::min(n, u1 * kUnit), k, x, m, y, n);
  });
}

}  // namespace candle::quantized
