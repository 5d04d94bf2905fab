// qmatmul_cpu: the activations' 8-bit quantization, the kernel choice, the thread split, and
// the plain path of the float weight types.
#include "quantized/qmatmul_cpu.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "candle/error.h"
#include "cpu/parallel.h"
#include "quantized/qmatmul_kernels.h"

namespace candle::quantized {

namespace {

bool cpu_has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

struct IsaChoice {
  QmmIsa isa = QmmIsa::Scalar;
  std::optional<std::string> error;
};

const IsaChoice& isa_choice() {
  static const IsaChoice choice = [] {
    IsaChoice c;
    const char* env = std::getenv("CANDLE_QMATMUL_ISA");
    if (env && *env) {
      std::string_view v(env);
      if (v == "scalar")
        c.isa = QmmIsa::Scalar;
      else if (v == "avx2")
        c.isa = QmmIsa::Avx2;
      else if (v == "avx512")
        c.isa = QmmIsa::Avx512;
      else if (v == "amx")
        c.isa = QmmIsa::Amx;
      else {
        c.error =
            "CANDLE_QMATMUL_ISA='" + std::string(v.substr(0, 32)) + "' is not scalar, avx2, avx512 or amx";
        return c;
      }
      if (!qmm_isa_supported(c.isa))
        c.error = std::string("CANDLE_QMATMUL_ISA=") + qmm_isa_name(c.isa) + ": this CPU lacks it";
      return c;
    }
    // (not Amx: its tiles are chosen by CANDLE_QMATMUL_ISA=amx until their present form has been
    // run on an AMX machine; see docs/performance.md)
    c.isa = qmm_isa_supported(QmmIsa::Avx512) ? QmmIsa::Avx512
            : qmm_isa_supported(QmmIsa::Avx2) ? QmmIsa::Avx2
                                              : QmmIsa::Scalar;
    return c;
  }();
  return choice;
}

// Room for n elements, not initialised (every element a caller reads it wrote first), kept between
// calls: a vector's resize zeroed it, serially on the calling thread, and fresh pages faulted in
// there too: 3.4% + ~2% of a 2-thread TinyLlama prefill's main thread outside any parallel region,
// which more threads do not shorten
template <typename T>
class Scratch {
 public:
  T* get(size_t n) {
    if (n > cap_) {
      p_.reset();
      p_.reset(new T[n]);
      cap_ = n;
    }
    return p_.get();
  }
  size_t bytes() const { return cap_ * sizeof(T); }

 private:
  std::unique_ptr<T[]> p_;
  size_t cap_ = 0;
};

// The activation quants of one call (the storage behind qmm::Acts).
struct ActBuffer {
  Scratch<int8_t> qs;
  Scratch<float> d;
  Scratch<int16_t> sums16;
  Scratch<int32_t> sums32;
  Scratch<float> d8;
  Scratch<int32_t> sums8;
  Scratch<int8_t> qs_lanes;
  std::vector<uint8_t> qs_u8;  // (zero rows past m: assigned)
  qmm::Acts acts;
  size_t bytes() const {
    return qs.bytes() + d.bytes() + sums16.bytes() + sums32.bytes() + d8.bytes() + sums8.bytes() +
           qs_lanes.bytes() + qs_u8.capacity();
  }
};

// The calling thread's activation buffer, reused by its next product while it holds at most
// kActKeepBytes (a long prompt's larger ones are freed when their product ends)
constexpr size_t kActKeepBytes = size_t{32} << 20;

int8_t quant8(float v) {
  v = std::nearbyint(v);
  if (!(v >= -127.f)) v = v != v ? 0.f : -127.f;  // NaN to 0
  if (v > 127.f) v = 127.f;
  return static_cast<int8_t>(v);
}

// The Q8_0 / Q8_1 activation scale as ggml stores it (f16), so that a product gives llama.cpp's and
// candle's numbers (the quants themselves use the f32 scale, as ggml's do).
inline float f16_scale(float d) { return static_cast<float>(candle::f16(d)); }

// Q8_0 / Q8_1 form: d = amax / 127 per 32 (kept at f16 precision), q = round(x * 127 / amax)
// (ties to even)
void quantize_row_32(const float* x, size_t k, int8_t* q, float* d) {
  for (size_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.f;
    for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(xb[l]));
    d[b] = f16_scale(amax / 127.f);
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    for (int l = 0; l < 32; ++l) q[32 * b + l] = quant8(xb[l] * id);
  }
}

// Q8_K form: the element of largest magnitude max maps to -127: d = max / -127 per 256
void quantize_row_256(const float* x, size_t k, int8_t* q, float* d) {
  for (size_t b = 0; b < k / 256; ++b) {
    const float* xb = x + 256 * b;
    float amax = 0.f, vmax = 0.f;
    for (int l = 0; l < 256; ++l)
      if (std::fabs(xb[l]) > amax) {
        amax = std::fabs(xb[l]);
        vmax = xb[l];
      }
    if (amax == 0.f) {
      d[b] = 0.f;
      std::fill(q + 256 * b, q + 256 * (b + 1), int8_t{0});
      continue;
    }
    const float iscale = -127.f / vmax;
    d[b] = vmax / -127.f;
    for (int l = 0; l < 256; ++l) q[256 * b + l] = quant8(xb[l] * iscale);
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define CANDLE_QMM_ACTS_AVX2 1
#define QMM_ACT_TARGET __attribute__((target("avx2,fma")))
// The AVX2 twin of quantize_row_32 / quantize_row_256 plus the sums of 16: the same float
// operations per element (a multiply, round to nearest even, the clamp, NaN to 0) and an
// exact max, so the same quants and scales bit for bit.
QMM_ACT_TARGET inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
QMM_ACT_TARGET inline int hsum8i(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// the largest |x| of n (a multiple of 8) floats; NaNs are skipped (max_ps keeps its second operand)
QMM_ACT_TARGET inline float amax_avx2(const float* x, size_t n) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 acc = _mm256_setzero_ps();
  for (size_t l = 0; l < n; l += 8) acc = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + l), absmask), acc);
  return hmax8(acc);
}
// 32 quants of x * s into q, and the sums of each 16 into s16[0], s16[1]
QMM_ACT_TARGET inline void quant32_avx2(const float* x, float s, int8_t* q, int16_t* s16) {
  const __m256 vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  __m256i iv[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), vs),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 c = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(r, lo), hi), _mm256_cmp_ps(r, r, _CMP_ORD_Q));
    iv[j] = _mm256_cvtps_epi32(c);
  }
  s16[0] = static_cast<int16_t>(hsum8i(_mm256_add_epi32(iv[0], iv[1])));
  s16[1] = static_cast<int16_t>(hsum8i(_mm256_add_epi32(iv[2], iv[3])));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
}
QMM_ACT_TARGET void quantize_row_avx2(const float* x, size_t k, size_t qk, int8_t* q, float* d,
                                      int16_t* s16) {
  if (qk == 32) {
    for (size_t b = 0; b < k / 32; ++b) {
      const float amax = amax_avx2(x + 32 * b, 32);
      d[b] = f16_scale(amax / 127.f);
      const float id = amax > 0.f ? 127.f / amax : 0.f;
      quant32_avx2(x + 32 * b, id, q + 32 * b, s16 + 2 * b);
    }
    return;
  }
  for (size_t b = 0; b < k / 256; ++b) {
    const float* xb = x + 256 * b;
    const float amax = amax_avx2(xb, 256);
    if (amax == 0.f) {
      d[b] = 0.f;
      std::fill(q + 256 * b, q + 256 * (b + 1), int8_t{0});
      std::fill(s16 + 16 * b, s16 + 16 * (b + 1), int16_t{0});
      continue;
    }
    float vmax = 0.f;  // the first element of that magnitude, as the scalar scan finds it
    for (int l = 0; l < 256; ++l)
      if (std::fabs(xb[l]) == amax) {
        vmax = xb[l];
        break;
      }
    const float iscale = -127.f / vmax;
    d[b] = vmax / -127.f;
    for (int j = 0; j < 8; ++j) quant32_avx2(xb + 32 * j, iscale, q + 256 * b + 32 * j, s16 + 16 * b + 2 * j);
  }
}
#undef QMM_ACT_TARGET
#endif

void quantize_acts(const float* x, size_t m, size_t k, size_t qk, ActBuffer& buf, bool simd) {
  int8_t* const qs = buf.qs.get(m * k);
  float* const d = buf.d.get(m * (k / qk));
  int16_t* const sums16 = buf.sums16.get(m * (k / 16));
  int32_t* const sums32 = buf.sums32.get(m * (k / 32));
  const size_t nb = k / qk, groups = (m + 7) / 8;
  float* const d8 = buf.d8.get(groups * nb * 8);
  int32_t* const sums8 = qk == 32 ? buf.sums8.get(groups * nb * 8) : nullptr;
  cpu::parallel_for(m, std::max<size_t>(1, 16384 / k), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      int8_t* q = qs + i * k;
      bool done = false;
#ifdef CANDLE_QMM_ACTS_AVX2
      if (simd) {
        quantize_row_avx2(x + i * k, k, qk, q, d + i * (k / qk), sums16 + i * (k / 16));
        done = true;
      }
#else
      (void)simd;
#endif
      if (!done) {
        if (qk == 32)
          quantize_row_32(x + i * k, k, q, d + i * (k / 32));
        else
          quantize_row_256(x + i * k, k, q, d + i * (k / 256));
        for (size_t s = 0; s < k / 16; ++s) {
          int v = 0;
          for (int l = 0; l < 16; ++l) v += q[16 * s + l];
          sums16[i * (k / 16) + s] = static_cast<int16_t>(v);
        }
      }
      for (size_t s = 0; s < k / 32; ++s)
        sums32[i * (k / 32) + s] = sums16[i * (k / 16) + 2 * s] + sums16[i * (k / 16) + 2 * s + 1];
      // the scales (and 32-sums) of each group of 8 rows side by side, written by the thread of the
      // row they copy: row r of a group holds row min(r, m - 1)'s (rows past m repeat the last)
      const size_t g = i / 8;
      for (size_t r = 8 * g; r < 8 * g + 8; ++r) {
        if (std::min(r, m - 1) != i) continue;
        for (size_t bb = 0; bb < nb; ++bb) {
          d8[(g * nb + bb) * 8 + (r - 8 * g)] = d[i * nb + bb];
          if (sums8) sums8[(g * nb + bb) * 8 + (r - 8 * g)] = sums32[i * nb + bb];
        }
      }
    }
  });
  buf.acts = {m, k, qk, qs, d, sums16, sums32, d8, sums8, nullptr};
}

// the quants again in an AVX-512 kernel's lane order (Acts::qs_lanes)
void add_lanes(ActBuffer& buf, const int* offsets) {
  const size_t m = buf.acts.m, k = buf.acts.k;
  int8_t* const lanes = buf.qs_lanes.get(m * k);
  const int8_t* const qs = buf.acts.qs;
  cpu::parallel_for(m, std::max<size_t>(1, 65536 / k), [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) qmm::lanes_by_group(qs + i * k, k, offsets, lanes + i * k);
  });
  buf.acts.qs_lanes = lanes;
}

// the quants + 128 as unsigned bytes, zero rows up to a multiple of 16 (Acts::qs_u8, the AMX tiles)
void add_u8(ActBuffer& buf) {
  const size_t m = buf.acts.m, k = buf.acts.k;
  buf.qs_u8.assign((m + 15) / 16 * 16 * k, 0);
  cpu::parallel_for(m, std::max<size_t>(1, 65536 / k), [&](size_t b, size_t e) {
    for (size_t i = b * k; i < e * k; ++i) buf.qs_u8[i] = static_cast<uint8_t>(buf.acts.qs[i] ^ 0x80);
  });
  buf.acts.qs_u8 = buf.qs_u8.data();
}

qmm::KernelFn kernel_for(GgmlDType t, QmmIsa isa) {
  switch (isa) {
    case QmmIsa::Amx:
    case QmmIsa::Avx512: return qmm::avx512_kernel(t);
    case QmmIsa::Avx2: return qmm::avx2_kernel(t);
    default: return qmm::scalar_kernel(t);
  }
}

// the weight rows one parallel_for index covers (a multiple of every kernel's row tile)
constexpr size_t kRowUnit = 16;

}  // namespace

const char* qmm_isa_name(QmmIsa isa) {
  switch (isa) {
    case QmmIsa::Avx2: return "avx2";
    case QmmIsa::Avx512: return "avx512";
    case QmmIsa::Amx: return "amx";
    default: return "scalar";
  }
}

namespace {
bool isa_supported_uncached(QmmIsa isa) {
  switch (isa) {
    case QmmIsa::Scalar: return true;
    case QmmIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case QmmIsa::Avx512:
      return isa_supported_uncached(QmmIsa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
    case QmmIsa::Amx: return isa_supported_uncached(QmmIsa::Avx512) && qmm::amx_usable();
  }
  return false;
}
}  // namespace

// read once (cpuid is slow under a hypervisor, and every call checks)
bool qmm_isa_supported(QmmIsa isa) {
  static const bool avx2 = isa_supported_uncached(QmmIsa::Avx2);
  static const bool avx512 = isa_supported_uncached(QmmIsa::Avx512);
  switch (isa) {
    case QmmIsa::Scalar: return true;
    case QmmIsa::Avx2: return avx2;
    case QmmIsa::Avx512: return avx512;
    case QmmIsa::Amx: {
      // (asked for only where wanted: it requests the tile state from the kernel)
      static const bool amx = isa_supported_uncached(QmmIsa::Amx);
      return amx;
    }
  }
  return false;
}

QmmIsa qmm_isa() {
  const IsaChoice& c = isa_choice();
  if (c.error) throw Error(ErrorKind::InvalidArgument, *c.error);
  return c.isa;
}

namespace qmm {
size_t qmm_decode_prefetch_bytes() {
  static const size_t bytes = [] {
    if (const char* env = std::getenv("CANDLE_QMM_DECODE_PREFETCH")) {
      const long v = std::strtol(env, nullptr, 10);
      return v > 0 && v <= (long{1} << 20) ? static_cast<size_t>(v) : size_t{0};
    }
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_is("intel") ? size_t{4096} : size_t{0};
#else
    return size_t{0};
#endif
  }();
  return bytes;
}
}  // namespace qmm

namespace {

// the chunks per thread the rows are cut into at least (4; for a decode, CANDLE_QMM_DECODE_SPLIT=1..64,
// read once, a benchmark's knob: fewer chunks are longer runs for the prefetchers, more balance the
// threads' loads)
size_t split_per_thread(size_t m) {
  static const size_t decode = [] {
    const char* env = std::getenv("CANDLE_QMM_DECODE_SPLIT");
    const long v = env ? std::strtol(env, nullptr, 10) : 0;
    return v >= 1 && v <= 64 ? static_cast<size_t>(v) : size_t{4};
  }();
  return m == 1 ? decode : 4;
}

// One weight of a product: fn over its n rows of row_bytes (a packed group of 16 rows is 16 times
// that), its outputs at column col of y.
struct RowsPart {
  qmm::KernelFn fn;
  const uint8_t* w;
  size_t row_bytes, n, col;
  GgmlDType t;
};

// The activations quantized once, then every part's rows on the threads, y m rows of ldy. The
// parts' types have one block size (one activation form: blocks of 32 or of 256, plus the lane
// order of a kernel that reads one); amx: a part's fn is an AMX kernel (it reads Acts::qs_u8 where
// m >= kAmxMinRows)
void run_rows(const std::vector<RowsPart>& parts, size_t k, const float* x, size_t m, float* y, size_t ldy,
              QmmIsa isa, bool amx = false) {
  const size_t bs = ggml_block_size(parts[0].t);
  thread_local ActBuffer kept;
  ActBuffer fresh;
  // (a product on this thread's kept buffer, or on its own where the kept one would pass the bound)
  const size_t want = 2 * m * k + (amx ? (m + 15) / 16 * 16 * k : 0);
  ActBuffer& buf = kept.bytes() + want <= kActKeepBytes || want <= kept.bytes() ? kept : fresh;
  quantize_acts(x, m, k, bs == 256 ? 256 : 32, buf, isa != QmmIsa::Scalar);
  if (isa == QmmIsa::Avx512 || isa == QmmIsa::Amx) {
    const int* lanes = nullptr;
    for (const RowsPart& p : parts) {
      const int* o = qmm::avx512_lane_offsets(p.t, m);
      if (o && lanes && o != lanes)
        throw Error(ErrorKind::Internal, "qmatmul: the parts' kernels read the inputs in two lane orders");
      if (o) lanes = o;
    }
    if (lanes) add_lanes(buf, lanes);
  }
  if (amx && m >= qmm::kAmxMinRows) add_u8(buf);
  // chunks of weights taken by the threads as they free up (every output is one kernel call's, so
  // the bits do not depend on who computes it): about 512 KiB for a decode (long runs of tiles, each
  // prefetching the next: 32 KiB chunks left the rows' streams to the hardware prefetchers and
  // read 20-30 GB/s instead of 40-50 on 2 Zen 4 cores), the kernels' slab for
  // m > 1 (192 KiB: each slab passes over every activation row); at least one row unit, and at
  // most a quarter of a thread's share, so that every thread has work on narrow matrices (k / v).
  // The parts' units follow each other (a unit never spans two parts).
  std::vector<size_t> first(parts.size() + 1, 0);
  size_t bytes = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    first[p + 1] = first[p] + (parts[p].n + kRowUnit - 1) / kRowUnit;
    bytes += parts[p].row_bytes * parts[p].n;
  }
  const size_t units = first.back(), unit_bytes = kRowUnit * parts[0].row_bytes;
  const size_t chunk_bytes = m == 1 ? size_t{512} << 10 : size_t{192} << 10;
  const size_t per_thread = units / (split_per_thread(m) * std::max<size_t>(1, get_num_threads()));
  const size_t grain = std::max<size_t>(1, std::min(chunk_bytes / unit_bytes, per_thread));
  auto rows = [&](size_t b, size_t e) {
    for (size_t p = 0; p < parts.size(); ++p) {
      const size_t lo = std::max(b, first[p]), hi = std::min(e, first[p + 1]);
      if (lo >= hi) continue;
      const RowsPart& r = parts[p];
      r.fn(r.w, r.row_bytes, (lo - first[p]) * kRowUnit, std::min(r.n, (hi - first[p]) * kRowUnit), buf.acts,
           y + r.col, ldy);
    }
  };
  // below ~64 KiB of weights x activation rows, waking the other threads costs more than the work
  if (bytes * m < (size_t{64} << 10))
    rows(0, units);
  else
    cpu::parallel_for_dynamic(units, grain, rows);
}

}  // namespace

void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y,
                 QmmIsa isa) {
  if (t != GgmlDType::F32 && t != GgmlDType::F16 && t != GgmlDType::BF16) {
    const QmmPart part{t, w, n, false};
    qmatmul_cpu_parts(&part, 1, k, x, m, y, isa);
    return;
  }
  if (!qmm_isa_supported(isa))
    throw Error(ErrorKind::InvalidArgument, std::string("qmatmul: this CPU lacks ") + qmm_isa_name(isa));
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(y, y + m * n, 0.f);
    return;
  }
  qmatmul_cpu_float(t, w, n, k, x, m, y, isa);
}

qmm::KernelFn packed_kernel_for(GgmlDType t, QmmIsa isa) {
  switch (isa) {
    case QmmIsa::Amx:
      if (qmm::KernelFn f = qmm::amx_packed_kernel(t)) return f;
      return qmm::avx512_packed_kernel(t);
    case QmmIsa::Avx512: return qmm::avx512_packed_kernel(t);
    case QmmIsa::Avx2: return qmm::avx2_packed_kernel(t);
    default: return nullptr;
  }
}

bool qmm_packable(GgmlDType t, size_t n, size_t k, QmmIsa isa) {
  return qmm_isa_supported(isa) && packed_kernel_for(t, isa) && n % qmm::kPackRows == 0 && n > 0 &&
         k % ggml_block_size(t) == 0 && k > 0;
}

void qmatmul_cpu_packed(GgmlDType t, const void* packed, size_t n, size_t k, const float* x, size_t m,
                        float* y, QmmIsa isa) {
  const QmmPart part{t, packed, n, true};
  qmatmul_cpu_parts(&part, 1, k, x, m, y, isa);
}

void qmatmul_cpu_parts(const QmmPart* parts, size_t count, size_t k, const float* x, size_t m, float* y,
                       QmmIsa isa) {
  if (!qmm_isa_supported(isa))
    throw Error(ErrorKind::InvalidArgument, std::string("qmatmul: this CPU lacks ") + qmm_isa_name(isa));
  if (count == 0) return;
  std::vector<RowsPart> rows;
  size_t cols = 0;
  bool amx = false;
  const size_t qk = ggml_block_size(parts[0].t);
  for (size_t p = 0; p < count; ++p) {
    const QmmPart& q = parts[p];
    const std::string name(ggml_dtype_name(q.t));
    qmm::KernelFn plain = kernel_for(q.t, isa);
    if (q.t == GgmlDType::F32 || q.t == GgmlDType::F16 || q.t == GgmlDType::BF16 || !plain)
      throw Error(ErrorKind::UnsupportedOp,
                  "qmatmul: " + name + " is not a block type of the quantized matmul");
    if (ggml_block_size(q.t) != qk)
      throw Error(ErrorKind::InvalidArgument, "qmatmul: parts of blocks of " + std::to_string(qk) +
                                                  " and of " + std::to_string(ggml_block_size(q.t)) +
                                                  " take differently quantized inputs");
    if (k % qk != 0)
      throw Error(ErrorKind::InvalidArgument, "qmatmul: k = " + std::to_string(k) + " is not a multiple of " +
                                                  name + "'s block size " + std::to_string(qk));
    if (q.packed && !qmm_packable(q.t, q.n, k, isa))
      throw Error(ErrorKind::InvalidArgument, "qmatmul: no packed " + std::string(qmm_isa_name(isa)) +
                                                  " kernel for " + name + " " + std::to_string(q.n) + " x " +
                                                  std::to_string(k));
    if (q.n > 0)
      rows.push_back(
          RowsPart{q.packed ? packed_kernel_for(q.t, isa) : plain, static_cast<const uint8_t*>(q.w),
                   q.packed ? qmm_packed_row_bytes(q.t, k) : ggml_row_bytes(q.t, k), q.n, cols, q.t});
    amx = amx || (q.packed && isa == QmmIsa::Amx && qmm::amx_packed_kernel(q.t));
    cols += q.n;
  }
  if (m == 0 || cols == 0) return;
  if (k == 0) {
    std::fill(y, y + m * cols, 0.f);
    return;
  }
  run_rows(rows, k, x, m, y, cols, isa, amx);
}

void qmatmul_cpu_packed_amx_emulated(GgmlDType t, const void* packed, size_t n, size_t k, const float* x,
                                     size_t m, float* y) {
  qmm::KernelFn fn = qmm::amx_emulated_packed_kernel(t);
  if (!fn || !qmm_packable(t, n, k, QmmIsa::Avx512))
    throw Error(ErrorKind::InvalidArgument, "qmatmul: no emulated AMX kernel for " +
                                                std::string(ggml_dtype_name(t)) + " " + std::to_string(n) +
                                                " x " + std::to_string(k) + " on this CPU");
  if (m == 0) return;
  run_rows({RowsPart{fn, static_cast<const uint8_t*>(packed), qmm_packed_row_bytes(t, k), n, 0, t}}, k, x, m,
           y, n, QmmIsa::Avx512, true);
}

void qmatmul_cpu(GgmlDType t, const void* w, size_t n, size_t k, const float* x, size_t m, float* y) {
  qmatmul_cpu(t, w, n, k, x, m, y, qmm_isa());
}

const char* qmatmul_cpu_kernel_name(GgmlDType t) {
  QmmIsa isa = qmm_isa();
  if (t == GgmlDType::F32 || t == GgmlDType::F16 || t == GgmlDType::BF16)
    return isa == QmmIsa::Scalar ? "float-scalar" : isa == QmmIsa::Avx2 ? "float-avx2" : "float-avx512";
  if (!kernel_for(t, isa)) return "none";
  if (isa == QmmIsa::Avx2) return qmm::avx2_variant_name();
  // (the AMX tiles serve only packed weights of their types; every other product runs AVX-512's)
  if (isa == QmmIsa::Amx && !qmm::amx_packed_kernel(t)) return qmm_isa_name(QmmIsa::Avx512);
  return qmm_isa_name(isa);
}

}  // namespace candle::quantized
