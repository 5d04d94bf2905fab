// The GGML block codecs against llama.cpp: the bytes of ggml_quantize_chunk (with and without an
// importance matrix) and the values of ggml's to_float, bit for bit, from the fixtures of
// tools/gen_quant_fixtures.py (tests/data/quantized/, format in the script's header); then
// round-trip error bounds, thread-count independence and the error cases.
#include "quantized/codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "candle/dtype.h"
#include "candle/error.h"
#include "candle/quantized/blocks.h"
#include "candle/utils.h"
#include "cpu/gemm.h"

using namespace candle::quantized;

namespace {

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream f(std::string(CANDLE_TEST_DATA_DIR) + "/quantized/" + name, std::ios::binary);
  if (!f) return {};
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// a little-endian reader over a fixture that fails the test instead of reading past the end
struct Reader {
  const std::vector<uint8_t>& data;
  size_t pos = 0;
  bool ok = true;
  const uint8_t* take(size_t n) {
    if (!ok || n > data.size() - pos) {
      ok = false;
      return nullptr;
    }
    const uint8_t* p = data.data() + pos;
    pos += n;
    return p;
  }
  uint32_t u32() {
    const uint8_t* p = take(4);
    uint32_t v = 0;
    if (p) std::memcpy(&v, p, 4);
    return v;
  }
  template <typename T>
  std::vector<T> array(size_t n) {
    const uint8_t* p = take(n * sizeof(T));
    std::vector<T> v(p ? n : 0);
    if (p) std::memcpy(v.data(), p, n * sizeof(T));
    return v;
  }
};

struct Fixture {
  GgmlDType type{};
  size_t nrows = 0, n = 0;
  bool has_imatrix = false, has_to_float = false;
  std::vector<float> src, imatrix, dq, dqi;
  std::vector<uint8_t> q, qi;
};

// the fixture of t; fails the current test (and returns false) when it is missing or malformed
bool load_fixture(GgmlDType t, Fixture& fx) {
  std::vector<uint8_t> data = read_file(std::string(ggml_dtype_name(t)) + ".bin");
  Reader r{data};
  const uint8_t* magic = r.take(4);
  if (!magic || std::memcmp(magic, "CQF1", 4) != 0) {
    ADD_FAILURE() << "missing or bad fixture for " << ggml_dtype_name(t);
    return false;
  }
  fx.type = static_cast<GgmlDType>(r.u32());
  fx.nrows = r.u32();
  fx.n = r.u32();
  const uint32_t flags = r.u32();
  fx.has_imatrix = flags & 1;
  fx.has_to_float = flags & 2;
  EXPECT_EQ(fx.type, t);
  const size_t count = fx.nrows * fx.n, bytes = fx.nrows * ggml_row_bytes(t, fx.n);
  fx.src = r.array<float>(count);
  fx.imatrix = r.array<float>(fx.n);
  fx.q = r.array<uint8_t>(bytes);
  if (fx.has_to_float) fx.dq = r.array<float>(count);
  if (fx.has_imatrix) {
    fx.qi = r.array<uint8_t>(bytes);
    if (fx.has_to_float) fx.dqi = r.array<float>(count);
  }
  EXPECT_TRUE(r.ok && r.pos == data.size()) << "truncated or oversized fixture for " << ggml_dtype_name(t);
  return r.ok && r.pos == data.size() && fx.type == t;
}

// the index of the first differing byte, or -1
long first_difference(const void* a, const void* b, size_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(a);
  const uint8_t* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return static_cast<long>(i);
  return -1;
}

class CodecFixture : public ::testing::TestWithParam<GgmlDType> {};

std::string type_name(const ::testing::TestParamInfo<GgmlDType>& info) {
  return std::string(ggml_dtype_name(info.param));
}

TEST_P(CodecFixture, QuantizeGivesGgmlsBytes) {
  Fixture fx;
  if (!load_fixture(GetParam(), fx)) return;
  std::vector<uint8_t> ours(fx.q.size(), 0);
  quantize_rows(fx.type, fx.src.data(), ours.data(), fx.nrows, fx.n);
  EXPECT_EQ(first_difference(ours.data(), fx.q.data(), ours.size()), -1);
  // one row at a time gives the same bytes
  const size_t rb = ggml_row_bytes(fx.type, fx.n);
  for (size_t r = 0; r < fx.nrows; ++r) {
    std::vector<uint8_t> row(rb, 0);
    quantize_row(fx.type, fx.src.data() + r * fx.n, row.data(), fx.n);
    EXPECT_EQ(first_difference(row.data(), fx.q.data() + r * rb, rb), -1) << "row " << r;
  }
}

TEST_P(CodecFixture, QuantizeWithImatrixGivesGgmlsBytes) {
  Fixture fx;
  if (!load_fixture(GetParam(), fx)) return;
  if (!fx.has_imatrix) GTEST_SKIP() << "ggml has no importance-matrix form of this type";
  std::vector<uint8_t> ours(fx.qi.size(), 0);
  quantize_rows(fx.type, fx.src.data(), ours.data(), fx.nrows, fx.n, fx.imatrix.data());
  EXPECT_EQ(first_difference(ours.data(), fx.qi.data(), ours.size()), -1);
}

TEST_P(CodecFixture, DequantizeGivesGgmlsValues) {
  Fixture fx;
  if (!load_fixture(GetParam(), fx)) return;
  if (!fx.has_to_float) GTEST_SKIP() << "ggml has no to_float for this type";
  std::vector<float> ours(fx.dq.size());
  dequantize_rows(fx.type, fx.q.data(), ours.data(), fx.nrows, fx.n);
  EXPECT_EQ(first_difference(ours.data(), fx.dq.data(), ours.size() * sizeof(float)), -1);
  if (fx.has_imatrix) {
    dequantize_rows(fx.type, fx.qi.data(), ours.data(), fx.nrows, fx.n);
    EXPECT_EQ(first_difference(ours.data(), fx.dqi.data(), ours.size() * sizeof(float)), -1);
  }
  // dequantize_row of the first row, and the f16 form (its values rounded to f16)
  std::vector<float> row(fx.n);
  dequantize_row(fx.type, fx.q.data(), row.data(), fx.n);
  EXPECT_EQ(first_difference(row.data(), fx.dq.data(), fx.n * sizeof(float)), -1);
  std::vector<uint16_t> half(fx.nrows * fx.n);
  dequantize_rows_f16(fx.type, fx.q.data(), half.data(), fx.nrows, fx.n);
  for (size_t i = 0; i < half.size(); ++i)
    ASSERT_EQ(half[i], candle::f16::from_f32(fx.dq[i])) << "element " << i;
}

TEST_P(CodecFixture, BytesDoNotDependOnTheThreadCount) {
  Fixture fx;
  if (!load_fixture(GetParam(), fx)) return;
  const size_t saved = candle::get_num_threads();
  // 64 rows so that every thread count splits them
  std::vector<float> src;
  for (int k = 0; k < 10; ++k) src.insert(src.end(), fx.src.begin(), fx.src.end());
  const size_t nrows = src.size() / fx.n;
  const size_t bytes = nrows * ggml_row_bytes(fx.type, fx.n);
  std::vector<uint8_t> one(bytes), three(bytes);
  const float* im = fx.has_imatrix ? fx.imatrix.data() : nullptr;
  candle::set_num_threads(1);
  quantize_rows(fx.type, src.data(), one.data(), nrows, fx.n, im);
  candle::set_num_threads(3);
  quantize_rows(fx.type, src.data(), three.data(), nrows, fx.n, im);
  candle::set_num_threads(saved);
  EXPECT_EQ(one, three);
  EXPECT_EQ(first_difference(one.data(), (im ? fx.qi : fx.q).data(), (im ? fx.qi : fx.q).size()), -1);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CodecFixture, ::testing::ValuesIn(kAllGgmlDTypes), type_name);

// ggml has no to_float for Q8_1: ours gives d * q, the value its dot products use
TEST(Codec, Q8_1DequantizesToScaleTimesQuant) {
  Fixture fx;
  if (!load_fixture(GgmlDType::Q8_1, fx)) return;
  std::vector<float> ours(fx.nrows * fx.n);
  dequantize_rows(GgmlDType::Q8_1, fx.q.data(), ours.data(), fx.nrows, fx.n);
  const auto* blocks = reinterpret_cast<const BlockQ8_1*>(fx.q.data());
  for (size_t i = 0; i < ours.size(); ++i) {
    const BlockQ8_1& b = blocks[i / kQK8_1];
    ASSERT_EQ(ours[i], static_cast<float>(b.qs[i % kQK8_1]) * candle::f16::to_f32(b.d)) << "element " << i;
  }
}

TEST(Codec, FloatConversionsAreGgmls) {
  std::vector<uint8_t> data = read_file("float_conversions.bin");
  Reader r{data};
  const uint8_t* magic = r.take(4);
  ASSERT_TRUE(magic && std::memcmp(magic, "CQC1", 4) == 0);
  const size_t n = r.u32();
  auto x = r.array<float>(n);
  auto want_f16 = r.array<uint16_t>(n);
  auto want_bf16 = r.array<uint16_t>(n);
  const size_t m = r.u32();
  auto patterns = r.array<uint16_t>(m);
  auto from_f16 = r.array<float>(m);
  auto from_bf16 = r.array<float>(m);
  ASSERT_TRUE(r.ok && r.pos == data.size());
  std::vector<uint16_t> got(n);
  quantize_row(GgmlDType::F16, x.data(), got.data(), n);
  EXPECT_EQ(got, want_f16);
  quantize_row(GgmlDType::BF16, x.data(), got.data(), n);
  EXPECT_EQ(got, want_bf16);
  std::vector<float> values(m);
  dequantize_row(GgmlDType::F16, patterns.data(), values.data(), m);
  EXPECT_EQ(first_difference(values.data(), from_f16.data(), m * sizeof(float)), -1);
  dequantize_row(GgmlDType::BF16, patterns.data(), values.data(), m);
  EXPECT_EQ(first_difference(values.data(), from_bf16.data(), m * sizeof(float)), -1);
  // candle::f16 / bf16 encode the same way
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(candle::f16::from_f32(x[i]), want_f16[i]) << "element " << i;
    ASSERT_EQ(candle::bf16::from_f32(x[i]), want_bf16[i]) << "element " << i;
  }
}

// ggml quiets a signalling f16 NaN when widening it (candle::f16::to_f32 keeps its bits); the
// plain C++ path (ISA sse) and F16C's (avx2) agree on every one of the 65536 patterns
TEST(Codec, F16WideningIsTheSameOnEveryPath) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> plain(all.size()), fast(all.size());
  const candle::cpu::CpuIsa saved = candle::cpu::cpu_isa();
  candle::cpu::set_cpu_isa(candle::cpu::CpuIsa::Sse);
  dequantize_row(GgmlDType::F16, all.data(), plain.data(), all.size());
  candle::cpu::set_cpu_isa(saved);
  dequantize_row(GgmlDType::F16, all.data(), fast.data(), all.size());
  EXPECT_EQ(first_difference(plain.data(), fast.data(), plain.size() * sizeof(float)), -1);
  EXPECT_EQ(std::bit_cast<uint32_t>(plain[0x7c01]), 0x7fc02000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(plain[0xfd00]), 0xffe00000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(plain[0x0001]), 0x33800000u);  // the smallest subnormal, 2^-24
  EXPECT_EQ(std::bit_cast<uint32_t>(plain[0x7c00]), 0x7f800000u);
}

// relative RMS error (||x - dq(q(x))|| / ||x||) on normal rows: a format's known accuracy, with
// some margin (measured: q4_0 0.086, q2_K 0.297, q6_K 0.018, ...)
TEST(Codec, RoundTripErrorIsBounded) {
  struct Bound {
    GgmlDType t;
    double rel_rmse;
  };
  const Bound bounds[] = {
      {GgmlDType::F32, 0.0},      {GgmlDType::F16, 3e-4},     {GgmlDType::BF16, 2.2e-3},
      {GgmlDType::Q4_0, 0.10},    {GgmlDType::Q4_1, 0.09},    {GgmlDType::Q5_0, 0.05},
      {GgmlDType::Q5_1, 0.045},   {GgmlDType::Q8_0, 0.0065},  {GgmlDType::Q8_1, 0.0065},
      {GgmlDType::Q2K, 0.33},     {GgmlDType::Q3K, 0.17},     {GgmlDType::Q4K, 0.08},
      {GgmlDType::Q5K, 0.042},    {GgmlDType::Q6K, 0.021},    {GgmlDType::Q8K, 0.008},
      {GgmlDType::IQ4_NL, 0.085}, {GgmlDType::IQ4_XS, 0.085},
  };
  static_assert(std::size(bounds) == std::size(kAllGgmlDTypes));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const size_t n = 4096, rows = 4;
  std::vector<float> x(n * rows), y(n * rows), im(n);
  for (float& v : x) v = normal(rng);
  for (float& v : im) v = 1.0f + std::fabs(normal(rng));
  for (const Bound& b : bounds) {
    for (const float* imatrix : {static_cast<const float*>(nullptr), static_cast<const float*>(im.data())}) {
      std::vector<uint8_t> q(rows * ggml_row_bytes(b.t, n));
      quantize_rows(b.t, x.data(), q.data(), rows, n, imatrix);
      dequantize_rows(b.t, q.data(), y.data(), rows, n);
      double err = 0, norm = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        norm += double(x[i]) * x[i];
      }
      EXPECT_LE(std::sqrt(err / norm), b.rel_rmse)
          << ggml_dtype_name(b.t) << (imatrix ? " with imatrix" : "");
    }
  }
}

// a zero row stays zero through every type
TEST(Codec, ZeroRowRoundTripsToZero) {
  const std::vector<float> x(512, 0.0f);
  for (GgmlDType t : kAllGgmlDTypes) {
    std::vector<uint8_t> q(ggml_row_bytes(t, x.size()), 0xab);
    std::vector<float> y(x.size(), 1.0f);
    quantize_row(t, x.data(), q.data(), x.size());
    dequantize_row(t, q.data(), y.data(), y.size());
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_dtype_name(t);
  }
}

TEST(Codec, PartialBlockIsAnError) {
  std::vector<float> x(300, 1.0f), y(300);
  std::vector<uint8_t> q(4096);
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q8_1, GgmlDType::Q4K, GgmlDType::IQ4_XS}) {
    const size_t n = ggml_block_size(t) == 32 ? 48 : 300;
    EXPECT_THROW(quantize_row(t, x.data(), q.data(), n), candle::Error) << ggml_dtype_name(t);
    EXPECT_THROW(dequantize_row(t, q.data(), y.data(), n), candle::Error) << ggml_dtype_name(t);
    EXPECT_THROW(quantize_rows(t, x.data(), q.data(), 1, n), candle::Error) << ggml_dtype_name(t);
    EXPECT_THROW(dequantize_rows(t, q.data(), y.data(), 1, n), candle::Error) << ggml_dtype_name(t);
    std::vector<uint16_t> h(300);
    EXPECT_THROW(dequantize_row_f16(t, q.data(), h.data(), n), candle::Error) << ggml_dtype_name(t);
  }
  try {
    quantize_row(GgmlDType::Q4K, x.data(), q.data(), 300);
    FAIL() << "no error";
  } catch (const candle::Error& e) {
    EXPECT_EQ(e.kind(), candle::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("q4_K"), std::string::npos) << e.what();
  }
}

TEST(Codec, UnknownTypeIsAnError) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(4096);
  for (uint32_t id : {4u, 16u, 29u, 1000u}) {
    const auto t = static_cast<GgmlDType>(id);
    EXPECT_THROW(quantize_row(t, x.data(), q.data(), 256), candle::Error) << id;
    EXPECT_THROW(dequantize_row(t, q.data(), x.data(), 256), candle::Error) << id;
    EXPECT_THROW(quantize_rows(t, x.data(), q.data(), 1, 256), candle::Error) << id;
    EXPECT_THROW(quantize_requires_imatrix(t), candle::Error) << id;
  }
}

TEST(Codec, RowCountOverflowIsAnError) {
  float x[32] = {};
  uint8_t q[64] = {};
  EXPECT_THROW(quantize_rows(GgmlDType::Q8_0, x, q, SIZE_MAX / 8, 32), candle::Error);
  EXPECT_THROW(dequantize_rows(GgmlDType::Q8_0, q, x, SIZE_MAX / 8, 32), candle::Error);
}

TEST(Codec, NoTypeHereRequiresAnImatrix) {
  for (GgmlDType t : kAllGgmlDTypes) EXPECT_FALSE(quantize_requires_imatrix(t)) << ggml_dtype_name(t);
}

}  // namespace
