// qmatmul_cpu: every weight type against a dequantize-then-dot reference written here from the
// block layouts, every ISA of this CPU against the scalar kernels bit for bit, and the bits'
// independence of the thread count and of m.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "candle/dtype.h"
#include "candle/error.h"
#include "candle/quantized/blocks.h"
#include "candle/utils.h"
#include "quantized/qmatmul_cpu.h"

using namespace candle::quantized;

namespace {

constexpr GgmlDType kQuantTypes[] = {GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0,   GgmlDType::Q5_1,
                                     GgmlDType::Q8_0, GgmlDType::Q2K,  GgmlDType::Q3K,    GgmlDType::Q4K,
                                     GgmlDType::Q5K,  GgmlDType::Q6K,  GgmlDType::IQ4_NL, GgmlDType::IQ4_XS};

uint16_t f16_bits(float v) { return candle::f16(v).bits; }
float f16_val(const uint8_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return static_cast<float>(candle::f16::from_bits(b));
}

// the byte offsets of a block's f16 fields: the scale, and the min (or -1)
std::pair<int, int> f16_fields(GgmlDType t) {
  switch (t) {
    case GgmlDType::Q4_1:
    case GgmlDType::Q5_1:
    case GgmlDType::Q4K:
    case GgmlDType::Q5K: return {0, 2};
    case GgmlDType::Q2K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlDType::Q3K: return {offsetof(BlockQ3_K, d), -1};
    case GgmlDType::Q6K: return {offsetof(BlockQ6_K, d), -1};
    default: return {0, -1};
  }
}

// n rows of k elements: random bytes, with every f16 scale set to a small finite value
std::vector<uint8_t> random_weights(GgmlDType t, size_t n, size_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t bs = ggml_block_size(t), ts = ggml_type_size(t), nb = n * k / bs;
  std::vector<uint8_t> w(nb * ts);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> ud(0.002f, 0.05f);
  auto [fd, fm] = f16_fields(t);
  for (size_t b = 0; b < nb; ++b) {
    uint16_t d = f16_bits((rng() & 1 ? -1.f : 1.f) * ud(rng)), m = f16_bits(ud(rng));
    std::memcpy(w.data() + b * ts + fd, &d, 2);
    if (fm >= 0) std::memcpy(w.data() + b * ts + fm, &m, 2);
  }
  return w;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// The value of element e of one block, from the layouts as ggml documents them.
float element(GgmlDType t, const uint8_t* p, int e) {
  auto nib = [&](const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; };
  const float d0 = f16_val(p);
  switch (t) {
    case GgmlDType::Q4_0: return d0 * static_cast<float>(nib(p + 2, e) - 8);
    case GgmlDType::Q4_1: return d0 * static_cast<float>(nib(p + 4, e)) + f16_val(p + 2);
    case GgmlDType::Q5_0:
    case GgmlDType::Q5_1: {
      const bool one = t == GgmlDType::Q5_1;
      const uint8_t* qh = p + (one ? 4 : 2);
      int q = nib(qh + 4, e) | (((qh[e / 8] >> (e % 8)) & 1) << 4);
      return one ? d0 * static_cast<float>(q) + f16_val(p + 2) : d0 * static_cast<float>(q - 16);
    }
    case GgmlDType::Q8_0: return d0 * static_cast<float>(static_cast<int8_t>(p[2 + e]));
    case GgmlDType::IQ4_NL: return d0 * static_cast<float>(kIq4nlValues[nib(p + 2, e)]);
    case GgmlDType::Q2K: {
      // 2 halves of 128; in a half, 4 shifts of 32 elements over the same 32 bytes
      int half = e / 128, j = (e % 128) / 32, l = e % 32;
      int q = (p[16 + 32 * half + l] >> (2 * j)) & 3;
      uint8_t sc = p[e / 16];
      return f16_val(p + 80) * static_cast<float>(sc & 0xF) * static_cast<float>(q) -
             f16_val(p + 82) * static_cast<float>(sc >> 4);
    }
    case GgmlDType::Q3K: {
      int half = e / 128, j = (e % 128) / 32, l = e % 32;
      int q = ((p[32 + 32 * half + l] >> (2 * j)) & 3) - ((p[l] >> (4 * half + j)) & 1 ? 0 : 4);
      // the 16 6-bit scales: low nibbles in bytes 0..7 (both nibbles), high 2 bits in 8..11
      int s = e / 16;
      const uint8_t* sc = p + 96;
      int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
      int hi = (sc[8 + (s % 4)] >> (2 * (s / 4))) & 3;
      return f16_val(p + 108) * static_cast<float>((lo | (hi << 4)) - 32) * static_cast<float>(q);
    }
    case GgmlDType::Q4K:
    case GgmlDType::Q5K: {
      int sub = e / 32, l = e % 32;
      const uint8_t* sc = p + 4;
      int s, m;
      if (sub < 4) {
        s = sc[sub] & 63;
        m = sc[sub + 4] & 63;
      } else {
        s = (sc[sub + 4] & 0xF) | ((sc[sub - 4] >> 6) << 4);
        m = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4);
      }
      const bool five = t == GgmlDType::Q5K;
      const uint8_t* qs = p + (five ? 48 : 16);
      int q = (qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 0xF;
      if (five) q += ((p[16 + l] >> sub) & 1) * 16;
      return f16_val(p) * static_cast<float>(s) * static_cast<float>(q) -
             f16_val(p + 2) * static_cast<float>(m);
    }
    case GgmlDType::Q6K: {
      int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
      const uint8_t* ql = p + 64 * half;
      const uint8_t* qh = p + 128 + 32 * half;
      int lo = quarter == 0   ? ql[l] & 0xF
               : quarter == 1 ? ql[l + 32] & 0xF
               : quarter == 2 ? ql[l] >> 4
                              : ql[l + 32] >> 4;
      int hi = (qh[l] >> (2 * quarter)) & 3;
      int8_t sc = static_cast<int8_t>(p[192 + 8 * half + l / 16 + 2 * quarter]);
      return f16_val(p + 208) * static_cast<float>(sc) * static_cast<float>((lo | (hi << 4)) - 32);
    }
    case GgmlDType::IQ4_XS: {
      int sub = e / 32;
      uint16_t sh;
      std::memcpy(&sh, p + 2, 2);
      int ls = ((p[4 + sub / 2] >> (4 * (sub % 2))) & 0xF) | (((sh >> (2 * sub)) & 3) << 4);
      return f16_val(p) * static_cast<float>(ls - 32) *
             static_cast<float>(kIq4nlValues[nib(p + 8 + 16 * sub, e % 32)]);
    }
    default: ADD_FAILURE() << "no reference for " << ggml_dtype_name(t); return 0.f;
  }
}

std::vector<float> dequantize(GgmlDType t, const std::vector<uint8_t>& w, size_t n, size_t k) {
  const size_t bs = ggml_block_size(t), ts = ggml_type_size(t);
  std::vector<float> out(n * k);
  for (size_t i = 0; i < n * k; ++i) out[i] = element(t, w.data() + (i / bs) * ts, static_cast<int>(i % bs));
  return out;
}

std::vector<float> run(GgmlDType t, const void* w, size_t n, size_t k, const std::vector<float>& x, size_t m,
                       QmmIsa isa) {
  std::vector<float> y(m * n, -1.f);
  qmatmul_cpu(t, w, n, k, x.data(), m, y.data(), isa);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<QmmIsa> isas_here() {
  std::vector<QmmIsa> v;
  for (QmmIsa i : {QmmIsa::Scalar, QmmIsa::Avx2, QmmIsa::Avx512, QmmIsa::Amx})
    if (qmm_isa_supported(i)) v.push_back(i);
  return v;
}

struct ThreadCount {
  size_t saved = candle::get_num_threads();
  ~ThreadCount() { candle::set_num_threads(saved); }
};

class QMatMulCpu : public ::testing::TestWithParam<GgmlDType> {};

// |y - y_ref| <= sum_k |w_k| * (the activation quantization step / 2) plus float rounding:
// the quantizers round to the nearest of 255 levels of step amax / 127 per block.
TEST_P(QMatMulCpu, MatchesDequantizedReference) {
  const GgmlDType t = GetParam();
  const size_t n = 37, k = 512, m = 5, qk = ggml_block_size(t) == 256 ? 256 : 32;
  auto w = random_weights(t, n, k, 7);
  auto x = random_floats(m * k, 8);
  auto wf = dequantize(t, w, n, k);
  auto y = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double ref = 0, bound = 0, mag = 0;
      for (size_t b = 0; b < k / qk; ++b) {
        double amax = 0;
        for (size_t l = 0; l < qk; ++l) amax = std::max(amax, std::fabs(double(x[i * k + b * qk + l])));
        for (size_t l = 0; l < qk; ++l) {
          double wv = wf[j * k + b * qk + l], xv = x[i * k + b * qk + l];
          ref += wv * xv;
          mag += std::fabs(wv * xv);
          bound += std::fabs(wv) * amax / 254.0;
        }
      }
      ASSERT_NEAR(y[i * n + j], ref, bound * 1.001 + 1e-5 * mag + 1e-6)
          << ggml_dtype_name(t) << " i=" << i << " j=" << j;
    }
}

// the integer sums are exact, so every ISA gives the scalar kernels' bits
TEST_P(QMatMulCpu, EveryIsaGivesTheScalarBits) {
  const GgmlDType t = GetParam();
  for (auto [n, k, m] : {std::tuple<size_t, size_t, size_t>{37, 512, 7},
                         {8, 256, 1},
                         {21, 1024, 2},
                         {1, 256, 9},
                         {70, 768, 19}}) {
    auto w = random_weights(t, n, k, 11);
    auto x = random_floats(m * k, 12);
    auto ref = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
    for (QmmIsa isa : isas_here())
      EXPECT_TRUE(same_bits(run(t, w.data(), n, k, x, m, isa), ref))
          << ggml_dtype_name(t) << " " << qmm_isa_name(isa) << " n=" << n << " k=" << k << " m=" << m;
  }
}

// the activations' SIMD quantizers give the scalar one's quants: blocks of zeros, a largest
// magnitude met as +a and -a (the first one sets the sign), values on the rounding ties, a NaN
// and an infinity (their blocks' outputs are NaN or 0 alike), tiny values
TEST_P(QMatMulCpu, EdgeActivationsGiveTheScalarBits) {
  const GgmlDType t = GetParam();
  const size_t n = 9, k = 1024, m = 2;
  auto w = random_weights(t, n, k, 31);
  auto x = random_floats(m * k, 32);
  for (size_t i = 0; i < 256; ++i) x[i] = 0.f;   // block 0 of row 0: zeros
  x[300] = -1e3f, x[301] = 1e3f, x[400] = 1e3f;  // block 1: -1e3 first, then +1e3
  for (size_t i = 512; i < 544; ++i) x[i] = 0.5f * static_cast<float>(i - 527) * (127.f / 254.f);
  x[544] = 127.f / 16.f;                               // block 2: quotients near .5
  x[800] = std::numeric_limits<float>::quiet_NaN();    // block 3: a NaN
  x[k + 10] = std::numeric_limits<float>::infinity();  // row 1, block 0: an infinity
  for (size_t i = k + 256; i < k + 512; ++i) x[i] = 1e-30f * static_cast<float>(i % 7);
  auto ref = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
  for (QmmIsa isa : isas_here())
    EXPECT_TRUE(same_bits(run(t, w.data(), n, k, x, m, isa), ref))
        << ggml_dtype_name(t) << " " << qmm_isa_name(isa);
}

TEST_P(QMatMulCpu, BitsDoNotDependOnThreadsOrM) {
  const GgmlDType t = GetParam();
  const size_t n = 301, k = 512, m = 7;
  auto w = random_weights(t, n, k, 21);
  auto x = random_floats(m * k, 22);
  ThreadCount keep;
  for (QmmIsa isa : isas_here()) {
    candle::set_num_threads(1);
    auto ref = run(t, w.data(), n, k, x, m, isa);
    for (size_t th : {2, 3}) {
      candle::set_num_threads(th);
      EXPECT_TRUE(same_bits(run(t, w.data(), n, k, x, m, isa), ref))
          << qmm_isa_name(isa) << " threads=" << th;
    }
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
      auto yi = run(t, w.data(), n, k, xi, 1, isa);
      EXPECT_EQ(std::memcmp(yi.data(), ref.data() + i * n, n * sizeof(float)), 0)
          << ggml_dtype_name(t) << " " << qmm_isa_name(isa) << " row " << i << " alone differs from m=7";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QMatMulCpu, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& info) { return std::string(ggml_dtype_name(info.param)); });

// Q8_0 weights of scale 1 and integer activations of block maximum 127: both quantizations are
// exact, so y is the integer dot product.
TEST(QMatMulCpuValues, Q8_0ExactIntegers) {
  BlockQ8_0 blk[2];
  std::vector<float> x(64);
  double expect = 0;
  for (int b = 0; b < 2; ++b) {
    blk[b].d = f16_bits(b == 0 ? 1.f : 0.5f);
    for (int l = 0; l < 32; ++l) {
      blk[b].qs[l] = static_cast<int8_t>(l * 7 % 61 - 30);
      x[32 * b + l] = l == 3 ? 127.f : static_cast<float>(l % 9 - 4);
      expect += (b == 0 ? 1.0 : 0.5) * blk[b].qs[l] * x[32 * b + l];
    }
  }
  for (QmmIsa isa : isas_here()) {
    float y = 0;
    qmatmul_cpu(GgmlDType::Q8_0, blk, 1, 64, x.data(), 1, &y, isa);
    EXPECT_EQ(y, static_cast<float>(expect)) << qmm_isa_name(isa);
  }
  EXPECT_EQ(expect, 417.0);
}

TEST(QMatMulCpuValues, FloatWeights) {
  const size_t n = 19, k = 70, m = 3;
  auto wf = random_floats(n * k, 31);
  auto x = random_floats(m * k, 32);
  std::vector<uint16_t> wh(n * k), wb(n * k);
  for (size_t i = 0; i < n * k; ++i) {
    wh[i] = candle::f16(wf[i]).bits;
    wb[i] = candle::bf16(wf[i]).bits;
  }
  for (GgmlDType t : {GgmlDType::F32, GgmlDType::F16, GgmlDType::BF16}) {
    const void* w = t == GgmlDType::F32   ? static_cast<const void*>(wf.data())
                    : t == GgmlDType::F16 ? static_cast<const void*>(wh.data())
                                          : static_cast<const void*>(wb.data());
    auto y = run(t, w, n, k, x, m, QmmIsa::Scalar);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double ref = 0;
        for (size_t l = 0; l < k; ++l) {
          float wv = t == GgmlDType::F32   ? wf[j * k + l]
                     : t == GgmlDType::F16 ? static_cast<float>(candle::f16::from_bits(wh[j * k + l]))
                                           : static_cast<float>(candle::bf16::from_bits(wb[j * k + l]));
          ref += double(wv) * x[i * k + l];
        }
        EXPECT_NEAR(y[i * n + j], ref, 1e-4) << ggml_dtype_name(t);
      }
  }
}

// qmatmul_float.inc's order of the sums, written out: element e into lane e % 16 by fma (the tail
// zero-padded to 16); the 16 lanes reduced in pairs l, l + 8, then + 4, + 2, + 1
float float_weights_dot(const float* w, const float* x, size_t k) {
  float a[16] = {}, h[8];
  for (size_t e = 0; e < (k + 15) / 16 * 16; ++e)
    a[e % 16] = std::fma(e < k ? w[e] : 0.f, e < k ? x[e] : 0.f, a[e % 16]);
  for (int l = 0; l < 8; ++l) h[l] = a[l] + a[l + 8];
  const float q0 = h[0] + h[4], q1 = h[1] + h[5], q2 = h[2] + h[6], q3 = h[3] + h[7];
  return (q0 + q2) + (q1 + q3);
}

// The float weights' kernels (qmatmul_cpu_float): the bits of the order above on every ISA, for any
// thread count, one activation row (decode) or tiles of several, edge of the row and activation
// tiles and k not a multiple of 16; inf / NaN / subnormal f16 weights and inf / NaN activations
TEST(QMatMulCpuValues, FloatWeightsGiveTheSameBitsOnEveryIsa) {
  ThreadCount keep;
  for (auto [n, k] : {std::pair<size_t, size_t>{37, 70}, {64, 256}, {5, 16}, {300, 33}, {9, 20}, {6, 48}}) {
    auto wf = random_floats(n * k, 51);
    std::vector<uint16_t> wh(n * k), wb(n * k);
    for (size_t i = 0; i < n * k; ++i) {
      wh[i] = candle::f16(wf[i]).bits;
      wb[i] = candle::bf16(wf[i]).bits;
    }
    wh[3] = 0x7C00;                // inf
    wh[k + 1] = 0x0001;            // the smallest subnormal
    wb[2 * k % (n * k)] = 0x7FC1;  // NaN
    for (size_t m : {1, 2, 3, 7, 13}) {
      auto x = random_floats(m * k, 52);
      if (m > 2) x[2 * k + 4] = std::numeric_limits<float>::infinity();
      for (GgmlDType t : {GgmlDType::F32, GgmlDType::F16, GgmlDType::BF16}) {
        const void* w = t == GgmlDType::F32   ? static_cast<const void*>(wf.data())
                        : t == GgmlDType::F16 ? static_cast<const void*>(wh.data())
                                              : static_cast<const void*>(wb.data());
        candle::set_num_threads(1);
        const auto ref = run(t, w, n, k, x, m, QmmIsa::Scalar);
        std::vector<float> wrow(k);
        for (size_t j = 0; j < n; ++j) {
          for (size_t e = 0; e < k; ++e)
            wrow[e] = t == GgmlDType::F32   ? wf[j * k + e]
                      : t == GgmlDType::F16 ? candle::f16::to_f32(wh[j * k + e])
                                            : candle::bf16::to_f32(wb[j * k + e]);
          for (size_t i = 0; i < m; ++i)
            ASSERT_TRUE(same_bits({float_weights_dot(wrow.data(), x.data() + i * k, k)}, {ref[i * n + j]}))
                << ggml_dtype_name(t) << " n=" << n << " k=" << k << " m=" << m << " row " << j << " x row "
                << i;
        }
        for (QmmIsa isa : isas_here())
          for (size_t th : {1, 2, 3}) {
            candle::set_num_threads(th);
            EXPECT_TRUE(same_bits(run(t, w, n, k, x, m, isa), ref))
                << ggml_dtype_name(t) << " " << qmm_isa_name(isa) << " n=" << n << " k=" << k << " m=" << m
                << " threads=" << th;
          }
      }
    }
  }
}

TEST(QMatMulCpuErrors, KNotAMultipleOfTheBlock) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(300), y(4);
  try {
    qmatmul_cpu(GgmlDType::Q4K, w.data(), 1, 288, x.data(), 1, y.data());
    FAIL() << "no error";
  } catch (const candle::Error& e) {
    EXPECT_EQ(e.kind(), candle::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  EXPECT_THROW(qmatmul_cpu(GgmlDType::Q4_0, w.data(), 1, 48, x.data(), 1, y.data()), candle::Error);
}

TEST(QMatMulCpuErrors, ActivationTypesAreNotWeights) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(256), y(4);
  for (GgmlDType t : {GgmlDType::Q8_1, GgmlDType::Q8K}) {
    try {
      qmatmul_cpu(t, w.data(), 1, 256, x.data(), 1, y.data());
      FAIL() << "no error for " << ggml_dtype_name(t);
    } catch (const candle::Error& e) {
      EXPECT_EQ(e.kind(), candle::ErrorKind::UnsupportedOp);
    }
  }
}

TEST(QMatMulCpuErrors, IsaTheCpuLacks) {
  if (qmm_isa_supported(QmmIsa::Avx512)) GTEST_SKIP() << "this CPU has every ISA";
  std::vector<uint8_t> w(4096);
  std::vector<float> x(256), y(4);
  EXPECT_THROW(qmatmul_cpu(GgmlDType::Q4K, w.data(), 1, 256, x.data(), 1, y.data(), QmmIsa::Avx512),
               candle::Error);
}

// The packed layout (qmm_pack) gives the plain kernels' bits: every SIMD ISA here, decode and
// batches (tiles cut at the edges of m), several threads, activations with zeros / NaN / inf
TEST(QMatMulCpuPacked, GivesThePlainBits) {
  ThreadCount keep;
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1, GgmlDType::Q8_0,
                      GgmlDType::IQ4_NL, GgmlDType::Q2K, GgmlDType::Q3K, GgmlDType::Q4K, GgmlDType::Q5K,
                      GgmlDType::Q6K, GgmlDType::IQ4_XS})
    for (auto [n, k, m] : {std::tuple<size_t, size_t, size_t>{16, 256, 1},
                           {48, 512, 1},
                           {32, 512, 7},
                           {64, 1024, 19},
                           {160, 768, 5},
                           {2048, 256, 3}}) {
      auto w = random_weights(t, n, k, 41);
      auto x = random_floats(m * k, 42);
      x[3] = 0.f;
      if (m > 1) {
        for (size_t i = k; i < k + 32; ++i) x[i] = 0.f;
        x[k + 40] = std::numeric_limits<float>::infinity();
      }
      if (m > 2) x[2 * k + 5] = std::numeric_limits<float>::quiet_NaN();
      auto ref = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
      std::vector<uint8_t> packed(qmm_packed_row_bytes(t, k) * n);
      qmm_pack(t, w.data(), n, k, packed.data());
      bool any = false;
      for (QmmIsa isa : isas_here()) {
        if (!qmm_packable(t, n, k, isa)) continue;
        any = true;
        for (size_t th : {1, 2, 3}) {
          candle::set_num_threads(th);
          std::vector<float> y(m * n, -1.f);
          qmatmul_cpu_packed(t, packed.data(), n, k, x.data(), m, y.data(), isa);
          EXPECT_TRUE(same_bits(y, ref)) << ggml_dtype_name(t) << " " << qmm_isa_name(isa) << " n=" << n
                                         << " k=" << k << " m=" << m << " threads=" << th;
        }
      }
      if (!qmm_isa_supported(QmmIsa::Avx2)) continue;
      EXPECT_TRUE(any) << ggml_dtype_name(t) << " has no packed kernel on this AVX2 CPU";
    }
}

// the largest integer sums the packed kernels' narrow accumulators meet: every quant byte at its
// extreme (0xFF: nibbles of 15, Q5_0 / Q5_1 / Q5_K's 31, Q6_K's 63, the K scales of 63; Q8_0: -128;
// IQ4_NL / IQ4_XS: 0xFF, level 113 and scale 31, in even blocks, 0x00, level -127 and scale -32, in odd
// ones; Q3_K: quant 3 and scale 31, then quant -4 and scale -32; Q2_K: 3 with scale and min 15, then 0)
// against activations that quantize to +127 or -127 throughout, still the plain bits
TEST(QMatMulCpuPacked, ExtremeQuantsGiveThePlainBits) {
  const size_t n = 32, k = 512, m = 3;
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1, GgmlDType::Q8_0,
                      GgmlDType::IQ4_NL, GgmlDType::Q2K, GgmlDType::Q3K, GgmlDType::Q4K, GgmlDType::Q5K,
                      GgmlDType::Q6K, GgmlDType::IQ4_XS}) {
    const bool alt =
        t == GgmlDType::IQ4_NL || t == GgmlDType::IQ4_XS || t == GgmlDType::Q3K || t == GgmlDType::Q2K;
    auto w = random_weights(t, n, k, 3);
    const size_t ts = ggml_type_size(t), nb = n * k / ggml_block_size(t);
    auto [fd, fm] = f16_fields(t);
    for (size_t b = 0; b < nb; ++b)
      for (size_t i = 0; i < ts; ++i) {
        const bool f16 =
            (int(i) == fd || int(i) == fd + 1 || (fm >= 0 && (int(i) == fm || int(i) == fm + 1)));
        if (!f16) w[b * ts + i] = t == GgmlDType::Q8_0 ? 0x80 : (alt && b % 2) ? 0x00 : 0xFF;
      }
    std::vector<float> x(m * k);
    for (size_t i = 0; i < m * k; ++i) x[i] = i < k ? 1.f : (i < 2 * k ? -1.f : ((i / 7) % 2 ? 1.f : -1.f));
    auto ref = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
    std::vector<uint8_t> packed(qmm_packed_row_bytes(t, k) * n);
    qmm_pack(t, w.data(), n, k, packed.data());
    for (QmmIsa isa : isas_here()) {
      if (!qmm_packable(t, n, k, isa)) continue;
      for (size_t mm : {size_t{1}, m}) {
        std::vector<float> y(mm * n, -1.f), r(ref.begin(), ref.begin() + mm * n);
        qmatmul_cpu_packed(t, packed.data(), n, k, x.data(), mm, y.data(), isa);
        EXPECT_TRUE(same_bits(y, r)) << ggml_dtype_name(t) << " " << qmm_isa_name(isa) << " m=" << mm;
      }
    }
  }
}

// The AMX tiles (16 activation rows x 16 weight rows per TDPBUSD): their data flow with the tile
// instructions done in C++ on any AVX-512 CPU, and the real tiles where the CPU has them: the plain
// bits for m at and around the tile edges, activation rows in several chunks of the kernel (k =
// 16384: 32 rows a chunk), zero / inf / NaN activations, every quant at its extreme, 1-3 threads
TEST(QMatMulCpuPacked, AmxTilesGiveThePlainBits) {
  if (!qmm_isa_supported(QmmIsa::Avx512)) GTEST_SKIP() << "the AMX kernels' emulation needs AVX-512";
  ThreadCount keep;
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q8_0, GgmlDType::Q4K})
    for (bool extreme : {false, true})
      for (auto [n, k, m] : {std::tuple<size_t, size_t, size_t>{16, 64, 8},
                             {32, 512, 16},
                             {48, 256, 17},
                             {32, 1024, 40},
                             {32, 16384, 40},
                             {32, 224, 24},
                             {64, 2048, 8},
                             {32, 768, 21}}) {
        if (k % ggml_block_size(t) != 0) continue;
        auto w = random_weights(t, n, k, 51);
        if (extreme) {
          const size_t ts = ggml_type_size(t);
          auto [fd, fm] = f16_fields(t);
          for (size_t b = 0; b < n * k / ggml_block_size(t); ++b)
            for (size_t i = 0; i < ts; ++i)
              if (int(i) != fd && int(i) != fd + 1 && (fm < 0 || (int(i) != fm && int(i) != fm + 1)))
                w[b * ts + i] = t == GgmlDType::Q8_0 ? 0x80 : 0xFF;
        }
        auto x = random_floats(m * k, 52);
        if (extreme)
          for (size_t i = 0; i < m * k; ++i) x[i] = (i / k) % 2 ? -1.f : 1.f;
        x[5] = 0.f;
        for (size_t i = k; i < k + 32; ++i) x[i] = 0.f;
        x[2 * k + 40] = std::numeric_limits<float>::infinity();
        x[(m - 1) * k + 3] = std::numeric_limits<float>::quiet_NaN();
        auto ref = run(t, w.data(), n, k, x, m, QmmIsa::Scalar);
        std::vector<uint8_t> packed(qmm_packed_row_bytes(t, k) * n);
        qmm_pack(t, w.data(), n, k, packed.data());
        for (size_t th : {1, 2, 3}) {
          candle::set_num_threads(th);
          std::vector<float> y(m * n, -1.f);
          qmatmul_cpu_packed_amx_emulated(t, packed.data(), n, k, x.data(), m, y.data());
          EXPECT_TRUE(same_bits(y, ref)) << ggml_dtype_name(t) << " emulated n=" << n << " k=" << k
                                         << " m=" << m << " extreme=" << extreme << " threads=" << th;
          if (!qmm_isa_supported(QmmIsa::Amx)) continue;
          std::fill(y.begin(), y.end(), -1.f);
          qmatmul_cpu_packed(t, packed.data(), n, k, x.data(), m, y.data(), QmmIsa::Amx);
          EXPECT_TRUE(same_bits(y, ref)) << ggml_dtype_name(t) << " amx n=" << n << " k=" << k << " m=" << m
                                         << " extreme=" << extreme << " threads=" << th;
        }
      }
  if (!qmm_isa_supported(QmmIsa::Amx))
    std::printf("[ note     ] emulated AMX tiles checked; this CPU has no AMX tiles to run\n");
}

// packing moves bytes and nothing else: the same multiset of bytes, and a different order
TEST(QMatMulCpuPacked, PackIsAPermutation) {
  const size_t n = 32, k = 64;
  auto w = random_weights(GgmlDType::Q4_0, n, k, 5);
  std::vector<uint8_t> p(w.size());
  qmm_pack(GgmlDType::Q4_0, w.data(), n, k, p.data());
  EXPECT_NE(p, w);
  // row 1's scale of block 0 is at bytes 2..3 of the first group's block; its first 4 quants after
  // the 16 scales and row 0's 4 quants
  EXPECT_EQ(std::memcmp(p.data() + 2, w.data() + ggml_row_bytes(GgmlDType::Q4_0, k), 2), 0);
  EXPECT_EQ(std::memcmp(p.data() + 32 + 4, w.data() + ggml_row_bytes(GgmlDType::Q4_0, k) + 2, 4), 0);
  std::sort(p.begin(), p.end());
  std::sort(w.begin(), w.end());
  EXPECT_EQ(p, w);
}

TEST(QMatMulCpuPacked, ShapesAndTypesWithoutALayoutAreRefused) {
  for (QmmIsa isa : isas_here()) {
    EXPECT_FALSE(qmm_packable(GgmlDType::Q4_0, 17, 64, isa));
    EXPECT_FALSE(qmm_packable(GgmlDType::F16, 16, 256, isa));
    EXPECT_FALSE(qmm_packable(GgmlDType::Q4_0, 0, 64, isa));
  }
  EXPECT_FALSE(qmm_packable(GgmlDType::Q4_0, 16, 64, QmmIsa::Scalar));
  std::vector<uint8_t> w(ggml_row_bytes(GgmlDType::Q4_0, 64) * 17);
  std::vector<float> x(64), y(17);
  EXPECT_THROW(qmm_pack(GgmlDType::Q4_0, w.data(), 17, 64, w.data()), candle::Error);
  EXPECT_THROW(qmm_pack(GgmlDType::F16, w.data(), 16, 256, w.data()), candle::Error);
  EXPECT_THROW(qmatmul_cpu_packed(GgmlDType::Q4_0, w.data(), 17, 64, x.data(), 1, y.data(), qmm_isa()),
               candle::Error);
}

TEST(QMatMulCpuValues, KernelNameNamesTheIsa) {
  std::string name = qmatmul_cpu_kernel_name(GgmlDType::Q4_0);
  EXPECT_NE(name.find(qmm_isa_name(qmm_isa())), std::string::npos) << name;
}

}  // namespace
