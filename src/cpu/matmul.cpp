// CPU matmul: a batched GEMM over strided operands. f32/f64 go straight to the GEMM
// (OpenBLAS or the built-in one); bf16, f16 and f8e4m3 are converted to f32 one K panel at a
// time, multiplied with sgemm into an f32 accumulator and converted back once.
#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "candle/backend/cpu_storage.h"
#include "candle/utils.h"
#include "cpu/clones.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

#ifdef CANDLE_HAVE_OPENBLAS
#include <cblas.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
#define CANDLE_MM_CLONES CANDLE_TARGET_CLONES
#else
#define CANDLE_MM_CLONES
#endif

namespace candle {

namespace cpu {
namespace {
// OpenBLAS unless CANDLE_GEMM=builtin, or unless OpenBLAS picked a pre-AVX2 kernel on a CPU that
// has AVX2+FMA: in virtual machines that hide the CPU model, OpenBLAS 0.3.21 falls back to its
// generic "Prescott" kernel (28 GFLOP/s per core measured on the GPU machine's Xeon, against
// about 90 for the built-in AVX-512 kernel).
bool use_openblas() {
#ifdef CANDLE_HAVE_OPENBLAS
  static const bool use = [] {
    if (const char* env = std::getenv("CANDLE_GEMM")) {
      if (std::string_view(env) == "builtin") return false;
      if (std::string_view(env) == "openblas") return true;
    }
    if (!has_avx2()) return true;
    std::string_view core = openblas_get_corename();
    for (std::string_view old :
         {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine", "Northwood",
          "Banias", "Sandybridge", "Opteron", "Barcelona"}) {
      if (core == old) return false;
    }
    return true;
  }();
  return use;
#else
  return false;
#endif
}
}  // namespace
}  // namespace cpu

const char* blas_name() { return cpu::use_openblas() ? "openblas" : "builtin"; }

std::string blas_info() {
#ifdef CANDLE_HAVE_OPENBLAS
  std::string ob = std::string(openblas_get_config()) + " core " + openblas_get_corename();
  return cpu::use_openblas() ? ob : "built-in GEMM (" + ob + " not used)";
#else
  return "built-in GEMM";
#endif
}

namespace cpu {
namespace {

// Uninitialised scratch that grows on demand (std::vector would zero-fill it).
template <typename T>
class Scratch {
 public:
  T* get(size_t n) {
    if (n > cap_) {
      data_.reset(new T[n]);
      cap_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t cap_ = 0;
};

#ifdef CANDLE_HAVE_OPENBLAS

template <typename T>
MatRef<T> copy_dense(MatRef<T> x, size_t rows, size_t cols, Scratch<T>& buf) {
  T* dst = buf.get(rows * cols);
  parallel_for(rows, kParallelGrain / std::max<size_t>(cols, 1) + 1, [&](size_t r0, size_t r1) {
    for (size_t i = r0; i < r1; ++i) {
      const T* src = x.p + i * x.rs;
      for (size_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * x.cs];
    }
  });
  return {dst, cols, 1};
}

void zero_rows(float* c, size_t m, size_t n, size_t ldc) {
  for (size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
}
void zero_rows(double* c, size_t m, size_t n, size_t ldc) {
  for (size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0);
}

struct BlasOperand {
  bool trans;
  size_t ld;
};

// How a rows x cols view can be handed to a row-major cblas call without a copy.
template <typename T>
std::optional<BlasOperand> blas_form(MatRef<T> x, size_t rows, size_t cols) {
  const size_t need_nt = std::max<size_t>(cols, 1), need_t = std::max<size_t>(rows, 1);
  if (cols == 1 || x.cs == 1) {
    size_t ld = rows == 1 ? need_nt : x.rs;
    if (ld >= need_nt && ld <= INT_MAX) return BlasOperand{false, ld};
  }
  if (rows == 1 || x.rs == 1) {
    size_t ld = cols == 1 ? need_t : x.cs;
    if (ld >= need_t && ld <= INT_MAX) return BlasOperand{true, ld};
  }
  return std::nullopt;
}

// OpenBLAS's own threading splits the work by thread count, and its sums then differ in the
// last bits between counts (measured with 0.3.21: sgemm 1000^3, 333x777x1111 and 255x249x2000
// at 1 vs 2 vs 3 threads). So each cblas call runs on one thread and the parallelism comes
// from tiles of C chosen from the shape alone. This scope makes calls from this thread
// single-threaded: the OpenMP build of OpenBLAS runs omp_get_max_threads() threads of the
// calling thread (one inside a parallel region), the pthreads build has a global count.
class OpenblasSingleThreadScope {
 public:
  OpenblasSingleThreadScope() {
    const int kind = openblas_get_parallel();
    if (kind == OPENBLAS_OPENMP) {
#ifdef _OPENMP
      if (!omp_in_parallel() && omp_get_max_threads() != 1) {
        saved_ = omp_get_max_threads();
        omp_set_num_threads(1);  // this thread's setting only; parallel_for names its own counts
      }
#endif
    } else if (kind != OPENBLAS_SEQUENTIAL && openblas_get_num_threads() != 1) {
      openblas_set_num_threads(1);
    }
  }
  ~OpenblasSingleThreadScope() {
#ifdef _OPENMP
    if (saved_) omp_set_num_threads(saved_);
#endif
  }
  OpenblasSingleThreadScope(const OpenblasSingleThreadScope&) = delete;
  OpenblasSingleThreadScope& operator=(const OpenblasSingleThreadScope&) = delete;

 private:
  int saved_ = 0;
};

struct Tiling {
  size_t mt, nt, tiles_m, tiles_n;
};

// Tiles of C for the parallel cblas calls: about one per 64 MFLOP, at most 16, none thinner
// than 256 (each tile repacks its A rows and B columns, so thin tiles cost bandwidth; at 2
// threads this measured 1-4% faster than 32 tiles of 128).
Tiling choose_tiles(size_t m, size_t n, size_t k) {
  constexpr size_t kMinTile = 256, kMaxTiles = 16;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const size_t target = static_cast<size_t>(std::clamp(flops / double(1 << 26), 1.0, double(kMaxTiles)));
  auto halve = [](size_t x) { return ((x + 1) / 2 + 15) / 16 * 16; };
  size_t mt = m, nt = n;
  while (((m + mt - 1) / mt) * ((n + nt - 1) / nt) < target) {
    if (mt >= nt && mt >= 2 * kMinTile)
      mt = halve(mt);
    else if (nt >= 2 * kMinTile)
      nt = halve(nt);
    else if (mt >= 2 * kMinTile)
      mt = halve(mt);
    else
      break;
  }
  return {mt, nt, (m + mt - 1) / mt, (n + nt - 1) / nt};
}

void cblas_call(bool ta, bool tb, size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b,
                size_t ldb, float* c, size_t ldc, bool acc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), 1.0f, a, int(lda), b, int(ldb), acc ? 1.0f : 0.0f, c, int(ldc));
}
void cblas_call(bool ta, bool tb, size_t m, size_t n, size_t k, const double* a, size_t lda, const double* b,
                size_t ldb, double* c, size_t ldc, bool acc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), 1.0, a, int(lda), b, int(ldb), acc ? 1.0 : 0.0, c, int(ldc));
}

template <typename T>
void gemm_openblas(size_t m, size_t n, size_t k, MatRef<T> a, MatRef<T> b, T* c, size_t ldc,
                   bool accumulate) {
  if (m == 0 || n == 0) return;
  // In a process whose first OpenBLAS call is a large sgemm on 2+ threads, that call rounded
  // differently from every later call with the same operands (OpenBLAS 0.3.21, 48x432 by
  // 432x700: 25894 of 33600 values differed; a tiny call first makes every call agree).
  static std::once_flag warm_up;
  thread_local bool warming = false;
  if (!warming) {
    std::call_once(warm_up, [] {
      warming = true;
      T a2[4] = {1, 2, 3, 4}, c2[4];
      gemm_openblas<T>(2, 2, 2, MatRef<T>{a2, 2, 1}, MatRef<T>{a2, 2, 1}, c2, 2, false);
      warming = false;
    });
  }
  if (k == 0) {
    if (!accumulate) zero_rows(c, m, n, ldc);
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || ldc > INT_MAX) {
    gemm_builtin(m, n, k, a, b, c, ldc, accumulate);
    return;
  }
  Scratch<T> a_copy, b_copy;
  std::optional<BlasOperand> fa = blas_form(a, m, k), fb = blas_form(b, k, n);
  if (!fa) {
    a = copy_dense(a, m, k, a_copy);
    fa = BlasOperand{false, k};
  }
  if (!fb) {
    b = copy_dense(b, k, n, b_copy);
    fb = BlasOperand{false, n};
  }
  OpenblasSingleThreadScope single_thread;
  const Tiling t = choose_tiles(m, n, k);
  parallel_for(t.tiles_m * t.tiles_n, 1, [&](size_t t0, size_t t1) {
    for (size_t idx = t0; idx < t1; ++idx) {
      const size_t ti = idx / t.tiles_n, tj = idx - ti * t.tiles_n;
      const size_t i0 = ti * t.mt, j0 = tj * t.nt;
      const size_t mi = std::min(t.mt, m - i0), nj = std::min(t.nt, n - j0);
      const T* ap = fa->trans ? a.p + i0 : a.p + i0 * fa->ld;
      const T* bp = fb->trans ? b.p + j0 * fb->ld : b.p + j0;
      cblas_call(fa->trans, fb->trans, mi, nj, k, ap, fa->ld, bp, fb->ld, c + i0 * ldc + j0, ldc, accumulate);
    }
  });
}
#endif  // CANDLE_HAVE_OPENBLAS

// ---- f32 panels of the small float types ------------------------------------------------

// f16 bits -> f32 with selects instead of branches (vectorizes); no arithmetic on subnormal
// floats, so the result holds with denormals-are-zero set too.
inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t em = h & 0x7fffu;
  const float subnormal = static_cast<float>(em) * 5.9604644775390625e-08f;          // em * 2^-24
  uint32_t r = em >= 0x7c00u ? (em << 13) | 0x7f800000u : (em << 13) + 0x38000000u;  // rebias by 112
  r = em < 0x400u ? std::bit_cast<uint32_t>(subnormal) : r;
  return std::bit_cast<float>(r | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

CANDLE_MM_CLONES void f16_run_to_f32(const uint16_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_bits_to_f32(src[i]);
}
CANDLE_MM_CLONES void bf16_run_to_f32(const uint16_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
}
// f16::from_f32 and bf16::from_f32 with selects instead of branches, so that they vectorize;
// the same bits for every input (the matmul tests check outer products against them).
inline uint16_t f32_to_f16_bits(float v) {
  const uint32_t x = std::bit_cast<uint32_t>(v);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;  // rebias, round to even
  const uint32_t subnormal = std::bit_cast<uint32_t>(std::bit_cast<float>(ax) + 0.5f) - 0x3f000000u;
  uint32_t r = ax < 0x38800000u ? subnormal : normal;
  r = ax >= 0x477ff000u ? 0x7c00u : r;  // rounds to inf
  r = ax > 0x7f800000u ? 0x7e00u : r;   // NaN
  return static_cast<uint16_t>(sign | r);
}
inline uint16_t f32_to_bf16_bits(float v) {
  const uint32_t x = std::bit_cast<uint32_t>(v);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : rounded);
}

CANDLE_MM_CLONES void f32_run_to_f16(const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16_bits(src[i]);
}
CANDLE_MM_CLONES void f32_run_to_bf16(const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16_bits(src[i]);
}

template <typename T>
void run_to_f32(const T* src, size_t n, float* dst) {
  if constexpr (std::is_same_v<T, f16>) {
    f16_run_to_f32(reinterpret_cast<const uint16_t*>(src), n, dst);
  } else if constexpr (std::is_same_v<T, bf16>) {
    bf16_run_to_f32(reinterpret_cast<const uint16_t*>(src), n, dst);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

template <typename T>
void run_from_f32(const float* src, size_t n, T* dst) {
  if constexpr (std::is_same_v<T, f16>) {
    f32_run_to_f16(src, n, reinterpret_cast<uint16_t*>(dst));
  } else if constexpr (std::is_same_v<T, bf16>) {
    f32_run_to_bf16(src, n, reinterpret_cast<uint16_t*>(dst));
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  }
}

template <typename T>
float elem_to_f32(T v) {
  if constexpr (std::is_same_v<T, f16>)
    return f16_bits_to_f32(v.bits);
  else
    return static_cast<float>(v);
}

// An f32 copy of a rows x cols view, reading runs of consecutive elements: a column-major
// source gives a column-major panel (the GEMM takes it transposed), anything else row-major.
template <typename T>
MatRef<float> convert_panel(MatRef<T> x, size_t rows, size_t cols, Scratch<float>& buf) {
  float* dst = buf.get(rows * cols);
  if (x.rs == 1 && x.cs != 1 && rows > 1 && cols > 1) {
    parallel_for(cols, kParallelGrain / rows + 1, [&](size_t j0, size_t j1) {
      for (size_t j = j0; j < j1; ++j) run_to_f32(x.p + j * x.cs, rows, dst + j * rows);
    });
    return {dst, 1, rows};
  }
  parallel_for(rows, kParallelGrain / std::max<size_t>(cols, 1) + 1, [&](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) {
      const T* src = x.p + i * x.rs;
      float* d = dst + i * cols;
      if (x.cs == 1) {
        run_to_f32(src, cols, d);
      } else {
        for (size_t j = 0; j < cols; ++j) d[j] = elem_to_f32(src[j * x.cs]);
      }
    }
  });
  return {dst, cols, 1};
}

// K per conversion pass: the whole of K while the f32 panels of A and B stay under 32 MiB.
size_t conversion_panel_k(size_t m, size_t n, size_t k) {
  constexpr size_t kPanelFloats = size_t{8} << 20;
  if ((m + n) * k <= kPanelFloats) return k;
  return std::max<size_t>(256, kPanelFloats / (m + n) / 64 * 64);
}

struct HalfScratch {
  Scratch<float> a, b, c;
};

// One m x n product of a small float type: f32 panels, sgemm into an f32 accumulator, one
// rounding at the end.
template <typename T>
void matmul_converted(size_t m, size_t n, size_t k, MatRef<T> a, MatRef<T> b, T* c, HalfScratch& s) {
  const size_t kp = conversion_panel_k(m, n, k);
  float* cf = s.c.get(m * n);
  for (size_t p0 = 0; p0 < k; p0 += kp) {
    const size_t kc = std::min(kp, k - p0);
    MatRef<float> af = convert_panel(MatRef<T>{a.p + p0 * a.cs, a.rs, a.cs}, m, kc, s.a);
    MatRef<float> bf = convert_panel(MatRef<T>{b.p + p0 * b.rs, b.rs, b.cs}, kc, n, s.b);
    gemm(m, n, kc, af, bf, cf, n, p0 > 0);
  }
  const size_t total = m * n;
  parallel_for(total, kParallelGrain, [&](size_t i0, size_t i1) { run_from_f32(cf + i0, i1 - i0, c + i0); });
}

// Below this many multiply-adds per matrix, a batch is spread over threads matrix by matrix.
constexpr size_t kBatchParallelWork = size_t{1} << 21;

}  // namespace

void gemm(size_t m, size_t n, size_t k, MatRef<float> a, MatRef<float> b, float* c, size_t ldc,
          bool accumulate) {
#ifdef CANDLE_HAVE_OPENBLAS
  if (use_openblas()) return gemm_openblas(m, n, k, a, b, c, ldc, accumulate);
#endif
  gemm_builtin(m, n, k, a, b, c, ldc, accumulate);
}

void gemm(size_t m, size_t n, size_t k, MatRef<double> a, MatRef<double> b, double* c, size_t ldc,
          bool accumulate) {
#ifdef CANDLE_HAVE_OPENBLAS
  if (use_openblas()) return gemm_openblas(m, n, k, a, b, c, ldc, accumulate);
#endif
  gemm_builtin(m, n, k, a, b, c, ldc, accumulate);
}

}  // namespace cpu

StoragePtr CpuStorage::matmul(const Layout& lhs_l, const BackendStorage& rhs_base, const Layout& rhs_l,
                              MatmulDims d) const {
  const auto* rhs = dynamic_cast<const CpuStorage*>(&rhs_base);
  if (!rhs || rhs->dtype() != dtype_) {
    throw Error(ErrorKind::Internal, "matmul: rhs is not a cpu storage of the same dtype");
  }
  const Shape want_l{d.batch, d.m, d.k}, want_r{d.batch, d.k, d.n};
  if (lhs_l.shape() != want_l || rhs_l.shape() != want_r) {
    throw Error(ErrorKind::Internal, "matmul: layouts " + lhs_l.shape().to_string() + " and " +
                                         rhs_l.shape().to_string() + " do not match the dims");
  }
  if (lhs_l.max_offset_exclusive() > n_ || rhs_l.max_offset_exclusive() > rhs->elem_count()) {
    throw Error(ErrorKind::Internal, "matmul: layout out of the storage's bounds");
  }
  const size_t total = d.batch * d.m * d.n;
  if (d.k == 0 || total == 0) {
    // the empty sum is zero (and dispatch_float still rejects integer dtypes)
    dispatch_float(dtype_, "matmul", [&]<typename T>() {});
    return CpuStorage::zeros(dtype_, total);
  }
  auto out = CpuStorage::alloc(dtype_, total);
  dispatch_float(dtype_, "matmul", [&]<typename T>() {
    const T* lp = data<T>() + lhs_l.start_offset();
    const T* rp = rhs->data<T>() + rhs_l.start_offset();
    const auto& ls = lhs_l.stride();
    const auto& rs = rhs_l.stride();
    T* op = out->data<T>();
    const size_t m = d.m, n = d.n, k = d.k;
    auto one = [&](size_t bi, cpu::HalfScratch& scratch) {
      cpu::MatRef<T> a{lp + bi * ls[0], ls[1], ls[2]};
      cpu::MatRef<T> b{rp + bi * rs[0], rs[1], rs[2]};
      T* c = op + bi * m * n;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        (void)scratch;
        cpu::gemm(m, n, k, a, b, c, n, false);
      } else {
        cpu::matmul_converted(m, n, k, a, b, c, scratch);
      }
    };
    const size_t work = m * n * k;
    if (d.batch > 1 && work < cpu::kBatchParallelWork) {
      size_t grain = std::max<size_t>(1, (size_t{1} << 16) / work);
      cpu::parallel_for(d.batch, grain, [&](size_t b0, size_t b1) {
        cpu::HalfScratch scratch;
        for (size_t bi = b0; bi < b1; ++bi) one(bi, scratch);
      });
    } else {
      cpu::HalfScratch scratch;
      for (size_t bi = 0; bi < d.batch; ++bi) one(bi, scratch);
    }
  });
  return out;
}

}  // namespace candle
