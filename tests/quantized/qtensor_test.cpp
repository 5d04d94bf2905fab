// QTensor and QMatMul through the public API, with candle's numbers where candle's
// quantized_tests.rs has them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/quantized/quantized.h"
#include "quantized/qmatmul_cpu.h"

using namespace candle;
using namespace candle::quantized;

namespace {
Tensor arange_f32(size_t n, const Shape& shape) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.f);
  return Tensor::from_vec(v, shape, Device::cpu());
}
}  // namespace

// candle's quantize_q4_0: 0..128 through Q4_0 and back
TEST(QTensor, QuantizeQ4_0GivesCandlesValues) {
  QTensor q = QTensor::quantize(arange_f32(128, {4, 32}), GgmlDType::Q4_0);
  EXPECT_EQ(q.dtype(), GgmlDType::Q4_0);
  EXPECT_EQ(q.shape(), Shape({4, 32}));
  EXPECT_EQ(q.storage_size_in_bytes(), 4u * 18);
  std::vector<float> d = q.dequantize(Device::cpu()).flatten_to_vec<float>();
  // block 0: d = 31 / -8 = -3.875; block 1: d = 63 / -8 = -7.875
  const std::vector<std::pair<size_t, float>> expect = {{0, -0.f},    {1, -0.f},  {2, 3.875f}, {6, 7.75f},
                                                        {30, 31.f},   {31, 31.f}, {32, 31.5f}, {36, 39.375f},
                                                        {44, 47.25f}, {60, 63.f}, {63, 63.f}};
  for (auto [i, v] : expect) EXPECT_EQ(d[i], v) << "element " << i;
  EXPECT_TRUE(std::signbit(d[0]));
}

TEST(QTensor, FromBytesChecksTheSize) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(34 * 2);
  std::span<const uint8_t> view(bytes->data(), bytes->size());
  QTensor q = QTensor::from_bytes(bytes, view, {2, 32}, GgmlDType::Q8_0);
  EXPECT_EQ(q.data().size(), 68u);
  EXPECT_THROW(QTensor::from_bytes(bytes, view.first(67), {2, 32}, GgmlDType::Q8_0), Error);
  EXPECT_THROW(QTensor::from_bytes(bytes, view, {2, 16}, GgmlDType::Q8_0), Error);  // half a block
  EXPECT_THROW(QTensor::from_bytes(bytes, view, Shape{}, GgmlDType::Q8_0), Error);
}

TEST(QTensor, FromBytesOnTheCpuIsAViewWithNoDeviceCopy) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(68, uint8_t{0});
  std::span<const uint8_t> view(bytes->data(), bytes->size());
  QTensor q = QTensor::from_bytes(bytes, view, {2, 32}, GgmlDType::Q8_0);
  EXPECT_EQ(q.data().data(), bytes->data());
  EXPECT_EQ(q.data().size(), 68u);
  EXPECT_TRUE(q.device().is_cpu());
  EXPECT_FALSE(q.device_data().defined());
  EXPECT_EQ(q.dequantize(Device::cpu()).flatten_to_vec<float>(), std::vector<float>(64, 0.f));
}

// a legacy GGML file places tensors at any byte; such bytes are copied to an aligned buffer
// (block scales are 2- and 4-byte fields) and give the same values as aligned ones
TEST(QTensor, FromBytesAtAnOddAddressCopiesToAnAlignedBuffer) {
  for (GgmlDType dt : {GgmlDType::F16, GgmlDType::BF16, GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q8K}) {
    QTensor ref = QTensor::quantize(arange_f32(512, {2, 256}), dt);
    auto bytes = std::make_shared<std::vector<uint8_t>>(ref.data().size() + 1);
    std::copy(ref.data().begin(), ref.data().end(), bytes->begin() + 1);
    std::span<const uint8_t> odd(bytes->data() + 1, ref.data().size());
    QTensor q = QTensor::from_bytes(bytes, odd, {2, 256}, dt);
    EXPECT_NE(q.data().data(), odd.data()) << ggml_dtype_name(dt);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q.data().data()) % alignof(float), 0u) << ggml_dtype_name(dt);
    EXPECT_EQ(q.dequantize(Device::cpu()).flatten_to_vec<float>(),
              ref.dequantize(Device::cpu()).flatten_to_vec<float>())
        << ggml_dtype_name(dt);
  }
}

// cat_rows on the CPU: the parts' blocks one after the other in an owned buffer; parts of another
// type, row length or rank are refused
TEST(QTensor, CatRowsStacksTheBlocksOfTheParts) {
  const QTensor a = QTensor::quantize(arange_f32(512, {2, 256}), GgmlDType::Q4K);
  const QTensor b = QTensor::quantize(arange_f32(768, {3, 256}) * 0.5, GgmlDType::Q4K);
  const QTensor* parts[] = {&a, &b};
  const QTensor s = QTensor::cat_rows(parts);
  EXPECT_EQ(s.shape(), (Shape{5, 256}));
  std::vector<uint8_t> want(a.data().begin(), a.data().end());
  want.insert(want.end(), b.data().begin(), b.data().end());
  EXPECT_EQ(std::vector<uint8_t>(s.data().begin(), s.data().end()), want);
  const QTensor other = QTensor::quantize(arange_f32(256, {1, 256}), GgmlDType::Q8_0);
  const QTensor narrow = QTensor::quantize(arange_f32(512, {4, 128}), GgmlDType::Q8_0);
  const QTensor flat = QTensor::quantize(arange_f32(256, {256}), GgmlDType::Q4K);
  const QTensor* mixed[] = {&a, &other};
  const QTensor* rows[] = {&other, &narrow};
  const QTensor* rank[] = {&a, &flat};
  EXPECT_THROW(QTensor::cat_rows(mixed), Error);
  EXPECT_THROW(QTensor::cat_rows(rows), Error);
  EXPECT_THROW(QTensor::cat_rows(rank), Error);
  EXPECT_THROW(QTensor::cat_rows(std::span<const QTensor* const>{}), Error);
}

// narrow / get: rows of a QTensor, or the i-th matrix of a stack of them (an MoE layer's experts),
// as views of the same bytes on the CPU: their values are the whole's rows
TEST(QTensor, NarrowAndGetAreTheRowsOfTheWhole) {
  const Tensor t = arange_f32(3 * 4 * 64, {3, 4, 64}) * 0.01;
  const QTensor q = QTensor::quantize(t, GgmlDType::Q8_0);
  const Tensor all = q.dequantize(Device::cpu());
  const QTensor e = q.get(2, Device::cpu());
  EXPECT_EQ(e.shape(), (Shape{4, 64}));
  EXPECT_EQ(e.data().data(), q.data().data() + 2 * q.data().size() / 3) << "a view, not a copy";
  EXPECT_EQ(e.dequantize(Device::cpu()).flatten_to_vec<float>(), all.get(2).flatten_to_vec<float>());
  const QTensor m = QTensor::quantize(t.reshape({12, 64}), GgmlDType::Q8_0);
  const QTensor r = m.narrow(5, 4, Device::cpu());
  EXPECT_EQ(r.shape(), (Shape{4, 64}));
  EXPECT_EQ(r.dequantize(Device::cpu()).flatten_to_vec<float>(),
            m.dequantize(Device::cpu()).narrow(0, 5, 4).flatten_to_vec<float>());
  EXPECT_EQ(m.narrow(12, 0, Device::cpu()).shape(), (Shape{0, 64}));
  EXPECT_THROW(m.narrow(10, 3, Device::cpu()), Error);
  EXPECT_THROW(q.get(3, Device::cpu()), Error);
  EXPECT_THROW(QTensor::quantize(arange_f32(64, {64}), GgmlDType::Q8_0).get(0, Device::cpu()), Error);
}

// quantize reads a contiguous f32 tensor in place and converts anything else once: a transposed
// view, an f16 tensor and a narrowed one give the blocks of their contiguous f32 values
TEST(QTensor, QuantizeTakesViewsAndOtherFloatTypes) {
  Device::cpu().set_seed(3);
  const Tensor t = Tensor::randn(0.f, 1.f, {256, 64}, Device::cpu());
  auto blocks = [](const QTensor& q) { return std::vector<uint8_t>(q.data().begin(), q.data().end()); };
  const Tensor tt = t.t();  // [64, 256], not contiguous
  EXPECT_EQ(blocks(QTensor::quantize(tt, GgmlDType::Q4K)),
            blocks(QTensor::quantize(tt.contiguous(), GgmlDType::Q4K)));
  const Tensor h = t.to_dtype(DType::F16);
  EXPECT_EQ(blocks(QTensor::quantize(h, GgmlDType::Q8_0)),
            blocks(QTensor::quantize(h.to_dtype(DType::F32), GgmlDType::Q8_0)));
  const Tensor part = tt.contiguous().narrow(0, 10, 3);  // starts at an offset of its storage
  EXPECT_EQ(blocks(QTensor::quantize(part, GgmlDType::Q6K)),
            blocks(QTensor::quantize(part.contiguous().copy(), GgmlDType::Q6K)));
  const QTensor q = QTensor::quantize(part, GgmlDType::Q6K);
  EXPECT_EQ(q.dequantize(Device::cpu()).dims(), (std::vector<size_t>{3, 256}));
}

TEST(QTensor, QuantizeRejectsPartialBlocksAndIntegerTensors) {
  EXPECT_THROW(QTensor::quantize(arange_f32(100, {100}), GgmlDType::Q4K), Error);
  EXPECT_THROW(QTensor::quantize(Tensor::zeros({2, 32}, DType::I64, Device::cpu()), GgmlDType::Q8_0), Error);
  std::vector<float> imatrix(31, 1.f);
  EXPECT_THROW(QTensor::quantize_imatrix(arange_f32(64, {2, 32}), imatrix, GgmlDType::Q4_0), Error);
}

TEST(QTensor, ImatrixChangesTheBlocks) {
  Tensor t = Tensor::randn(0.f, 1.f, {4, 256}, Device::cpu());
  std::vector<float> w(256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 7 == 0 ? 10.f : 0.1f;
  QTensor a = QTensor::quantize(t, GgmlDType::Q4K), b = QTensor::quantize_imatrix(t, w, GgmlDType::Q4K);
  EXPECT_FALSE(std::equal(a.data().begin(), a.data().end(), b.data().begin()));
}

TEST(QTensor, RoundTripOfEveryTypeIsClose) {
  Tensor t = Tensor::randn(0.f, 1.f, {3, 512}, Device::cpu());
  for (GgmlDType ty : kAllGgmlDTypes) {
    QTensor q = QTensor::quantize(t, ty);
    Tensor back = q.dequantize(Device::cpu());
    double err = (back - t).sqr().mean_all().to_scalar<float>();
    EXPECT_LT(std::sqrt(err), 0.35) << ggml_dtype_name(ty);
    EXPECT_EQ(q.dequantize_f16(Device::cpu()).dtype(), DType::F16);
  }
}

// candle's quantized_matmul: the f32 product of 0..191 (3 x 64) by 0..255 (4 x 64)^T
TEST(QMatMul, F32WeightsMultiplyExactly) {
  Tensor lhs = arange_f32(3 * 64, {3, 64}), rhs = arange_f32(4 * 64, {4, 64});
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(rhs, GgmlDType::F32));
  EXPECT_FALSE(mm.is_quantized());
  auto r = mm.forward(lhs).to_vec2<float>();
  const std::vector<std::vector<float>> expect = {
      {85344, 214368, 343392, 472416}, {214368, 605536, 996704, 1387872}, {343392, 996704, 1650016, 2303328}};
  EXPECT_EQ(r, expect);
}

TEST(QMatMul, QuantizedWeightsAreCloseToF32) {
  Tensor x = Tensor::randn(0.f, 1.f, {2, 5, 256}, Device::cpu());
  Tensor w = Tensor::randn(0.f, 1.f, {48, 256}, Device::cpu());
  Tensor ref = x.broadcast_matmul(w.t());
  for (GgmlDType ty : {GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1, GgmlDType::Q8_0,
                       GgmlDType::Q2K, GgmlDType::Q3K, GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K,
                       GgmlDType::IQ4_NL, GgmlDType::IQ4_XS, GgmlDType::F16, GgmlDType::BF16}) {
    QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(w, ty));
    Tensor y = mm.forward(x);
    ASSERT_EQ(y.shape(), Shape({2, 5, 48}));
    double rel =
        std::sqrt((y - ref).sqr().mean_all().to_scalar<float>() / ref.sqr().mean_all().to_scalar<float>());
    EXPECT_LT(rel, ty == GgmlDType::Q2K ? 0.4 : ty == GgmlDType::Q3K ? 0.25 : 0.15) << ggml_dtype_name(ty);
  }
}

TEST(QMatMul, ShapeErrorsNameTheDims) {
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(arange_f32(64, {2, 32}), GgmlDType::Q8_0));
  try {
    mm.forward(arange_f32(3 * 64, {3, 64}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(QMatMul::from_qtensor(QTensor::quantize(arange_f32(64, {64}), GgmlDType::Q8_0)), Error);
}

namespace {
std::vector<std::vector<float>> rounded(const Tensor& t) {
  auto v = t.to_vec2<float>();
  for (auto& row : v)
    for (float& x : row) x = std::round(x);
  return v;
}
}  // namespace

// candle's quantized_matmul (quantized_tests.rs), CPU numbers: Q4_0 weights, Q8_0 activations
TEST(QMatMul, Q4_0GivesCandlesCpuNumbers) {
  Tensor lhs = arange_f32(3 * 64, {3, 64}), rhs = arange_f32(4 * 64, {4, 64});
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(rhs, GgmlDType::Q4_0));
  const std::vector<std::vector<float>> expect = {{85120, 214562, 345455, 474748},
                                                  {213475, 604465, 1000686, 1388317},
                                                  {341876, 994283, 1655709, 2301518}};
  EXPECT_EQ(rounded(mm.forward(lhs)), expect);
}

// candle's quantized_matmul_neg
TEST(QMatMul, Q4_0WithNegativeValuesGivesCandlesCpuNumbers) {
  std::vector<float> l(3 * 64), r(4 * 64);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(i) - 3.f * 64 / 2;
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i) - 4.f * 64 / 3;
  Tensor lhs = Tensor::from_vec(l, {3, 64}, Device::cpu()), rhs = Tensor::from_vec(r, {4, 64}, Device::cpu());
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(rhs, GgmlDType::Q4_0));
  const std::vector<std::vector<float>> expect = {
      {243524, -19596, -285051, -549815}, {23777, 21651, 19398, 18367}, {-196472, 63012, 324585, 587902}};
  Tensor res = mm.forward(lhs);
  EXPECT_EQ(rounded(res), expect);
  // a batch of two gives each row's numbers again
  Tensor res2 = mm.forward(Tensor::stack({lhs, lhs}, 0)).narrow(0, 1, 1).squeeze(0);
  EXPECT_EQ(res2.to_vec2<float>(), res.to_vec2<float>());
}

// candle's qmm_batch: Q2K rows give the same bits whatever the batch they are in
TEST(QMatMul, RowsDoNotDependOnTheBatch) {
  Tensor lhs = Tensor::randn(0.f, 1.f, {2, 256}, Device::cpu());
  QMatMul mm = QMatMul::from_qtensor(
      QTensor::quantize(Tensor::randn(0.f, 1.f, {6, 256}, Device::cpu()), GgmlDType::Q2K));
  Tensor a = mm.forward(lhs);
  ASSERT_EQ(a.shape(), Shape({2, 6}));
  Tensor lhs4 = Tensor::cat({lhs, lhs, lhs, lhs, lhs, lhs}, 0);
  Tensor b = mm.forward(lhs4);
  ASSERT_EQ(b.shape(), Shape({12, 6}));
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b.narrow(0, 2 * i, 2).to_vec2<float>(), a.to_vec2<float>()) << i;
}

// from_arc_repacked: the 32-element types, Q4_K / Q5_K / Q6_K / IQ4_XS with a multiple of 16 rows read a
// packed copy on a SIMD CPU and give from_arc's bits; f16 weights (no packed layout) and other row counts
// stay as they are
TEST(QMatMul, RepackedGivesThePlainBits) {
  Tensor x = Tensor::randn(0.f, 1.f, {5, 3, 256}, Device::cpu());
  Tensor x1 = Tensor::randn(0.f, 1.f, {1, 256}, Device::cpu());
  const char* env = std::getenv("CANDLE_QMM_REPACK");
  const bool simd = qmm_isa() != QmmIsa::Scalar && !(env && std::string(env) == "0");
  for (GgmlDType dt :
       {GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1, GgmlDType::Q8_0,
        GgmlDType::IQ4_NL, GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K, GgmlDType::IQ4_XS, GgmlDType::Q3K})
    for (size_t n : {48, 17}) {
      auto w = std::make_shared<const QTensor>(
          QTensor::quantize(Tensor::randn(0.f, 1.f, {n, size_t{256}}, Device::cpu()), dt));
      QMatMul plain = QMatMul::from_arc(w), packed = QMatMul::from_arc_repacked(w);
      EXPECT_FALSE(plain.repacked());
      EXPECT_EQ(packed.repacked(), simd && n % 16 == 0 && dt != GgmlDType::F16)
          << ggml_dtype_name(dt) << " n=" << n;
      EXPECT_EQ(packed.qtensor(), w.get());
      for (const Tensor& in : {x, x1}) {
        auto ya = plain.forward(in).flatten_all().to_vec1<float>();
        auto yb = packed.forward(in).flatten_all().to_vec1<float>();
        ASSERT_EQ(ya.size(), yb.size());
        EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
            << ggml_dtype_name(dt) << " n=" << n;
      }
    }
}

// QMatMul::group: the parts' products side by side, bit for bit, through one pass on the CPU (packed and
// plain parts together, row counts that are no multiple of the 16-row unit, one row and many, a batch
// dim); parts of different types multiply in turn with the same result; a part of another k is refused
TEST(QMatMul, GroupGivesThePartsSideBySide) {
  const size_t k = 512;
  Tensor x = Tensor::randn(0.f, 1.f, {2, 21, k}, Device::cpu());
  Tensor x1 = Tensor::randn(0.f, 1.f, {1, 1, k}, Device::cpu());
  auto part = [&](GgmlDType dt, size_t n, bool repack) {
    auto w = std::make_shared<const QTensor>(
        QTensor::quantize(Tensor::randn(0.f, 1.f, {n, k}, Device::cpu()), dt));
    return repack ? QMatMul::from_arc_repacked(w) : QMatMul::from_arc(w);
  };
  auto bits = [](const Tensor& t) {
    auto v = t.flatten_all().to_vec1<float>();
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  for (GgmlDType dt : {GgmlDType::Q4_0, GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::IQ4_XS,
                       GgmlDType::Q5K, GgmlDType::Q2K}) {
    // q / k / v-like parts: 64 packed rows, 17 plain ones (not a multiple of 16), 32 packed
    std::vector<QMatMul> parts{part(dt, 64, true), part(dt, 17, true), part(dt, 32, false)};
    const QMatMul g = QMatMul::group(parts);
    EXPECT_EQ(g.parts().size(), 3u);
    EXPECT_EQ(g.dtype(), dt);
    EXPECT_TRUE(g.is_quantized());
    EXPECT_EQ(g.qtensor(), nullptr);
    for (const Tensor& in : {x, x1}) {
      std::vector<Tensor> ys;
      for (const QMatMul& p : parts) ys.push_back(p.forward(in));
      const Tensor want = Tensor::cat(ys, 2), got = g.forward(in);
      EXPECT_EQ(got.shape(), want.shape()) << ggml_dtype_name(dt);
      EXPECT_EQ(bits(got), bits(want)) << ggml_dtype_name(dt) << " m=" << in.elem_count() / k;
    }
  }
  // mixed types: Q4_K_M's q / k and v (blocks of 256: one pass), IQ4_XS (its own lane order) beside
  // Q5_K, and blocks of 32 beside blocks of 256 (each part in turn): the same outputs
  for (const auto& [a, b] :
       {std::pair{GgmlDType::Q4K, GgmlDType::Q6K}, std::pair{GgmlDType::Q5K, GgmlDType::IQ4_XS},
        std::pair{GgmlDType::Q8_0, GgmlDType::Q4K}, std::pair{GgmlDType::Q4_0, GgmlDType::Q8_0}}) {
    std::vector<QMatMul> mixed{part(a, 32, true), part(b, 16, true), part(a, 17, true)};
    const QMatMul gm = QMatMul::group(mixed);
    EXPECT_EQ(gm.dtype(), GgmlDType::F32);
    for (const Tensor& in : {x, x1})
      EXPECT_EQ(bits(gm.forward(in)),
                bits(Tensor::cat({mixed[0].forward(in), mixed[1].forward(in), mixed[2].forward(in)}, 2)))
          << ggml_dtype_name(a) << " + " << ggml_dtype_name(b);
  }
  // the wrong input width names it; parts of different k are refused
  EXPECT_THROW((void)QMatMul::group({part(GgmlDType::Q8_0, 32, true)})
                   .forward(Tensor::ones({1, 256}, DType::F32, Device::cpu())),
               Error);
  auto w256 = std::make_shared<const QTensor>(
      QTensor::quantize(Tensor::randn(0.f, 1.f, {16, size_t{256}}, Device::cpu()), GgmlDType::Q8_0));
  EXPECT_THROW((void)QMatMul::group({part(GgmlDType::Q8_0, 16, true), QMatMul::from_arc(w256)}), Error);
  EXPECT_THROW((void)QMatMul::group({}), Error);
}

// from_arc_repacked's `packed` callback: a weight of several 4 MiB parts hands each part of its
// blocks over once, in order, covering them exactly (the GGUF loaders release the file's pages so)
TEST(QMatMul, RepackedHandsOverEachPartOnce) {
  if (qmm_isa() == QmmIsa::Scalar) GTEST_SKIP() << "the scalar kernels read no packed copy";
  const size_t n = 16 * 1000, k = 256;  // Q8_0: 8.7 MB of blocks, three parts
  auto w = std::make_shared<const QTensor>(
      QTensor::quantize(Tensor::randn(0.f, 1.f, {n, k}, Device::cpu()), GgmlDType::Q8_0));
  std::vector<std::pair<const uint8_t*, size_t>> parts;
  QMatMul packed = QMatMul::from_arc_repacked(
      w, [&](const void* p, size_t bytes) { parts.emplace_back(static_cast<const uint8_t*>(p), bytes); });
  if (!packed.repacked()) GTEST_SKIP() << "repacking is off (CANDLE_QMM_REPACK=0)";
  ASSERT_GE(parts.size(), 2u);
  const uint8_t* at = w->data().data();
  for (const auto& [p, bytes] : parts) {
    EXPECT_EQ(p, at);
    EXPECT_LE(bytes, size_t{4} << 20);
    at += bytes;
  }
  EXPECT_EQ(at, w->data().data() + w->data().size());
  Tensor x = Tensor::randn(0.f, 1.f, {3, k}, Device::cpu());
  EXPECT_EQ(packed.forward(x).flatten_all().to_vec1<float>(),
            QMatMul::from_arc(w).forward(x).flatten_all().to_vec1<float>());
}

// A row-parallel weight's share: whole blocks of columns, the rows' parts copied; split blocks and
// ranges past the end are refused.
TEST(QTensor, NarrowColsTakesWholeBlocksOfEveryRow) {
  for (GgmlDType dt : {GgmlDType::F32, GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::Q4K}) {
    const size_t bs = ggml_block_size(dt), k = 4 * std::max<size_t>(bs, 32);
    const QTensor q = QTensor::quantize(arange_f32(3 * k, {3, k}), dt);
    const size_t start = k / 4, len = k / 2;
    const QTensor part = q.narrow_cols(start, len, Device::cpu());
    EXPECT_EQ(part.shape(), (Shape{3, len}));
    EXPECT_EQ(part.dequantize(Device::cpu()).to_vec2<float>(),
              q.dequantize(Device::cpu()).narrow(1, start, len).to_vec2<float>())
        << ggml_dtype_name(dt);
    if (bs > 1) {
      EXPECT_THROW(q.narrow_cols(bs / 2, bs, Device::cpu()), Error) << ggml_dtype_name(dt);
    }
    EXPECT_THROW(q.narrow_cols(start, k, Device::cpu()), Error);
  }
}

// A quantized embedding table: the picked rows dequantized (ids of any shape, u32 or i64), the rows
// the whole table's dequantization has; an id past the table is named.
TEST(QTensor, EmbeddingDequantizesThePickedRows) {
  for (GgmlDType dt : {GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::F16}) {
    const QTensor q = QTensor::quantize(arange_f32(10 * 256, {10, 256}) / 100.0, dt);
    const Tensor ids = Tensor::from_vec(std::vector<int64_t>{7, 0, 7, 9, 3, 1}, {2, 3}, Device::cpu());
    const Tensor rows = q.embedding(ids, Device::cpu());
    EXPECT_EQ(rows.shape(), (Shape{2, 3, 256}));
    const Tensor want = q.dequantize(Device::cpu()).index_select(ids.flatten_all().to_dtype(DType::U32), 0);
    EXPECT_EQ(rows.reshape({6, 256}).to_vec2<float>(), want.to_vec2<float>()) << ggml_dtype_name(dt);
    const Tensor bad = Tensor::from_vec(std::vector<uint32_t>{2, 10}, {2}, Device::cpu());
    try {
      (void)q.embedding(bad, Device::cpu());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("id 10 of a table of 10 rows"), std::string::npos) << e.what();
    }
  }
}
