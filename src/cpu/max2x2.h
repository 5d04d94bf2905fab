// The 2x2 stride-2 max-pool window on f32, eight windows at a time: the forward (pool.cpp)
// and the gradient (conv_grad_pool.cpp) share it so that both pick the same element.
//
// A window is scanned in row-major order (r0[2o], r0[2o + 1], r1[2o], r1[2o + 1]); a later
// element replaces the current maximum when it is larger or NaN (PyTorch 1.13's CPU rule), so
// the first maximal element wins and of several NaNs the last one. The eight windows' even and
// odd columns are separated with vector shuffles, and the scan is done with vector compares
// and selects: the result is the one of the scalar scan, bit for bit.
//
// Callers compile these inline helpers inside functions with target_clones, so the 32-byte
// vectors become one AVX register or two SSE registers as the clone allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace candle::cpu::max2x2 {

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

// The even and odd elements of p[0..16).
inline void split(const float* p, V8& even, V8& odd) {
  V8 lo, hi;
  std::memcpy(&lo, p, sizeof(lo));
  std::memcpy(&hi, p + 8, sizeof(hi));
#if defined(__clang__)
  even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
  odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
#else
  even = __builtin_shuffle(lo, hi, I8{0, 2, 4, 6, 8, 10, 12, 14});
  odd = __builtin_shuffle(lo, hi, I8{1, 3, 5, 7, 9, 11, 13, 15});
#endif
}

// p[0..16) = even[0], odd[0], even[1], odd[1], ...
inline void join(const V8& even, const V8& odd, float* p) {
#if defined(__clang__)
  const V8 lo = __builtin_shufflevector(even, odd, 0, 8, 1, 9, 2, 10, 3, 11);
  const V8 hi = __builtin_shufflevector(even, odd, 4, 12, 5, 13, 6, 14, 7, 15);
#else
  const V8 lo = __builtin_shuffle(even, odd, I8{0, 8, 1, 9, 2, 10, 3, 11});
  const V8 hi = __builtin_shuffle(even, odd, I8{4, 12, 5, 13, 6, 14, 7, 15});
#endif
  std::memcpy(p, &lo, sizeof(lo));
  std::memcpy(p + 8, &hi, sizeof(hi));
}

// The maxima of windows o .. o + 8 (rows r0, r1 at column 2o) and which element of each
// (0..3 in scan order) gave it.
inline void windows(const float* r0, const float* r1, V8& m, I8& which) {
  V8 a0, a1, b0, b1;
  split(r0, a0, a1);
  split(r1, b0, b1);
  m = a0;
  which = I8{};
  const V8 cand[3] = {a1, b0, b1};
  for (int32_t k = 0; k < 3; ++k) {
    const V8 v = cand[k];
    const I8 take = (v > m) | (v != v);
    m = take ? v : m;
    which = take ? I8{} + (k + 1) : which;
  }
}

// The last n < 8 windows through the vector path: their inputs copied into zero-padded
// 16-wide rows (the padding's windows are computed and dropped), no data-dependent branches.
inline void tail_windows(const float* r0, const float* r1, size_t n, V8& m, I8& which) {
  float t0[16] = {}, t1[16] = {};
  std::memcpy(t0, r0, 2 * n * sizeof(float));
  std::memcpy(t1, r1, 2 * n * sizeof(float));
  windows(t0, t1, m, which);
}

}  // namespace candle::cpu::max2x2
