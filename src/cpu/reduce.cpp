// Reductions, cumsum and arg-sort on the CPU.
//
// Every reduction is planned the same way: the layout's dims split into kept dims (the
// output, row-major) and reduced dims, each group merged where the strides allow and
// size-1 dims dropped. Then one of two walks runs:
//  - per output ("row" walk): each output reduces its elements run by run, where a run is
//    the innermost reduced dim (contiguous in the common case: sum over the last dim);
//    parallel over outputs. With few outputs and many elements each (sum_all), the
//    reduced range is cut into fixed blocks of kSplitBlock elements whose partials are
//    combined in block order afterwards.
//  - per column ("column" walk): when the innermost reduced dim is strided but the last
//    kept dim is contiguous (sum over dim 0 of [4096, 4096]), whole rows are accumulated
//    into a vector of column accumulators; parallel over column tiles (and fixed blocks of
//    rows when there are few tiles).
// No cut depends on the thread count, and each output's partials are combined in a fixed
// order, so the bytes are the same for any number of threads.
//
// Accumulation: f32 (and f64) sums accumulate in f64 lanes (32 independent lanes added
// pairwise at the end): accurate to about f32 rounding for any length, deterministic, and
// still memory-bound. f16/bf16/f8e4m3 accumulate in f32 and round once. Integer sums wrap
// in the dtype, as candle (done in the unsigned type, so no signed-overflow UB).
// max/min propagate NaN (a NaN anywhere gives NaN); argmax/argmin give the first NaN if
// any, else the first occurrence of the extreme value (as PyTorch).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "cpu/clones.h"
#include "cpu/parallel.h"
#include "cpu/reduce_kernels.h"

#define CANDLE_INLINE inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CANDLE_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_CLONES
#endif

namespace candle {
namespace reduce_detail {

enum class Kind { Sum, Mean, Norm, Min, Max, ArgMin, ArgMax };

constexpr size_t kLanes = 32;                      // independent accumulators of the sum kernels
constexpr size_t kSplitBlock = size_t{32} * 1024;  // reduced elements per partial (row walk)
constexpr size_t kSplitMaxOutputs = 32;            // the row walk splits only below this many outputs
constexpr size_t kTile = 256;                      // output columns per task (column walk)
constexpr size_t kMaxSpan = 2048;                  // columns one sweep accumulates at once
constexpr size_t kRowsPerBlock = 256;              // reduced rows per partial (column walk)
constexpr size_t kSplitMinTasks = 8;               // the column walk splits rows below this many tiles
constexpr size_t kMinColumns = 8;                  // narrower outputs use the row walk

// ---- element helpers -------------------------------------------------------------------

template <typename A, typename T>
CANDLE_INLINE A to_acc(T v) {
  if constexpr (is_half_like_v<T>)
    return static_cast<A>(static_cast<float>(v));
  else
    return static_cast<A>(v);
}

template <typename V>
CANDLE_INLINE bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>)
    return v != v;
  else
    return false;
}

// Whether `a` replaces `cur` in a running max (min): larger (smaller), or a NaN, so that a
// NaN, once taken, stays.
template <bool IsMax, typename V>
CANDLE_INLINE bool replaces(V a, V cur) {
  bool b = IsMax ? a > cur : a < cur;
  if constexpr (std::is_floating_point_v<V>) b = b | (a != a);  // no short-circuit: vectorizes
  return b;
}

// Whether `a` (later in order) beats `cur` for argmax (argmin): strictly better, or the first NaN.
template <bool IsMax, typename V>
CANDLE_INLINE bool beats(V a, V cur) {
  bool b = IsMax ? a > cur : a < cur;
  if constexpr (std::is_floating_point_v<V>) b = b | ((a != a) & (cur == cur));
  return b;
}

template <typename T>
struct SumAcc {
  using type = std::conditional_t<is_half_like_v<T>, float, double>;
};
template <typename T>
requires std::is_integral_v<T>
struct SumAcc<T> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using sum_acc_t = typename SumAcc<T>::type;

// ---- contiguous kernels (inlined into the target_clones wrappers below) ----------------

template <typename A, bool Sq, typename T>
CANDLE_INLINE A sum_contig(const T* x, size_t n) {
  A acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kLanes; ++k) {
      A v = to_acc<A>(x[i + k]);
      if constexpr (Sq)
        acc[k] += v * v;
      else
        acc[k] += v;
    }
  }
  for (size_t k = 0; i + k < n; ++k) {
    A v = to_acc<A>(x[i + k]);
    if constexpr (Sq)
      acc[k] += v * v;
    else
      acc[k] += v;
  }
  for (size_t w = kLanes / 2; w > 0; w /= 2) {
    for (size_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  }
  return acc[0];
}

template <typename A, bool Sq, typename T>
A sum_strided(const T* x, size_t n, size_t s) {
  A acc[4] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t k = 0; k < 4; ++k) {
      A v = to_acc<A>(x[(i + k) * s]);
      if constexpr (Sq)
        acc[k] += v * v;
      else
        acc[k] += v;
    }
  }
  for (; i < n; ++i) {
    A v = to_acc<A>(x[i * s]);
    if constexpr (Sq)
      acc[0] += v * v;
    else
      acc[0] += v;
  }
  acc[0] += acc[1];
  acc[2] += acc[3];
  acc[0] += acc[2];
  return acc[0];
}

template <bool IsMax, typename T>
CANDLE_INLINE void minmax_row(compute_t<T>* __restrict acc, const T* __restrict row, size_t w) {
  using V = compute_t<T>;
  for (size_t j = 0; j < w; ++j) {
    V v = to_acc<V>(row[j]);
    acc[j] = replaces<IsMax>(v, acc[j]) ? v : acc[j];
  }
}

// n >= 1.
template <bool IsMax, typename T>
CANDLE_INLINE compute_t<T> minmax_contig(const T* x, size_t n) {
  using V = compute_t<T>;
  constexpr size_t L = 32;
  alignas(64) V acc[L];
  const V first = to_acc<V>(x[0]);
  for (size_t k = 0; k < L; ++k) acc[k] = first;
  size_t i = 0;
  for (; i + L <= n; i += L) minmax_row<IsMax>(acc, x + i, L);
  for (; i < n; ++i) {
    V v = to_acc<V>(x[i]);
    acc[0] = replaces<IsMax>(v, acc[0]) ? v : acc[0];
  }
  V m = acc[0];
  for (size_t k = 1; k < L; ++k) m = replaces<IsMax>(acc[k], m) ? acc[k] : m;
  return m;
}

template <bool IsMax, typename T>
compute_t<T> minmax_strided(const T* x, size_t n, size_t s) {
  using V = compute_t<T>;
  V m = to_acc<V>(x[0]);
  for (size_t i = 1; i < n; ++i) {
    V v = to_acc<V>(x[i * s]);
    m = replaces<IsMax>(v, m) ? v : m;
  }
  return m;
}

// Column walk: acc[j] (op)= row[j].
template <typename A, bool Sq, typename T>
CANDLE_INLINE void add_row(A* __restrict acc, const T* __restrict row, size_t w) {
  for (size_t j = 0; j < w; ++j) {
    A v = to_acc<A>(row[j]);
    if constexpr (Sq)
      acc[j] += v * v;
    else
      acc[j] += v;
  }
}

// Column walk of argmax (argmin): a later row takes a column only when strictly better.
template <bool IsMax, typename T>
CANDLE_INLINE void arg_row(compute_t<T>* __restrict acc, uint32_t* __restrict ix, const T* __restrict row,
                           size_t w, uint32_t r) {
  using V = compute_t<T>;
  for (size_t j = 0; j < w; ++j) {
    V v = to_acc<V>(row[j]);
    bool b = beats<IsMax>(v, acc[j]);
    acc[j] = b ? v : acc[j];
    ix[j] = b ? r : ix[j];
  }
}

// Four rows at once (fewer accumulator loads/stores, four read streams); the rows are
// combined in a fixed pattern.
template <typename A, bool Sq, typename T>
CANDLE_INLINE void add_rows4(A* __restrict acc, const T* __restrict a, const T* __restrict b,
                             const T* __restrict c, const T* __restrict d, size_t w) {
  for (size_t j = 0; j < w; ++j) {
    A va = to_acc<A>(a[j]), vb = to_acc<A>(b[j]), vc = to_acc<A>(c[j]), vd = to_acc<A>(d[j]);
    if constexpr (Sq)
      acc[j] += (va * va + vb * vb) + (vc * vc + vd * vd);
    else
      acc[j] += (va + vb) + (vc + vd);
  }
}

template <bool IsMax, typename T>
CANDLE_INLINE void minmax_rows4(compute_t<T>* __restrict acc, const T* __restrict a, const T* __restrict b,
                                const T* __restrict c, const T* __restrict d, size_t w) {
  using V = compute_t<T>;
  for (size_t j = 0; j < w; ++j) {
    V m = acc[j], v;
    v = to_acc<V>(a[j]);
    m = replaces<IsMax>(v, m) ? v : m;
    v = to_acc<V>(b[j]);
    m = replaces<IsMax>(v, m) ? v : m;
    v = to_acc<V>(c[j]);
    m = replaces<IsMax>(v, m) ? v : m;
    v = to_acc<V>(d[j]);
    m = replaces<IsMax>(v, m) ? v : m;
    acc[j] = m;
  }
}

// Hot f32/f64 kernels, compiled for AVX-512, AVX2 and plain x86-64 (picked at load time).
CANDLE_CLONES double sum_f32(const float* x, size_t n) { return sum_contig<double, false>(x, n); }
CANDLE_CLONES double sumsq_f32(const float* x, size_t n) { return sum_contig<double, true>(x, n); }
CANDLE_CLONES double sum_f64(const double* x, size_t n) { return sum_contig<double, false>(x, n); }
CANDLE_CLONES double sumsq_f64(const double* x, size_t n) { return sum_contig<double, true>(x, n); }
CANDLE_CLONES float max_f32(const float* x, size_t n) { return minmax_contig<true>(x, n); }
CANDLE_CLONES float min_f32(const float* x, size_t n) { return minmax_contig<false>(x, n); }
CANDLE_CLONES double max_f64(const double* x, size_t n) { return minmax_contig<true>(x, n); }
CANDLE_CLONES double min_f64(const double* x, size_t n) { return minmax_contig<false>(x, n); }
CANDLE_CLONES void add_row_f32(double* acc, const float* row, size_t w) {
  add_row<double, false>(acc, row, w);
}
CANDLE_CLONES void add_row_f64(double* acc, const double* row, size_t w) {
  add_row<double, false>(acc, row, w);
}
CANDLE_CLONES void max_row_f32(float* acc, const float* row, size_t w) { minmax_row<true>(acc, row, w); }
CANDLE_CLONES void min_row_f32(float* acc, const float* row, size_t w) { minmax_row<false>(acc, row, w); }
CANDLE_CLONES void max_row_f64(double* acc, const double* row, size_t w) { minmax_row<true>(acc, row, w); }
CANDLE_CLONES void min_row_f64(double* acc, const double* row, size_t w) { minmax_row<false>(acc, row, w); }
CANDLE_CLONES void argmax_row_f32(float* acc, uint32_t* ix, const float* row, size_t w, uint32_t r) {
  arg_row<true>(acc, ix, row, w, r);
}
CANDLE_CLONES void argmin_row_f32(float* acc, uint32_t* ix, const float* row, size_t w, uint32_t r) {
  arg_row<false>(acc, ix, row, w, r);
}

CANDLE_CLONES void add_rows4_f32(double* acc, const float* a, const float* b, const float* c, const float* d,
                                 size_t w) {
  add_rows4<double, false>(acc, a, b, c, d, w);
}
CANDLE_CLONES void add_rows4_f64(double* acc, const double* a, const double* b, const double* c,
                                 const double* d, size_t w) {
  add_rows4<double, false>(acc, a, b, c, d, w);
}
CANDLE_CLONES void max_rows4_f32(float* acc, const float* a, const float* b, const float* c, const float* d,
                                 size_t w) {
  minmax_rows4<true>(acc, a, b, c, d, w);
}
CANDLE_CLONES void min_rows4_f32(float* acc, const float* a, const float* b, const float* c, const float* d,
                                 size_t w) {
  minmax_rows4<false>(acc, a, b, c, d, w);
}
template <bool IsMax, typename T>
void arg_row_run(compute_t<T>* acc, uint32_t* ix, const T* row, size_t w, uint32_t r) {
  if constexpr (std::is_same_v<T, float>)
    IsMax ? argmax_row_f32(acc, ix, row, w, r) : argmin_row_f32(acc, ix, row, w, r);
  else
    arg_row<IsMax>(acc, ix, row, w, r);
}

template <typename T, typename A>
CANDLE_INLINE T sum_to_out(A a) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(a);  // wraps, as candle
  else
    return cast_value<T>(a);
}

// cumsum along a non-last dim: one running sum per column of a row.
template <typename A, typename T>
CANDLE_INLINE void cumsum_step(A* __restrict acc, const T* __restrict x, T* __restrict y, size_t w) {
  for (size_t j = 0; j < w; ++j) {
    acc[j] += to_acc<A>(x[j]);
    y[j] = sum_to_out<T>(acc[j]);
  }
}

// cumsum along the last dim of kCumsumRows consecutive rows of length len.
constexpr size_t kCumsumRows = 8;
template <typename A, typename T>
CANDLE_INLINE void cumsum_rows(const T* __restrict x, T* __restrict y, size_t len) {
  A acc[kCumsumRows] = {};
  for (size_t i = 0; i < len; ++i) {
    for (size_t k = 0; k < kCumsumRows; ++k) {
      acc[k] += to_acc<A>(x[k * len + i]);
      y[k * len + i] = sum_to_out<T>(acc[k]);
    }
  }
}

CANDLE_CLONES void cumsum_step_f32(double* acc, const float* x, float* y, size_t w) {
  cumsum_step(acc, x, y, w);
}
CANDLE_CLONES void cumsum_rows_f32(const float* x, float* y, size_t len) { cumsum_rows<double>(x, y, len); }

template <typename A, typename T>
void cumsum_step_run(A* acc, const T* x, T* y, size_t w) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>)
    cumsum_step_f32(acc, x, y, w);
  else
    cumsum_step(acc, x, y, w);
}

template <typename A, typename T>
void cumsum_rows_run(const T* x, T* y, size_t len) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>)
    cumsum_rows_f32(x, y, len);
  else
    cumsum_rows<A>(x, y, len);
}

template <typename A, bool Sq, typename T>
A sum_run(const T* x, size_t n, size_t s) {
  if (s != 1) return sum_strided<A, Sq>(x, n, s);
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double>) {
    return Sq ? sumsq_f32(x, n) : sum_f32(x, n);
  } else if constexpr (std::is_same_v<T, double>) {
    return Sq ? sumsq_f64(x, n) : sum_f64(x, n);
  } else {
    return sum_contig<A, Sq>(x, n);
  }
}

template <bool IsMax, typename T>
compute_t<T> minmax_run(const T* x, size_t n, size_t s) {
  if (s != 1) return minmax_strided<IsMax>(x, n, s);
  if constexpr (std::is_same_v<T, float>) {
    return IsMax ? max_f32(x, n) : min_f32(x, n);
  } else if constexpr (std::is_same_v<T, double>) {
    return IsMax ? max_f64(x, n) : min_f64(x, n);
  } else {
    return minmax_contig<IsMax>(x, n);
  }
}

template <typename A, bool Sq, typename T>
void add_row_run(A* acc, const T* row, size_t w) {
  if constexpr (!Sq && std::is_same_v<T, float> && std::is_same_v<A, double>)
    add_row_f32(acc, row, w);
  else if constexpr (!Sq && std::is_same_v<T, double>)
    add_row_f64(acc, row, w);
  else
    add_row<A, Sq>(acc, row, w);
}

template <bool IsMax, typename T>
void minmax_row_run(compute_t<T>* acc, const T* row, size_t w) {
  if constexpr (std::is_same_v<T, float>)
    IsMax ? max_row_f32(acc, row, w) : min_row_f32(acc, row, w);
  else if constexpr (std::is_same_v<T, double>)
    IsMax ? max_row_f64(acc, row, w) : min_row_f64(acc, row, w);
  else
    minmax_row<IsMax>(acc, row, w);
}

// ---- reducers: how one output's elements combine -----------------------------------------
// P: a partial result; run() folds in a run of n elements (stride s) whose first one has
// reduced index r; merge() folds in a later partial; finish() gives the output element.
// The b_* functions are the column walk: acc/ix hold one accumulator per output column.

template <typename T, Kind K>
struct SumReducer {
  static constexpr bool kSq = K == Kind::Norm;
  using A = std::conditional_t<K == Kind::Mean && std::is_integral_v<T>, double, sum_acc_t<T>>;
  using P = A;
  using BAcc = A;
  using Out = T;
  static P init() { return A(0); }
  static void run(P& p, const T* x, size_t n, size_t s, size_t) { p += sum_run<A, kSq>(x, n, s); }
  static void merge(P& p, const P& q) { p += q; }
  static Out finish(P p, size_t count) {
    if constexpr (K == Kind::Sum) {
      return sum_to_out<T>(p);
    } else if constexpr (K == Kind::Mean) {
      return cast_value<T>(p / static_cast<A>(count));
    } else {
      return cast_value<T>(std::sqrt(p));
    }
  }
  static void b_first(BAcc* acc, uint32_t*, const T* row, size_t w, size_t) {
    std::fill(acc, acc + w, A(0));
    add_row_run<A, kSq>(acc, row, w);
  }
  static void b_row(BAcc* acc, uint32_t*, const T* row, size_t w, size_t) {
    add_row_run<A, kSq>(acc, row, w);
  }
  static void b_rows4(BAcc* acc, uint32_t*, const T* const* p, size_t w, size_t) {
    if constexpr (!kSq && std::is_same_v<T, float> && std::is_same_v<A, double>)
      add_rows4_f32(acc, p[0], p[1], p[2], p[3], w);
    else if constexpr (!kSq && std::is_same_v<T, double>)
      add_rows4_f64(acc, p[0], p[1], p[2], p[3], w);
    else
      add_rows4<A, kSq>(acc, p[0], p[1], p[2], p[3], w);
  }
  static P b_partial(const BAcc* acc, const uint32_t*, size_t j) { return acc[j]; }
};

template <typename T, bool IsMax>
struct MinMaxReducer {
  using V = compute_t<T>;
  using P = V;
  using BAcc = V;
  using Out = T;
  static P init() {
    if constexpr (std::is_floating_point_v<V>) {
      return IsMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
    } else {
      return IsMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
    }
  }
  static void run(P& p, const T* x, size_t n, size_t s, size_t) {
    V v = minmax_run<IsMax>(x, n, s);
    p = replaces<IsMax>(v, p) ? v : p;
  }
  static void merge(P& p, const P& q) { p = replaces<IsMax>(q, p) ? q : p; }
  static Out finish(P p, size_t) { return cast_value<T>(p); }
  static void b_first(BAcc* acc, uint32_t*, const T* row, size_t w, size_t) {
    for (size_t j = 0; j < w; ++j) acc[j] = to_acc<V>(row[j]);
  }
  static void b_row(BAcc* acc, uint32_t*, const T* row, size_t w, size_t) {
    minmax_row_run<IsMax>(acc, row, w);
  }
  static void b_rows4(BAcc* acc, uint32_t*, const T* const* p, size_t w, size_t) {
    if constexpr (std::is_same_v<T, float>) {
      IsMax ? max_rows4_f32(acc, p[0], p[1], p[2], p[3], w) : min_rows4_f32(acc, p[0], p[1], p[2], p[3], w);
    } else {
      minmax_rows4<IsMax>(acc, p[0], p[1], p[2], p[3], w);
    }
  }
  static P b_partial(const BAcc* acc, const uint32_t*, size_t j) { return acc[j]; }
};

template <typename T, bool IsMax>
struct ArgReducer {
  using V = compute_t<T>;
  struct P {
    V v;
    uint32_t idx;
    bool has;
  };
  using BAcc = V;
  using Out = uint32_t;
  static P init() { return P{V(), 0, false}; }
  static void run(P& p, const T* x, size_t n, size_t s, size_t r) {
    V bv;
    size_t bi = 0;
    if (s == 1) {
      // two passes: the extreme value (vectorized), then its first position
      bv = minmax_run<IsMax>(x, n, 1);
      if (is_nan(bv)) {
        while (!is_nan(to_acc<V>(x[bi]))) ++bi;
      } else {
        while (!(to_acc<V>(x[bi]) == bv)) ++bi;
      }
    } else {
      bv = to_acc<V>(x[0]);
      for (size_t i = 1; i < n; ++i) {
        V v = to_acc<V>(x[i * s]);
        if (beats<IsMax>(v, bv)) {
          bv = v;
          bi = i;
        }
      }
    }
    merge(p, P{bv, static_cast<uint32_t>(r + bi), true});
  }
  static void merge(P& p, const P& q) {
    if (q.has && (!p.has || beats<IsMax>(q.v, p.v))) p = q;
  }
  static Out finish(P p, size_t) { return p.idx; }
  static void b_first(BAcc* acc, uint32_t* ix, const T* row, size_t w, size_t r) {
    for (size_t j = 0; j < w; ++j) {
      acc[j] = to_acc<V>(row[j]);
      ix[j] = static_cast<uint32_t>(r);
    }
  }
  static void b_row(BAcc* acc, uint32_t* ix, const T* row, size_t w, size_t r) {
    arg_row_run<IsMax>(acc, ix, row, w, static_cast<uint32_t>(r));
  }
  // one row at a time: GCC does not vectorize a chain of four index selects
  static void b_rows4(BAcc* acc, uint32_t* ix, const T* const* p, size_t w, size_t r) {
    for (size_t k = 0; k < 4; ++k) b_row(acc, ix, p[k], w, r + k);
  }
  static P b_partial(const BAcc* acc, const uint32_t* ix, size_t j) { return P{acc[j], ix[j], true}; }
};

// ---- planning ------------------------------------------------------------------------------

struct DimS {
  size_t size, stride;
};

// Storage offsets of a row-major walk over `n` dims, starting at a linear position.
class Odometer {
 public:
  Odometer(const DimS* d, size_t n, size_t linear) : d_(d), n_(n), idx_(n) {
    for (size_t i = n; i-- > 0;) {
      idx_[i] = linear % d[i].size;
      linear /= d[i].size;
      off_ += idx_[i] * d[i].stride;
    }
  }
  size_t offset() const { return off_; }
  void next() {
    for (size_t i = n_; i-- > 0;) {
      off_ += d_[i].stride;
      if (++idx_[i] < d_[i].size) return;
      off_ -= idx_[i] * d_[i].stride;
      idx_[i] = 0;
    }
  }

 private:
  const DimS* d_;
  size_t n_;
  std::vector<size_t> idx_;
  size_t off_ = 0;
};

struct ReducePlan {
  size_t base = 0;              // the layout's start offset
  size_t n_out = 1;             // output elements
  size_t R = 1;                 // reduced elements per output
  std::vector<DimS> kept, red;  // merged; red is never empty (a {1, 0} stand-in when nothing is reduced)
};

std::vector<DimS> merge_dims(const std::vector<DimS>& ds) {
  std::vector<DimS> out;
  for (const DimS& d : ds) {
    if (d.size == 1) continue;
    if (!out.empty() && out.back().stride == d.stride * d.size) {
      out.back().size *= d.size;
      out.back().stride = d.stride;
    } else {
      out.push_back(d);
    }
  }
  return out;
}

// `reorder`: the reduced dims may be walked in any order (not for arg ops), so they are
// sorted by decreasing stride: a transposed input then still reduces contiguous runs.
ReducePlan make_plan(const Layout& l, const std::vector<size_t>& dims, bool reorder) {
  ReducePlan p;
  p.base = l.start_offset();
  std::vector<DimS> kept, red;
  size_t j = 0;
  for (size_t i = 0; i < l.dims().size(); ++i) {
    DimS d{l.dims()[i], l.stride()[i]};
    if (j < dims.size() && dims[j] == i) {
      red.push_back(d);
      p.R *= d.size;
      ++j;
    } else {
      kept.push_back(d);
      p.n_out *= d.size;
    }
  }
  if (reorder) {
    std::stable_sort(red.begin(), red.end(),
                     [](const DimS& a, const DimS& b) { return a.stride > b.stride; });
  }
  p.kept = merge_dims(kept);
  p.red = merge_dims(red);
  if (p.red.empty()) p.red.push_back(DimS{1, 0});
  return p;
}

// Calls fn(offset, len, stride, r) for the runs (innermost reduced dim) covering the reduced
// positions [r0, r1), in order; r is the reduced index of the run's first element.
template <typename Fn>
void for_runs(const std::vector<DimS>& red, size_t r0, size_t r1, Fn&& fn) {
  if (r0 >= r1) return;  // also an empty reduced dim: in.size is 0 below
  const DimS& in = red.back();
  const size_t len_full = in.size;
  Odometer outer(red.data(), red.size() - 1, r0 / len_full);
  size_t pos = r0 % len_full;
  for (size_t r = r0; r < r1;) {
    size_t len = std::min(len_full - pos, r1 - r);
    fn(outer.offset() + pos * in.stride, len, in.stride, r);
    r += len;
    pos = 0;
    outer.next();
  }
}

// ---- the two walks -------------------------------------------------------------------------

template <typename Red, typename T>
void row_walk(const T* x, const ReducePlan& pl, typename Red::Out* out) {
  using P = typename Red::P;
  const size_t R = pl.R, n_out = pl.n_out;
  if (n_out >= kSplitMaxOutputs || R < 2 * kSplitBlock) {
    const size_t grain = std::max<size_t>(1, cpu::kParallelGrain / R);
    cpu::parallel_for(n_out, grain, [&](size_t b, size_t e) {
      Odometer ko(pl.kept.data(), pl.kept.size(), b);
      for (size_t o = b; o < e; ++o, ko.next()) {
        const T* xo = x + pl.base + ko.offset();
        P p = Red::init();
        for_runs(pl.red, 0, R,
                 [&](size_t off, size_t len, size_t s, size_t r) { Red::run(p, xo + off, len, s, r); });
        out[o] = Red::finish(p, R);
      }
    });
    return;
  }
  // Few long outputs: fixed blocks of the reduced range, combined in block order.
  const size_t nrb = (R + kSplitBlock - 1) / kSplitBlock;
  std::vector<P> part(n_out * nrb);
  cpu::parallel_for(n_out * nrb, 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const size_t o = t / nrb, rb = t % nrb;
      const T* xo = x + pl.base + Odometer(pl.kept.data(), pl.kept.size(), o).offset();
      P p = Red::init();
      for_runs(pl.red, rb * kSplitBlock, std::min(R, (rb + 1) * kSplitBlock),
               [&](size_t off, size_t len, size_t s, size_t r) { Red::run(p, xo + off, len, s, r); });
      part[t] = p;
    }
  });
  for (size_t o = 0; o < n_out; ++o) {
    P p = part[o * nrb];
    for (size_t rb = 1; rb < nrb; ++rb) Red::merge(p, part[o * nrb + rb]);
    out[o] = Red::finish(p, R);
  }
}

template <typename Red, typename T>
void column_walk(const T* x, const ReducePlan& pl, typename Red::Out* out) {
  using P = typename Red::P;
  using BAcc = typename Red::BAcc;
  const size_t R = pl.R, n_out = pl.n_out, C = pl.kept.back().size;
  const size_t n_outer = n_out / C;
  const size_t ntiles = (C + kTile - 1) / kTile;
  const size_t spatial = n_outer * ntiles;
  size_t rows = R, nrb = 1;
  if (spatial < kSplitMinTasks && R >= 2 * kRowsPerBlock) {
    rows = kRowsPerBlock;
    nrb = (R + rows - 1) / rows;
  }
  std::vector<P> part(nrb > 1 ? nrb * n_out : 0);
  const size_t grain = std::max<size_t>(1, cpu::kParallelGrain / (std::min(C, kTile) * rows));
  const size_t outer_rank = pl.kept.size() - 1;
  cpu::parallel_for(nrb * spatial, grain, [&](size_t b, size_t e) {
    std::vector<BAcc> acc(std::min(C, kMaxSpan));
    std::vector<uint32_t> ix(acc.size());
    for (size_t t = b; t < e;) {
      const size_t rb = t / spatial, sp = t % spatial, ob = sp / ntiles, tile = sp % ntiles;
      // consecutive tiles of one output row go in one sweep
      size_t span = 1;
      while (t + span < e && tile + span < ntiles && span < kMaxSpan / kTile) ++span;
      const size_t c0 = tile * kTile, w = std::min(C, (tile + span) * kTile) - c0;
      const size_t r0 = rb * rows, r1 = std::min(R, r0 + rows);
      const T* xo = x + pl.base + Odometer(pl.kept.data(), outer_rank, ob).offset() + c0;
      Odometer ro(pl.red.data(), pl.red.size(), r0);
      Red::b_first(acc.data(), ix.data(), xo + ro.offset(), w, r0);
      size_t r = r0 + 1;
      for (; r + 4 <= r1; r += 4) {
        const T* p[4];
        for (size_t k = 0; k < 4; ++k) {
          ro.next();
          p[k] = xo + ro.offset();
        }
        Red::b_rows4(acc.data(), ix.data(), p, w, r);
      }
      for (; r < r1; ++r) {
        ro.next();
        Red::b_row(acc.data(), ix.data(), xo + ro.offset(), w, r);
      }
      const size_t o0 = ob * C + c0;
      if (nrb == 1) {
        for (size_t j = 0; j < w; ++j) out[o0 + j] = Red::finish(Red::b_partial(acc.data(), ix.data(), j), R);
      } else {
        for (size_t j = 0; j < w; ++j) part[rb * n_out + o0 + j] = Red::b_partial(acc.data(), ix.data(), j);
      }
      t += span;
    }
  });
  if (nrb > 1) {
    cpu::parallel_for(n_out, cpu::kParallelGrain / nrb + 1, [&](size_t b, size_t e) {
      for (size_t o = b; o < e; ++o) {
        P p = part[o];
        for (size_t rb = 1; rb < nrb; ++rb) Red::merge(p, part[rb * n_out + o]);
        out[o] = Red::finish(p, R);
      }
    });
  }
}

template <typename Red, typename T>
void run_reduce(const T* x, const ReducePlan& pl, typename Red::Out* out) {
  if (pl.n_out == 0) return;
  if (pl.R == 0) {  // only sums get here (the others reject empty dims)
    for (size_t o = 0; o < pl.n_out; ++o) out[o] = Red::finish(Red::init(), 0);
    return;
  }
  const bool columns = pl.red.back().stride != 1 && !pl.kept.empty() && pl.kept.back().stride == 1 &&
                       pl.kept.back().size >= kMinColumns;
  if (columns)
    column_walk<Red>(x, pl, out);
  else
    row_walk<Red>(x, pl, out);
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Sum: return "sum";
    case Kind::Mean: return "mean";
    case Kind::Norm: return "norm";
    case Kind::Min: return "min";
    case Kind::Max: return "max";
    case Kind::ArgMin: return "argmin";
    case Kind::ArgMax: return "argmax";
  }
  return "reduce";
}

void check_dims(const Layout& l, const std::vector<size_t>& dims, const char* op) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= l.dims().size() || (i > 0 && dims[i] <= dims[i - 1])) {
      throw Error(ErrorKind::DimOutOfRange, std::string("invalid reduce dims in ") + op +
                                                ", dims: " + Shape(dims).to_string() +
                                                ", shape: " + l.shape().to_string());
    }
  }
}

void check_bounds(const CpuStorage& s, const Layout& l, const char* op) {
  if (l.elem_count() && l.max_offset_exclusive() > s.elem_count()) {
    throw Error(ErrorKind::Internal, std::string(op) + ": layout out of the storage's bounds");
  }
}

std::shared_ptr<CpuStorage> reduce_kind(const CpuStorage& s, const Layout& l, const std::vector<size_t>& dims,
                                        Kind k) {
  const char* op = kind_name(k);
  check_dims(l, dims, op);
  check_bounds(s, l, op);
  const bool is_arg = k == Kind::ArgMin || k == Kind::ArgMax;
  if (is_arg && dims.size() != 1) {
    throw Error(ErrorKind::InvalidArgument,
                std::string(op) + " reduces exactly one dim, got dims " + Shape(dims).to_string());
  }
  ReducePlan pl = make_plan(l, dims, !is_arg);
  if ((k == Kind::Min || k == Kind::Max || is_arg) && pl.R == 0) {
    throw Error(ErrorKind::InvalidArgument, std::string("cannot apply ") + op +
                                                " over an empty dim, dims: " + Shape(dims).to_string() +
                                                ", shape: " + l.shape().to_string());
  }
  if (is_arg && pl.R > std::numeric_limits<uint32_t>::max()) {
    throw Error(
        ErrorKind::InvalidArgument,
        std::string(op) + ": the reduced dim does not fit u32 indices, shape: " + l.shape().to_string());
  }
  if (k == Kind::Norm && !dtype_is_float(s.dtype())) {
    throw Error(ErrorKind::UnsupportedOp,
                "unsupported dtype " + std::string(dtype_name(s.dtype())) + " for op norm");
  }
  auto out = CpuStorage::alloc(is_arg ? DType::U32 : s.dtype(), pl.n_out);
  dispatch(s.dtype(), [&]<typename T>() {
    const T* x = s.data<T>();
    switch (k) {
      case Kind::Sum: run_reduce<SumReducer<T, Kind::Sum>>(x, pl, out->data<T>()); break;
      case Kind::Mean: run_reduce<SumReducer<T, Kind::Mean>>(x, pl, out->data<T>()); break;
      case Kind::Norm:
        if constexpr (is_float_v<T>) run_reduce<SumReducer<T, Kind::Norm>>(x, pl, out->data<T>());
        break;
      case Kind::Min: run_reduce<MinMaxReducer<T, false>>(x, pl, out->data<T>()); break;
      case Kind::Max: run_reduce<MinMaxReducer<T, true>>(x, pl, out->data<T>()); break;
      case Kind::ArgMin: run_reduce<ArgReducer<T, false>>(x, pl, out->data<uint32_t>()); break;
      case Kind::ArgMax: run_reduce<ArgReducer<T, true>>(x, pl, out->data<uint32_t>()); break;
    }
  });
  return out;
}

// The storage and start offset of a contiguous version of (s, l): s itself when l is
// contiguous, else a packed copy.
std::pair<std::shared_ptr<CpuStorage>, size_t> contiguous_source(const CpuStorage& s, const Layout& l) {
  if (l.is_contiguous()) return {s.to_cpu(), l.start_offset()};
  auto tmp = CpuStorage::alloc(s.dtype(), l.elem_count());
  s.copy_strided_src(*tmp, 0, l);
  return {tmp, 0};
}

// Per-output loop shared by var and log_sum_exp: fn(xo, plan) -> double for each output.
template <typename T, typename Fn>
void per_output(const T* x, const ReducePlan& pl, T* out, Fn&& fn) {
  const size_t grain = std::max<size_t>(1, cpu::kParallelGrain / std::max<size_t>(pl.R, 1));
  cpu::parallel_for(pl.n_out, grain, [&](size_t b, size_t e) {
    Odometer ko(pl.kept.data(), pl.kept.size(), b);
    for (size_t o = b; o < e; ++o, ko.next()) out[o] = cast_value<T>(fn(x + pl.base + ko.offset()));
  });
}

}  // namespace reduce_detail

using namespace reduce_detail;

StoragePtr CpuStorage::reduce(ReduceOp op, const Layout& l, const std::vector<size_t>& dims) const {
  Kind k = Kind::Sum;
  switch (op) {
    case ReduceOp::Sum: k = Kind::Sum; break;
    case ReduceOp::Min: k = Kind::Min; break;
    case ReduceOp::Max: k = Kind::Max; break;
    case ReduceOp::ArgMin: k = Kind::ArgMin; break;
    case ReduceOp::ArgMax: k = Kind::ArgMax; break;
  }
  return reduce_kind(*this, l, dims, k);
}

StoragePtr CpuStorage::cumsum(const Layout& l, size_t dim) const {
  if (dim >= l.dims().size()) {
    throw Error(ErrorKind::DimOutOfRange, "dim out of range in cumsum, dim: " + std::to_string(dim) +
                                              ", shape: " + l.shape().to_string());
  }
  check_bounds(*this, l, "cumsum");
  const size_t n = l.elem_count();
  auto out = CpuStorage::alloc(dtype_, n);
  if (n == 0) return out;
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto src_base = contiguous_source(*this, l);
  const auto& src = src_base.first;
  const size_t base = src_base.second;
  size_t pre = 1, post = 1;
  for (size_t i = 0; i < dim; ++i) pre *= l.dims()[i];
  for (size_t i = dim + 1; i < l.dims().size(); ++i) post *= l.dims()[i];
  const size_t len = l.dims()[dim];
  dispatch(dtype_, [&]<typename T>() {
    using A = sum_acc_t<T>;
    const T* x = src->data<T>() + base;
    T* y = out->data<T>();
    if (post == 1) {
      // rows in groups of kCumsumRows: independent dependency chains run side by side
      cpu::parallel_for(pre, cpu::kParallelGrain / len + 1, [&](size_t b, size_t e) {
        size_t r = b;
        for (; r + kCumsumRows <= e; r += kCumsumRows) cumsum_rows_run<A>(x + r * len, y + r * len, len);
        for (; r < e; ++r) {
          A acc = A(0);
          for (size_t i = 0; i < len; ++i) {
            acc += to_acc<A>(x[r * len + i]);
            y[r * len + i] = sum_to_out<T>(acc);
          }
        }
      });
      return;
    }
    const size_t ntiles = (post + kTile - 1) / kTile;
    cpu::parallel_for(pre * ntiles, cpu::kParallelGrain / (len * std::min(post, kTile)) + 1,
                      [&](size_t b, size_t e) {
                        std::vector<A> acc(std::min(post, kMaxSpan));
                        for (size_t t = b; t < e;) {
                          const size_t r = t / ntiles, tile = t % ntiles;
                          size_t span = 1;  // consecutive tiles of one slice go in one sweep
                          while (t + span < e && tile + span < ntiles && span < kMaxSpan / kTile) ++span;
                          const size_t c0 = tile * kTile, w = std::min(post, (tile + span) * kTile) - c0;
                          std::fill(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(w), A(0));
                          for (size_t i = 0; i < len; ++i) {
                            const size_t row = (r * len + i) * post + c0;
                            cumsum_step_run(acc.data(), x + row, y + row, w);
                          }
                          t += span;
                        }
                      });
  });
  return out;
}

StoragePtr CpuStorage::arg_sort_last_dim(const Layout& l, bool ascending) const {
  if (l.dims().empty()) {
    throw Error(ErrorKind::DimOutOfRange, "dim out of range in arg_sort_last_dim, dim: -1, shape: []");
  }
  check_bounds(*this, l, "arg_sort_last_dim");
  const size_t len = l.dims().back();
  if (len > std::numeric_limits<uint32_t>::max()) {
    throw Error(ErrorKind::InvalidArgument,
                "arg_sort_last_dim: the last dim does not fit u32 indices, shape: " + l.shape().to_string());
  }
  const size_t n = l.elem_count();
  auto out = CpuStorage::alloc(DType::U32, n);
  if (n == 0) return out;
  // (named values, not a structured binding: clang before 16 cannot capture bindings in lambdas)
  const auto src_base = contiguous_source(*this, l);
  const auto& src = src_base.first;
  const size_t base = src_base.second;
  const size_t rows = n / len;
  dispatch(dtype_, [&]<typename T>() {
    using V = compute_t<T>;
    const T* x = src->data<T>() + base;
    uint32_t* ids = out->data<uint32_t>();
    // NaN sorts as the largest value (last ascending, first descending), as PyTorch
    auto less = [](const std::pair<V, uint32_t>& a, const std::pair<V, uint32_t>& b) {
      return a.first < b.first || (!is_nan(a.first) && is_nan(b.first));
    };
    cpu::parallel_for(rows, cpu::kParallelGrain / (len * 16) + 1, [&](size_t b, size_t e) {
      std::vector<std::pair<V, uint32_t>> buf(len);
      for (size_t r = b; r < e; ++r) {
        for (size_t i = 0; i < len; ++i) buf[i] = {to_acc<V>(x[r * len + i]), static_cast<uint32_t>(i)};
        if (ascending)
          std::stable_sort(buf.begin(), buf.end(), less);
        else
          std::stable_sort(buf.begin(), buf.end(), [&](const auto& a, const auto& c) { return less(c, a); });
        for (size_t i = 0; i < len; ++i) ids[r * len + i] = buf[i].second;
      }
    });
  });
  return out;
}

namespace cpu {

std::shared_ptr<CpuStorage> reduce_mean(const CpuStorage& s, const Layout& l,
                                        const std::vector<size_t>& dims) {
  return reduce_kind(s, l, dims, Kind::Mean);
}

std::shared_ptr<CpuStorage> reduce_norm(const CpuStorage& s, const Layout& l) {
  std::vector<size_t> all(l.dims().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return reduce_kind(s, l, all, Kind::Norm);
}

std::shared_ptr<CpuStorage> reduce_var(const CpuStorage& s, const Layout& l, size_t dim) {
  check_dims(l, {dim}, "var");
  check_bounds(s, l, "var");
  ReducePlan pl = make_plan(l, {dim}, false);
  auto out = CpuStorage::alloc(s.dtype(), pl.n_out);
  dispatch_float(s.dtype(), "var", [&]<typename T>() {
    const size_t n = pl.R;
    per_output(s.data<T>(), pl, out->data<T>(), [&](const T* xo) {
      if (n == 0) return std::numeric_limits<double>::quiet_NaN();
      double sum = 0;
      for_runs(pl.red, 0, n, [&](size_t off, size_t len, size_t st, size_t) {
        sum += sum_strided<double, false>(xo + off, len, st);
      });
      const double mean = sum / static_cast<double>(n);
      double ss = 0;
      for_runs(pl.red, 0, n, [&](size_t off, size_t len, size_t st, size_t) {
        for (size_t i = 0; i < len; ++i) {
          double d = to_acc<double>(xo[off + i * st]) - mean;
          ss += d * d;
        }
      });
      return ss / (static_cast<double>(n) - 1.0);  // n == 1: 0 / 0 = NaN, as candle and PyTorch
    });
  });
  return out;
}

std::shared_ptr<CpuStorage> reduce_log_sum_exp(const CpuStorage& s, const Layout& l,
                                               const std::vector<size_t>& dims) {
  check_dims(l, dims, "log_sum_exp");
  check_bounds(s, l, "log_sum_exp");
  ReducePlan pl = make_plan(l, dims, true);
  auto out = CpuStorage::alloc(s.dtype(), pl.n_out);
  dispatch_float(s.dtype(), "log_sum_exp", [&]<typename T>() {
    const size_t n = pl.R;
    per_output(s.data<T>(), pl, out->data<T>(), [&](const T* xo) {
      double m = -std::numeric_limits<double>::infinity();
      for_runs(pl.red, 0, n, [&](size_t off, size_t len, size_t st, size_t) {
        for (size_t i = 0; i < len; ++i) {
          double v = to_acc<double>(xo[off + i * st]);
          m = replaces<true>(v, m) ? v : m;
        }
      });
      // an infinite (or NaN) max is not subtracted: all -inf gives -inf, a +inf gives +inf
      const double shift = std::isfinite(m) ? m : 0.0;
      double sum = 0;
      for_runs(pl.red, 0, n, [&](size_t off, size_t len, size_t st, size_t) {
        for (size_t i = 0; i < len; ++i) sum += std::exp(to_acc<double>(xo[off + i * st]) - shift);
      });
      return std::log(sum) + shift;
    });
  });
  return out;
}

}  // namespace cpu
}  // namespace candle

namespace candle {

StoragePtr CpuStorage::reduce_mean(const Layout& l, const std::vector<size_t>& dims) const {
  return cpu::reduce_mean(*this, l, dims);
}
StoragePtr CpuStorage::reduce_var(const Layout& l, size_t dim) const {
  return cpu::reduce_var(*this, l, dim);
}
StoragePtr CpuStorage::reduce_log_sum_exp(const Layout& l, const std::vector<size_t>& dims) const {
  return cpu::reduce_log_sum_exp(*this, l, dims);
}
StoragePtr CpuStorage::reduce_norm(const Layout& l) const { return cpu::reduce_norm(*this, l); }

}  // namespace candle
