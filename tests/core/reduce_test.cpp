// Reductions, cumsum and sorting. Expected values from candle-core/tests/tensor_tests.rs
// where candle has them; the rest are written out or checked against plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "test_util.h"

using namespace candle;
using test_util::view;

namespace {

const Device& cpu() {
  static Device d = Device::cpu();
  return d;
}

using V3 = std::vector<std::vector<std::vector<uint32_t>>>;
using V2 = std::vector<std::vector<uint32_t>>;

Tensor candle_u32_3d() {
  return Tensor::new_({{{3u, 1u, 4u}, {1u, 5u, 9u}}, {{2u, 1u, 7u}, {8u, 2u, 8u}}}, cpu());
}

std::vector<float> f32(const Tensor& t) { return t.to_dtype(DType::F32).flatten_to_vec<float>(); }

// Deterministic pseudo-random values in [-1, 1).
std::vector<float> lcg_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// Small integers (exact in every float dtype, f8e4m3 included) as f32.
std::vector<float> small_ints(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 16) % 9);
  }
  return v;
}

template <typename T>
std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<T> v = t.flatten_to_vec<T>();
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <typename Fn>
void expect_error(ErrorKind kind, const std::vector<std::string>& needles, Fn&& fn) {
  try {
    fn();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// A [2000, 2] u32 tensor holding 0..4000 stored transposed (candle's t().contiguous().t()).
Tensor transposed_0_4000() {
  std::vector<uint32_t> tt(4000);
  for (uint32_t i = 0; i < 2000; ++i) {
    tt[i] = 2 * i;
    tt[2000 + i] = 2 * i + 1;
  }
  Tensor stored = Tensor::from_vec(tt, {2, 2000}, cpu());
  return view(stored, stored.layout().transpose(0, 1));
}

// candle's reshape((200, 5, 4)) of the above and its transpose(0, 2).contiguous().transpose(0, 2).
std::vector<Tensor> u32_200_5_4(uint32_t first) {
  std::vector<uint32_t> v(4000);
  for (uint32_t i = 0; i < 4000; ++i) v[i] = first + i;
  Tensor t1 = Tensor::from_vec(v, {200, 5, 4}, cpu());
  std::vector<uint32_t> tr(4000);  // [4, 5, 200]
  for (size_t a = 0; a < 200; ++a)
    for (size_t b = 0; b < 5; ++b)
      for (size_t c = 0; c < 4; ++c) tr[(c * 5 + b) * 200 + a] = v[(a * 5 + b) * 4 + c];
  Tensor stored = Tensor::from_vec(tr, {4, 5, 200}, cpu());
  Tensor t2 = view(stored, stored.layout().transpose(0, 2));
  return {t1, t2};
}

}  // namespace

// ---- candle's values ---------------------------------------------------------------------

TEST(ReduceSum, CandleSmall) {
  Tensor t = candle_u32_3d();
  EXPECT_EQ(t.sum_keepdim(2).to_vec3<uint32_t>(), (V3{{{8}, {15}}, {{10}, {18}}}));
  EXPECT_EQ(t.sum_keepdim(0).to_vec3<uint32_t>(), (V3{{{5, 2, 11}, {9, 7, 17}}}));
  EXPECT_EQ(t.sum_keepdim(std::vector<int64_t>{0, 2, 1}).to_vec3<uint32_t>(), (V3{{{51}}}));
  EXPECT_EQ(t.sum_keepdim(std::vector<int64_t>{2, 1}).to_vec3<uint32_t>(), (V3{{{8 + 15}}, {{10 + 18}}}));
  // candle: t.t().sum_keepdim(1).t() -> the transposed view reduced over its dim 1
  Tensor tt = view(t, t.layout().transpose(1, 2));
  EXPECT_EQ(tt.sum_keepdim(1).to_vec3<uint32_t>(), (V3{{{8, 15}}, {{10, 18}}}));
}

TEST(ReduceSum, Candle0To4000) {
  std::vector<uint32_t> data(4000);
  for (uint32_t i = 0; i < 4000; ++i) data[i] = i;
  Tensor t = Tensor::from_vec(data, {4000}, cpu());
  EXPECT_EQ(t.sum_keepdim(0).to_vec1<uint32_t>(), std::vector<uint32_t>{7998000});
  Tensor m = Tensor::from_vec(data, {2000, 2}, cpu());
  for (const Tensor& x : {m, transposed_0_4000()}) {
    EXPECT_EQ(x.sum_keepdim(std::vector<int64_t>{0, 1}).to_vec2<uint32_t>(), (V2{{7998000}}));
    EXPECT_EQ(x.sum_keepdim(0).sum_keepdim(1).to_vec2<uint32_t>(), (V2{{7998000}}));
    EXPECT_EQ(x.sum_keepdim(1).sum_keepdim(0).to_vec2<uint32_t>(), (V2{{7998000}}));
    EXPECT_EQ(x.sum_keepdim(0).to_vec2<uint32_t>(), (V2{{3998000, 4000000}}));
  }
}

TEST(ReduceSum, Candle200x5x4) {
  for (const Tensor& t : u32_200_5_4(0)) {
    EXPECT_EQ(t.sum_keepdim(std::vector<int64_t>{0, 1, 2}).to_vec3<uint32_t>(), (V3{{{7998000}}}));
    EXPECT_EQ(t.sum_keepdim(0).sum_keepdim(2).sum_keepdim(1).to_vec3<uint32_t>(), (V3{{{7998000}}}));
    EXPECT_EQ(t.sum_keepdim(0).sum_keepdim(std::vector<int64_t>{1, 2}).to_vec3<uint32_t>(),
              (V3{{{7998000}}}));
    EXPECT_EQ(t.sum_keepdim(1).sum_keepdim(std::vector<int64_t>{0, 2}).to_vec3<uint32_t>(),
              (V3{{{7998000}}}));
    EXPECT_EQ(t.sum_keepdim(0).to_vec3<uint32_t>(), (V3{{{398000, 398200, 398400, 398600},
                                                         {398800, 399000, 399200, 399400},
                                                         {399600, 399800, 400000, 400200},
                                                         {400400, 400600, 400800, 401000},
                                                         {401200, 401400, 401600, 401800}}}));
  }
}

TEST(ReduceSum, CandleIntegerAndExactness) {
  EXPECT_EQ(Tensor::new_({{uint8_t(1), uint8_t(2), uint8_t(3)}, {uint8_t(4), uint8_t(5), uint8_t(6)}}, cpu())
                .sum_keepdim(1)
                .to_vec2<uint8_t>(),
            (std::vector<std::vector<uint8_t>>{{6}, {15}}));
  EXPECT_EQ(Tensor::new_({{int64_t(1), int64_t(2), int64_t(3)}, {int64_t(4), int64_t(5), int64_t(6)}}, cpu())
                .sum_keepdim(1)
                .to_vec2<int64_t>(),
            (std::vector<std::vector<int64_t>>{{6}, {15}}));
  std::vector<uint32_t> u{16777217u};
  u.insert(u.end(), 32, 1u);
  EXPECT_EQ(Tensor::from_vec(u, {33}, cpu()).sum_keepdim(0).to_vec1<uint32_t>(),
            std::vector<uint32_t>{16777249u});
  std::vector<double> d{16777217.0};
  d.insert(d.end(), 32, 1.0);
  EXPECT_EQ(Tensor::from_vec(d, {33}, cpu()).sum_keepdim(0).to_vec1<double>(),
            std::vector<double>{16777249.0});
}

TEST(ReduceSum, CandleEmptyDimGivesZero) {
  Tensor t = Tensor::from_vec(std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}, {4, 2}, cpu());
  Tensor empty = view(t, t.layout().narrow(1, 0, 0));
  Tensor s = empty.sum(1);
  EXPECT_EQ(s.shape(), Shape({4}));
  EXPECT_EQ(s.to_vec1<float>(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(empty.sum_all().to_scalar<float>(), 0.0f);
}

TEST(ReduceMinMax, CandleMin) {
  Tensor t = candle_u32_3d();
  EXPECT_EQ(t.min_keepdim(2).to_vec3<uint32_t>(), (V3{{{1}, {1}}, {{1}, {2}}}));
  EXPECT_EQ(t.min_keepdim(0).to_vec3<uint32_t>(), (V3{{{2, 1, 4}, {1, 2, 8}}}));
  std::vector<uint32_t> data(3800);
  for (uint32_t i = 0; i < 3800; ++i) data[i] = 200 + i;
  EXPECT_EQ(Tensor::from_vec(data, {3800}, cpu()).min_keepdim(0).to_vec1<uint32_t>(),
            std::vector<uint32_t>{200});
  Tensor m = Tensor::from_vec(data, {1900, 2}, cpu());
  EXPECT_EQ(m.min_keepdim(0).min_keepdim(1).to_vec2<uint32_t>(), (V2{{200}}));
  EXPECT_EQ(m.min_keepdim(1).min_keepdim(0).to_vec2<uint32_t>(), (V2{{200}}));
  EXPECT_EQ(m.min_keepdim(0).to_vec2<uint32_t>(), (V2{{200, 201}}));
  for (const Tensor& x : u32_200_5_4(200)) {
    Tensor x190 = view(x, x.layout().narrow(0, 0, 190));
    EXPECT_EQ(x190.min_keepdim(0).min_keepdim(2).min_keepdim(1).to_vec3<uint32_t>(), (V3{{{200}}}));
    EXPECT_EQ(x190.min_keepdim(0).to_vec3<uint32_t>(), (V3{{{200, 201, 202, 203},
                                                            {204, 205, 206, 207},
                                                            {208, 209, 210, 211},
                                                            {212, 213, 214, 215},
                                                            {216, 217, 218, 219}}}));
  }
}

TEST(ReduceMinMax, CandleMax) {
  Tensor t = candle_u32_3d();
  EXPECT_EQ(t.max_keepdim(2).to_vec3<uint32_t>(), (V3{{{4}, {9}}, {{7}, {8}}}));
  EXPECT_EQ(t.max_keepdim(0).to_vec3<uint32_t>(), (V3{{{3, 1, 7}, {8, 5, 9}}}));
  std::vector<uint32_t> data(3800);
  for (uint32_t i = 0; i < 3800; ++i) data[i] = 200 + i;
  EXPECT_EQ(Tensor::from_vec(data, {3800}, cpu()).max_keepdim(0).to_vec1<uint32_t>(),
            std::vector<uint32_t>{3999});
  Tensor m = Tensor::from_vec(data, {1900, 2}, cpu());
  EXPECT_EQ(m.max_keepdim(0).max_keepdim(1).to_vec2<uint32_t>(), (V2{{3999}}));
  EXPECT_EQ(m.max_keepdim(0).to_vec2<uint32_t>(), (V2{{3998, 3999}}));
  // candle's (190, 5, 4) of 200..4000, plain and stored transposed
  for (const Tensor& x : u32_200_5_4(200)) {
    Tensor x190 = view(x, x.layout().narrow(0, 0, 190));
    EXPECT_EQ(x190.max_keepdim(0).max_keepdim(2).max_keepdim(1).to_vec3<uint32_t>(), (V3{{{3999}}}));
    EXPECT_EQ(x190.max_keepdim(0).to_vec3<uint32_t>(), (V3{{{3980, 3981, 3982, 3983},
                                                            {3984, 3985, 3986, 3987},
                                                            {3988, 3989, 3990, 3991},
                                                            {3992, 3993, 3994, 3995},
                                                            {3996, 3997, 3998, 3999}}}));
  }
}

TEST(ReduceArg, CandleArgmin) {
  Tensor t = candle_u32_3d();
  EXPECT_EQ(t.argmin_keepdim(2).to_vec3<uint32_t>(), (V3{{{1}, {0}}, {{1}, {1}}}));
  EXPECT_EQ(t.argmin_keepdim(0).to_vec3<uint32_t>(), (V3{{{1, 0, 0}, {0, 1, 1}}}));
  std::vector<uint32_t> data(3800);
  for (uint32_t i = 0; i < 3800; ++i) data[i] = 200 + i;
  EXPECT_EQ(Tensor::from_vec(data, {3800}, cpu()).argmin_keepdim(0).to_vec1<uint32_t>(),
            std::vector<uint32_t>{0});
  Tensor m = Tensor::from_vec(data, {1900, 2}, cpu());
  EXPECT_EQ(m.argmin_keepdim(0).to_vec2<uint32_t>(), (V2{{0, 0}}));
  EXPECT_EQ(m.argmin_keepdim(1).argmin_keepdim(0).to_vec2<uint32_t>(), (V2{{0}}));
  for (const Tensor& x : u32_200_5_4(200)) {
    Tensor x190 = view(x, x.layout().narrow(0, 0, 190));
    EXPECT_EQ(x190.argmin_keepdim(0).to_vec3<uint32_t>(), (V3(1, V2(5, std::vector<uint32_t>(4, 0)))));
  }
}

TEST(ReduceArg, CandleArgmax) {
  Tensor t = candle_u32_3d();
  EXPECT_EQ(t.argmax_keepdim(2).to_vec3<uint32_t>(), (V3{{{2}, {2}}, {{2}, {0}}}));
  EXPECT_EQ(t.argmax_keepdim(0).to_vec3<uint32_t>(), (V3{{{0, 0, 1}, {1, 0, 0}}}));
  std::vector<uint32_t> data(3800);
  for (uint32_t i = 0; i < 3800; ++i) data[i] = 200 + i;
  EXPECT_EQ(Tensor::from_vec(data, {3800}, cpu()).argmax_keepdim(0).to_vec1<uint32_t>(),
            std::vector<uint32_t>{3799});
  Tensor m = Tensor::from_vec(data, {1900, 2}, cpu());
  EXPECT_EQ(m.argmax_keepdim(0).to_vec2<uint32_t>(), (V2{{1899, 1899}}));
  EXPECT_EQ(m.argmax_keepdim(0).argmax_keepdim(1).to_vec2<uint32_t>(), (V2{{0}}));
  for (const Tensor& x : u32_200_5_4(200)) {
    Tensor x190 = view(x, x.layout().narrow(0, 0, 190));
    EXPECT_EQ(x190.argmax_keepdim(0).to_vec3<uint32_t>(), (V3(1, V2(5, std::vector<uint32_t>(4, 189)))));
  }
}

TEST(ReduceVar, CandleValues) {
  // candle's values (from PyTorch's torch.var docs), rounded to 4 decimals there
  Tensor t = Tensor::new_({{0.2035f, 1.2959f, 1.8101f, -0.4644f},
                           {1.5027f, -0.3270f, 0.5905f, 0.6538f},
                           {-1.5745f, 1.3330f, -0.5596f, -0.6548f},
                           {0.1264f, -0.5080f, 1.6420f, 0.1992f}},
                          cpu());
  Tensor v = t.var_keepdim(1);
  EXPECT_EQ(v.shape(), Shape({4, 1}));
  test_util::expect_near_vec(v.flatten_to_vec<float>(), {1.0631f, 0.559f, 1.4893f, 0.8258f}, 1e-4f);
  EXPECT_EQ(t.var(1).shape(), Shape({4}));
  EXPECT_EQ(t.var(-2).shape(), Shape({4}));
}

TEST(ReduceVar, SingleElementIsNaN) {
  Tensor t = Tensor::from_vec(std::vector<double>{3.0, 4.0}, {2, 1}, cpu());
  auto v = t.var(1).to_vec1<double>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_DOUBLE_EQ(t.var(0).to_vec1<double>()[0], 0.5);
}

TEST(ReduceLogSumExp, CandleValues) {
  Tensor input = Tensor::new_(
      {{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, {{-1000.0, -999.0, -1001.0}, {1000.0, 999.0, 1001.0}}}, cpu());
  Tensor out = input.log_sum_exp(-1);
  EXPECT_EQ(out.shape(), Shape({2, 2}));
  auto got = out.flatten_to_vec<double>();
  std::vector<double> want{3.4076, 6.4076, -998.5924, 1001.4076};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  EXPECT_EQ(input.log_sum_exp(std::vector<int64_t>{0, 1}).to_vec1<double>(),
            (std::vector<double>{1000.0, 999.0, 1001.0}));
  EXPECT_EQ(input.log_sum_exp(std::vector<int64_t>{}).to_vec3<double>(), input.to_vec3<double>());
}

TEST(ReduceLogSumExp, InfinitiesAndF32) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::new_({{-inf, -inf}, {inf, 1.0f}, {88.0f, 88.0f}}, cpu());
  auto v = t.log_sum_exp(1).to_vec1<float>();
  EXPECT_EQ(v[0], -inf);
  EXPECT_EQ(v[1], inf);
  EXPECT_NEAR(v[2], 88.0f + std::log(2.0f), 1e-5f);  // exp(88) * 2 overflows f32 without the shift
}

TEST(ReduceCumsum, CandleValues) {
  Tensor t = Tensor::new_({3.f, 1.f, 4.f, 1.f, 5.f}, cpu());
  EXPECT_EQ(t.cumsum(0).to_vec1<float>(), (std::vector<float>{3, 4, 8, 9, 14}));
  Tensor col = Tensor::from_vec(std::vector<float>{3, 1, 4, 1, 5}, {5, 1}, cpu());
  EXPECT_EQ(col.cumsum(0).to_vec2<float>(), (std::vector<std::vector<float>>{{3}, {4}, {8}, {9}, {14}}));
  EXPECT_EQ(col.cumsum(1).to_vec2<float>(), (std::vector<std::vector<float>>{{3}, {1}, {4}, {1}, {5}}));
  Tensor m = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, cpu());
  EXPECT_EQ(m.cumsum(1).to_vec2<float>(),
            (std::vector<std::vector<float>>{{3, 4, 8, 9, 14}, {2, 3, 10, 18, 20}}));
  EXPECT_EQ(m.cumsum(0).to_vec2<float>(),
            (std::vector<std::vector<float>>{{3, 1, 4, 1, 5}, {5, 2, 11, 9, 7}}));
  EXPECT_EQ(m.cumsum(-1).to_vec2<float>(), m.cumsum(1).to_vec2<float>());
}

TEST(ReduceCumsum, IntegersWrapAndStridedInput) {
  Tensor u = Tensor::new_({uint8_t(200), uint8_t(50), uint8_t(10)}, cpu());
  EXPECT_EQ(u.cumsum(0).to_vec1<uint8_t>(), (std::vector<uint8_t>{200, 250, 4}));
  Tensor m = Tensor::new_({{1, 2, 3}, {4, 5, 6}}, cpu()).to_dtype(DType::I64);
  Tensor mt = view(m, m.layout().transpose(0, 1));  // [[1, 4], [2, 5], [3, 6]]
  EXPECT_EQ(mt.cumsum(0).to_vec2<int64_t>(), (std::vector<std::vector<int64_t>>{{1, 4}, {3, 9}, {6, 15}}));
  EXPECT_EQ(mt.cumsum(1).to_vec2<int64_t>(), (std::vector<std::vector<int64_t>>{{1, 5}, {2, 7}, {3, 9}}));
}

TEST(ReduceSort, CandleAsort) {
  Tensor t = Tensor::new_({{3.f, 1.f, 4.f, 1.1f, 5.f}, {2.1f, 1.f, 7.f, 8.f, 2.f}}, cpu());
  EXPECT_EQ(t.arg_sort_last_dim(true).to_vec2<uint32_t>(), (V2{{1, 3, 0, 2, 4}, {1, 4, 0, 2, 3}}));
  EXPECT_EQ(t.arg_sort_last_dim(false).to_vec2<uint32_t>(), (V2{{4, 2, 0, 3, 1}, {3, 2, 0, 4, 1}}));
  auto [sorted, ids] = t.sort_last_dim(true);
  EXPECT_EQ(ids.to_vec2<uint32_t>(), (V2{{1, 3, 0, 2, 4}, {1, 4, 0, 2, 3}}));
  EXPECT_EQ(sorted.to_vec2<float>(), (std::vector<std::vector<float>>{{1.0f, 1.1f, 3.0f, 4.0f, 5.0f},
                                                                      {1.0f, 2.0f, 2.1f, 7.0f, 8.0f}}));
  auto [sorted_d, ids_d] = t.sort_last_dim(false);
  EXPECT_EQ(ids_d.to_vec2<uint32_t>(), (V2{{4, 2, 0, 3, 1}, {3, 2, 0, 4, 1}}));
  EXPECT_EQ(sorted_d.to_vec2<float>(), (std::vector<std::vector<float>>{{5.0f, 4.0f, 3.0f, 1.1f, 1.0f},
                                                                        {8.0f, 7.0f, 2.1f, 2.0f, 1.0f}}));
}

TEST(ReduceSort, CandleOffsetView) {
  Tensor base = Tensor::new_({{1.f, 2.f, 3.f}, {30.f, 10.f, 20.f}}, cpu());
  Tensor v = view(base, base.layout().narrow(0, 1, 1));
  auto [s, i] = v.sort_last_dim(true);
  EXPECT_EQ(i.to_vec2<uint32_t>(), (V2{{1, 2, 0}}));
  EXPECT_EQ(s.to_vec2<float>(), (std::vector<std::vector<float>>{{10, 20, 30}}));
  auto [sd, id] = v.sort_last_dim(false);
  EXPECT_EQ(id.to_vec2<uint32_t>(), (V2{{0, 2, 1}}));
  EXPECT_EQ(sd.to_vec2<float>(), (std::vector<std::vector<float>>{{30, 20, 10}}));
}

TEST(ReduceSort, CandleBig) {
  const uint32_t n = 2000;
  std::vector<float> data(n);
  for (uint32_t x = 0; x < n; ++x) data[x] = static_cast<float>(n - x);
  Tensor t = Tensor::from_vec(data, {n}, cpu());
  std::vector<uint32_t> asc(n), desc(n);
  for (uint32_t x = 0; x < n; ++x) {
    asc[x] = n - 1 - x;
    desc[x] = x;
  }
  EXPECT_EQ(t.arg_sort_last_dim(true).to_vec1<uint32_t>(), asc);
  EXPECT_EQ(t.arg_sort_last_dim(false).to_vec1<uint32_t>(), desc);
}

TEST(ReduceSort, StableTiesAndNaN) {
  Tensor t = Tensor::new_({2.f, 1.f, 2.f, 1.f}, cpu());
  EXPECT_EQ(t.arg_sort_last_dim(true).to_vec1<uint32_t>(), (std::vector<uint32_t>{1, 3, 0, 2}));
  EXPECT_EQ(t.arg_sort_last_dim(false).to_vec1<uint32_t>(), (std::vector<uint32_t>{0, 2, 1, 3}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::new_({3.f, nan, -1.f, 2.f}, cpu());
  EXPECT_EQ(n.arg_sort_last_dim(true).to_vec1<uint32_t>(), (std::vector<uint32_t>{2, 3, 0, 1}));
  EXPECT_EQ(n.arg_sort_last_dim(false).to_vec1<uint32_t>(), (std::vector<uint32_t>{1, 0, 3, 2}));
}

TEST(ReduceSort, TransposedInputAndIntegers) {
  Tensor m = Tensor::new_({{5, 1}, {3, 4}, {4, 9}}, cpu()).to_dtype(DType::I64);  // [3, 2]
  Tensor mt = view(m, m.layout().transpose(0, 1));                                // [[5, 3, 4], [1, 4, 9]]
  auto [s, i] = mt.sort_last_dim(true);
  EXPECT_EQ(i.to_vec2<uint32_t>(), (V2{{1, 2, 0}, {0, 1, 2}}));
  EXPECT_EQ(s.to_vec2<int64_t>(), (std::vector<std::vector<int64_t>>{{3, 4, 5}, {1, 4, 9}}));
}

TEST(ReduceNorm, CandleValue) {
  Tensor t = Tensor::new_({{3.0, 4.0}, {0.0, 0.0}}, cpu());
  Tensor n = t.norm();
  EXPECT_EQ(n.rank(), 0u);
  EXPECT_EQ(n.to_scalar<double>(), 5.0);
  EXPECT_FLOAT_EQ(t.to_dtype(DType::F16).norm().to_dtype(DType::F32).to_scalar<float>(), 5.0f);
}

// ---- dtypes, keepdim, dims ---------------------------------------------------------------

TEST(ReduceDTypes, EveryDTypeSumMaxMinArg) {
  // [[3, 1, 4], [1, 5, 2]]: exact in every dtype
  Tensor base = Tensor::new_({{3.f, 1.f, 4.f}, {1.f, 5.f, 2.f}}, cpu());
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor t = base.to_dtype(dt);
    EXPECT_EQ(t.sum(1).dtype(), dt);
    EXPECT_EQ(f32(t.sum(1)), (std::vector<float>{8, 8}));
    EXPECT_EQ(f32(t.sum(0)), (std::vector<float>{4, 6, 6}));
    EXPECT_EQ(f32(t.sum_all()), (std::vector<float>{16}));
    EXPECT_EQ(f32(t.max(1)), (std::vector<float>{4, 5}));
    EXPECT_EQ(f32(t.min(0)), (std::vector<float>{1, 1, 2}));
    EXPECT_EQ(f32(t.max_all()), (std::vector<float>{5}));
    EXPECT_EQ(f32(t.min_all()), (std::vector<float>{1}));
    EXPECT_EQ(t.argmax(1).dtype(), DType::U32);
    EXPECT_EQ(t.argmax(1).to_vec1<uint32_t>(), (std::vector<uint32_t>{2, 1}));
    EXPECT_EQ(t.argmin(0).to_vec1<uint32_t>(), (std::vector<uint32_t>{1, 0, 1}));
    EXPECT_EQ(f32(t.cumsum(1)), (std::vector<float>{3, 4, 8, 1, 6, 8}));
    EXPECT_EQ(t.sort_last_dim(true).second.to_vec2<uint32_t>(), (V2{{1, 0, 2}, {0, 2, 1}}));
    EXPECT_EQ(f32(t.sort_last_dim(false).first), (std::vector<float>{4, 3, 1, 5, 2, 1}));
  }
}

TEST(ReduceDTypes, EveryDTypeMean) {
  // row means 3 and 5; column means 2.5, 3, 6.5 (integers truncate toward zero: 2, 6)
  Tensor base = Tensor::new_({{3.f, 1.f, 5.f}, {2.f, 5.f, 8.f}}, cpu());
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor t = base.to_dtype(dt);
    EXPECT_EQ(t.mean(1).dtype(), dt);
    bool is_int = dtype_is_int(dt);
    EXPECT_EQ(f32(t.mean(1)), (std::vector<float>{3, 5}));
    EXPECT_EQ(f32(t.mean(0)), (std::vector<float>{is_int ? 2.f : 2.5f, 3, is_int ? 6.f : 6.5f}));
    EXPECT_EQ(f32(t.mean_all()), (std::vector<float>{4}));
  }
}

TEST(ReduceDTypes, FloatOnlyOpsOnEveryFloatDType) {
  Tensor base = Tensor::new_({{1.f, 2.f, 3.f, 4.f}, {2.f, 2.f, 2.f, 2.f}}, cpu());
  for (DType dt : {DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8E4M3}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor t = base.to_dtype(dt);
    // var of 1..4 = 5/3; f8e4m3 rounds it to 1.625, bf16 to 1.6640625
    test_util::expect_near_vec(f32(t.var(1)), {5.0f / 3.0f, 0.0f}, dt == DType::F8E4M3 ? 0.05f : 0.01f);
    test_util::expect_near_vec(f32(t.log_sum_exp(1)), {4.4401897f, 2.0f + std::log(4.0f)},
                               dt == DType::F8E4M3 ? 0.3f : 0.02f);
    test_util::expect_near_vec(f32(t.norm()), {std::sqrt(46.0f)}, dt == DType::F8E4M3 ? 0.3f : 0.02f);
  }
}

TEST(ReduceShapes, KeepdimAndSqueeze) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::F32, cpu());
  EXPECT_EQ(t.sum_keepdim(1).shape(), Shape({2, 1, 4}));
  EXPECT_EQ(t.sum(1).shape(), Shape({2, 4}));
  EXPECT_EQ(t.sum_keepdim(std::vector<int64_t>{0, 2}).shape(), Shape({1, 3, 1}));
  EXPECT_EQ(t.sum(std::vector<int64_t>{0, 2}).shape(), Shape({3}));
  EXPECT_EQ(t.mean_keepdim(-1).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(t.mean(std::vector<int64_t>{-1, -3}).shape(), Shape({3}));
  EXPECT_EQ(t.max_keepdim(0).shape(), Shape({1, 3, 4}));
  EXPECT_EQ(t.min(-2).shape(), Shape({2, 4}));
  EXPECT_EQ(t.argmax_keepdim(2).shape(), Shape({2, 3, 1}));
  EXPECT_EQ(t.argmin(0).shape(), Shape({3, 4}));
  EXPECT_EQ(t.var_keepdim(1).shape(), Shape({2, 1, 4}));
  EXPECT_EQ(t.log_sum_exp(std::vector<int64_t>{1, 2}).shape(), Shape({2}));
  EXPECT_EQ(t.sum_all().shape(), Shape({}));
  EXPECT_EQ(t.mean_all().shape(), Shape({}));
  EXPECT_EQ(t.max_all().shape(), Shape({}));
  EXPECT_EQ(t.min_all().shape(), Shape({}));
  EXPECT_EQ(t.cumsum(1).shape(), Shape({2, 3, 4}));
  EXPECT_EQ(t.sum_keepdim(std::vector<int64_t>{}).shape(), Shape({2, 3, 4}));
}

TEST(ReduceShapes, SeveralAndNegativeDims) {
  std::vector<float> v(24);
  for (size_t i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::from_vec(v, {2, 3, 4}, cpu());
  // sum over dims 0 and 2: for each j, sum_i sum_k (12 i + 4 j + k) = 2 * 4 * 4j + 4 * 12 + 2 * 6
  EXPECT_EQ(t.sum(std::vector<int64_t>{-1, 0}).to_vec1<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(t.sum(std::vector<int64_t>{2, 0, -1}).to_vec1<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(t.sum(std::vector<int64_t>{0, 1}).to_vec1<float>(), (std::vector<float>{60, 66, 72, 78}));
  EXPECT_EQ(t.mean(std::vector<int64_t>{1, 2}).to_vec1<float>(), (std::vector<float>{5.5f, 17.5f}));
  EXPECT_EQ(t.max(-3).to_vec2<float>()[2], (std::vector<float>{20, 21, 22, 23}));
  EXPECT_EQ(t.argmin(-2).to_vec2<uint32_t>(), (V2{{0, 0, 0, 0}, {0, 0, 0, 0}}));
  EXPECT_EQ(t.sum_all().to_scalar<float>(), 276.0f);
}

TEST(ReduceShapes, RankZero) {
  Tensor s = Tensor::new_(7.5f, cpu());
  EXPECT_EQ(s.sum_all().to_scalar<float>(), 7.5f);
  EXPECT_EQ(s.max_all().to_scalar<float>(), 7.5f);
  EXPECT_EQ(s.mean_all().to_scalar<float>(), 7.5f);
  EXPECT_EQ(s.norm().to_scalar<float>(), 7.5f);
}

// ---- semantics -----------------------------------------------------------------------------

TEST(ReduceSemantics, IntegerSumsWrap) {
  EXPECT_EQ(Tensor::new_({uint8_t(200), uint8_t(100)}, cpu()).sum_all().to_scalar<uint8_t>(), 44);
  EXPECT_EQ(Tensor::new_({std::numeric_limits<int32_t>::max(), 1}, cpu()).sum_all().to_scalar<int32_t>(),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Tensor::new_({int64_t(-5), int64_t(3)}, cpu()).sum_all().to_scalar<int64_t>(), -2);
}

TEST(ReduceSemantics, HalfSumsAccumulateInF32) {
  // in f16 arithmetic 2048 + 1 == 2048, so a naive f16 sum of 3000 ones stops at 2048
  Tensor ones = Tensor::ones({3000}, DType::F16, cpu());
  EXPECT_EQ(ones.sum_all().to_dtype(DType::F32).to_scalar<float>(), 3000.0f);
  Tensor col = Tensor::ones({3000, 16}, DType::BF16, cpu());    // column walk; bf16 spacing is 16 at 3000
  EXPECT_EQ(f32(col.sum(0)), std::vector<float>(16, 3008.0f));  // 3000 rounded once to bf16
}

TEST(ReduceSemantics, F32SumsAreAccurate) {
  // 1e6 x 0.1f: a sequential f32 sum drifts by ~1%; the exact sum is 100000.00149
  Tensor t = Tensor::full(0.1f, {1000000}, cpu());
  EXPECT_NEAR(t.sum_all().to_scalar<float>(), 100000.0f, 0.01f);
  Tensor m = Tensor::full(0.1f, {100000, 10}, cpu());
  for (float v : m.sum(0).to_vec1<float>()) EXPECT_NEAR(v, 10000.0f, 0.001f);
  EXPECT_NEAR(m.mean_all().to_scalar<float>(), 0.1f, 1e-7f);
}

TEST(ReduceSemantics, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(100, 1.0f);
  v[37] = nan;
  v[60] = 5.0f;
  Tensor t = Tensor::from_vec(v, {100}, cpu());
  EXPECT_TRUE(std::isnan(t.max_all().to_scalar<float>()));
  EXPECT_TRUE(std::isnan(t.min_all().to_scalar<float>()));
  EXPECT_EQ(t.argmax(0).to_scalar<uint32_t>(), 37u);
  EXPECT_EQ(t.argmin(0).to_scalar<uint32_t>(), 37u);
  // column walk: NaN in one column only
  std::vector<float> mv(640, 2.0f);
  mv[5 * 10 + 3] = nan;
  mv[9 * 10 + 3] = nan;
  mv[7 * 10 + 4] = 9.0f;
  Tensor m = Tensor::from_vec(mv, {64, 10}, cpu());
  auto mx = m.max(0).to_vec1<float>();
  EXPECT_TRUE(std::isnan(mx[3]));
  EXPECT_EQ(mx[4], 9.0f);
  EXPECT_EQ(mx[0], 2.0f);
  auto am = m.argmax(0).to_vec1<uint32_t>();
  EXPECT_EQ(am[3], 5u);
  EXPECT_EQ(am[4], 7u);
  EXPECT_EQ(am[0], 0u);
}

TEST(ReduceSemantics, ArgTiesGiveFirstOccurrence) {
  Tensor t = Tensor::new_({{1.f, 7.f, 7.f, 0.f, 0.f}}, cpu());
  EXPECT_EQ(t.argmax(1).to_vec1<uint32_t>(), std::vector<uint32_t>{1});
  EXPECT_EQ(t.argmin(1).to_vec1<uint32_t>(), std::vector<uint32_t>{3});
  Tensor c = Tensor::new_({{1}, {7}, {7}}, cpu());
  EXPECT_EQ(c.argmax(0).to_vec1<uint32_t>(), std::vector<uint32_t>{1});
}

// ---- layouts: strided inputs give the contiguous results -----------------------------------

namespace {
// Runs every op on `x` and on x.contiguous() and expects equal values (integer-valued data,
// so the results are exact whatever the summation order).
void expect_layout_independent(const Tensor& x) {
  Tensor c = x.contiguous();
  ASSERT_TRUE(c.is_contiguous());
  const int64_t r = static_cast<int64_t>(x.rank());
  for (int64_t d = 0; d < r; ++d) {
    SCOPED_TRACE("dim " + std::to_string(d));
    EXPECT_EQ(f32(x.sum(d)), f32(c.sum(d)));
    EXPECT_EQ(f32(x.mean_keepdim(d)), f32(c.mean_keepdim(d)));
    EXPECT_EQ(f32(x.max(d)), f32(c.max(d)));
    EXPECT_EQ(f32(x.min(d)), f32(c.min(d)));
    EXPECT_EQ(x.argmax(d).flatten_to_vec<uint32_t>(), c.argmax(d).flatten_to_vec<uint32_t>());
    EXPECT_EQ(x.argmin(d).flatten_to_vec<uint32_t>(), c.argmin(d).flatten_to_vec<uint32_t>());
    EXPECT_EQ(f32(x.cumsum(d)), f32(c.cumsum(d)));
    test_util::expect_near_vec(f32(x.var(d)), f32(c.var(d)), 1e-5f);
    test_util::expect_near_vec(f32(x.log_sum_exp(d)), f32(c.log_sum_exp(d)), 1e-5f);
  }
  if (r >= 2) {
    EXPECT_EQ(f32(x.sum(std::vector<int64_t>{0, r - 1})), f32(c.sum(std::vector<int64_t>{0, r - 1})));
    test_util::expect_near_vec(f32(x.log_sum_exp(std::vector<int64_t>{0, r - 1})),
                               f32(c.log_sum_exp(std::vector<int64_t>{0, r - 1})), 1e-5f);
  }
  EXPECT_EQ(f32(x.sum_all()), f32(c.sum_all()));
  EXPECT_EQ(f32(x.max_all()), f32(c.max_all()));
  EXPECT_EQ(f32(x.min_all()), f32(c.min_all()));
  test_util::expect_near_vec(f32(x.norm()), f32(c.norm()), 1e-4f);
  auto [xs, xi] = x.sort_last_dim(true);
  auto [cs, ci] = c.sort_last_dim(true);
  EXPECT_EQ(xi.flatten_to_vec<uint32_t>(), ci.flatten_to_vec<uint32_t>());
  EXPECT_EQ(f32(xs), f32(cs));
}
}  // namespace

TEST(ReduceLayouts, Transposed) {
  Tensor t = Tensor::from_vec(small_ints(12 * 37, 1), {12, 37}, cpu());
  expect_layout_independent(test_util::transposed_copy_view(t));
  expect_layout_independent(view(t, t.layout().transpose(0, 1)));
}

TEST(ReduceLayouts, Offset) {
  Tensor t = Tensor::from_vec(small_ints(5 * 6 * 7, 2), {5, 6, 7}, cpu());
  expect_layout_independent(test_util::offset_view(t, 3));
  expect_layout_independent(view(t, t.layout().narrow(2, 1, 5)));
}

TEST(ReduceLayouts, Broadcast) {
  Tensor row = Tensor::from_vec(small_ints(40, 3), {1, 40}, cpu());
  expect_layout_independent(view(row, row.layout().broadcast_as({9, 40})));
  Tensor col = Tensor::from_vec(small_ints(9, 4), {9, 1}, cpu());
  expect_layout_independent(view(col, col.layout().broadcast_as({9, 40})));
  Tensor s = Tensor::from_vec(small_ints(3, 5), {3, 1, 1}, cpu());
  expect_layout_independent(view(s, s.layout().broadcast_as({3, 4, 20})));
}

TEST(ReduceLayouts, Permuted3D) {
  Tensor t = Tensor::from_vec(small_ints(4 * 5 * 6, 6), {4, 5, 6}, cpu());
  expect_layout_independent(view(t, t.layout().permute({2, 0, 1})));
  expect_layout_independent(view(t, t.layout().permute({1, 2, 0})));
}

TEST(ReduceLayouts, IntegerDTypes) {
  Tensor t = Tensor::from_vec(small_ints(16 * 9, 7), {16, 9}, cpu());
  for (DType dt : {DType::U8, DType::I16, DType::I64, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = t.to_dtype(dt);
    Tensor tv = view(x, x.layout().transpose(0, 1));
    Tensor c = tv.contiguous();
    for (int64_t d = 0; d < 2; ++d) {
      EXPECT_EQ(f32(tv.sum(d)), f32(c.sum(d)));
      EXPECT_EQ(f32(tv.max(d)), f32(c.max(d)));
      EXPECT_EQ(tv.argmin(d).flatten_to_vec<uint32_t>(), c.argmin(d).flatten_to_vec<uint32_t>());
      EXPECT_EQ(f32(tv.cumsum(d)), f32(c.cumsum(d)));
    }
  }
}

// ---- big inputs against plain loops ----------------------------------------------------------

namespace {
struct Ref2D {
  std::vector<float> v;
  size_t rows, cols;
  float at(size_t i, size_t j) const { return v[i * cols + j]; }
};
}  // namespace

TEST(ReduceBig, RowAndColumnWalksMatchLoops) {
  // shapes that take the row walk, the column walk, and both with split reduction blocks
  const std::vector<std::pair<size_t, size_t>> shapes{
      {300, 257}, {1000, 40}, {3, 70000}, {70000, 3}, {40000, 9}};
  for (auto [rows, cols] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Ref2D r{lcg_values(rows * cols, static_cast<uint32_t>(rows + cols)), rows, cols};
    Tensor t = Tensor::from_vec(r.v, {rows, cols}, cpu());
    std::vector<double> s0(cols, 0.0), s1(rows, 0.0);
    std::vector<float> mx0(cols, -2.f), mn1(rows, 2.f);
    std::vector<uint32_t> amx0(cols, 0), amn1(rows, 0);
    double all = 0;
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) {
        float x = r.at(i, j);
        s0[j] += x;
        s1[i] += x;
        all += x;
        if (x > mx0[j]) {
          mx0[j] = x;
          amx0[j] = static_cast<uint32_t>(i);
        }
        if (x < mn1[i]) {
          mn1[i] = x;
          amn1[i] = static_cast<uint32_t>(j);
        }
      }
    auto g0 = t.sum(0).to_vec1<float>();
    for (size_t j = 0; j < cols; ++j) ASSERT_NEAR(g0[j], s0[j], 1e-4 * (1 + std::abs(s0[j]))) << j;
    auto g1 = t.sum(1).to_vec1<float>();
    for (size_t i = 0; i < rows; ++i) ASSERT_NEAR(g1[i], s1[i], 1e-4 * (1 + std::abs(s1[i]))) << i;
    EXPECT_NEAR(t.sum_all().to_scalar<float>(), all, 1e-3 * (1 + std::abs(all)));
    EXPECT_EQ(t.max(0).to_vec1<float>(), mx0);
    EXPECT_EQ(t.min(1).to_vec1<float>(), mn1);
    EXPECT_EQ(t.argmax(0).to_vec1<uint32_t>(), amx0);
    EXPECT_EQ(t.argmin(1).to_vec1<uint32_t>(), amn1);
    auto m0 = t.mean(0).to_vec1<float>();
    for (size_t j = 0; j < cols; ++j) ASSERT_NEAR(m0[j], s0[j] / rows, 1e-6) << j;
    // f64 and i32 take the same walks with other kernels
    Tensor d = t.to_dtype(DType::F64);
    auto gd = d.sum(0).to_vec1<double>();
    for (size_t j = 0; j < cols; ++j) ASSERT_NEAR(gd[j], s0[j], 1e-9 * (1 + std::abs(s0[j]))) << j;
    EXPECT_EQ(d.argmin(1).to_vec1<uint32_t>(), amn1);
  }
}

TEST(ReduceBig, IntegerSumOverManyRows) {
  // exact: sum over dim 0 of i in [0, 70000) for each of 20 columns (column walk with row blocks)
  const size_t rows = 70000, cols = 20;
  std::vector<int32_t> v(rows * cols);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) v[i * cols + j] = static_cast<int32_t>(i + j);
  Tensor t = Tensor::from_vec(v, {rows, cols}, cpu()).to_dtype(DType::I64);
  auto s = t.sum(0).to_vec1<int64_t>();
  for (size_t j = 0; j < cols; ++j) EXPECT_EQ(s[j], int64_t(rows) * (rows - 1) / 2 + int64_t(rows) * j);
  EXPECT_EQ(t.argmax(0).to_vec1<uint32_t>(), std::vector<uint32_t>(cols, rows - 1));
}

TEST(ReduceBig, CumsumAndSortMatchLoops) {
  const size_t rows = 70, cols = 1000;
  std::vector<float> v = small_ints(rows * cols, 11);
  Tensor t = Tensor::from_vec(v, {rows, cols}, cpu());
  auto c1 = t.cumsum(1).flatten_to_vec<float>();
  auto c0 = t.cumsum(0).flatten_to_vec<float>();
  for (size_t i = 0; i < rows; ++i) {
    float acc = 0;
    for (size_t j = 0; j < cols; ++j) {
      acc += v[i * cols + j];
      ASSERT_EQ(c1[i * cols + j], acc);
    }
  }
  for (size_t j = 0; j < cols; ++j) {
    float acc = 0;
    for (size_t i = 0; i < rows; ++i) {
      acc += v[i * cols + j];
      ASSERT_EQ(c0[i * cols + j], acc);
    }
  }
  auto [s, ids] = t.sort_last_dim(true);
  auto sv = s.flatten_to_vec<float>();
  auto iv = ids.flatten_to_vec<uint32_t>();
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      ASSERT_EQ(sv[i * cols + j], v[i * cols + iv[i * cols + j]]);
      if (j > 0) {
        ASSERT_LE(sv[i * cols + j - 1], sv[i * cols + j]);
        if (sv[i * cols + j - 1] == sv[i * cols + j]) {
          ASSERT_LT(iv[i * cols + j - 1], iv[i * cols + j]);  // stable
        }
      }
    }
  }
}

// ---- determinism across thread counts ----------------------------------------------------------

TEST(ReduceThreads, ByteIdenticalFor1To3Threads) {
  Tensor m = Tensor::from_vec(lcg_values(512 * 300, 99), {512, 300}, cpu());
  Tensor v = Tensor::from_vec(lcg_values(1 << 18, 7), {1 << 18}, cpu());
  Tensor tall = Tensor::from_vec(lcg_values(60000 * 12, 5), {60000, 12}, cpu());
  Tensor mt = view(m, m.layout().transpose(0, 1));
  auto run_all = [&]() {
    std::vector<std::vector<uint8_t>> out;
    for (const Tensor& x : {m, mt, tall}) {
      out.push_back(bytes_of<float>(x.sum(0)));
      out.push_back(bytes_of<float>(x.sum(1)));
      out.push_back(bytes_of<float>(x.mean(0)));
      out.push_back(bytes_of<float>(x.max(0)));
      out.push_back(bytes_of<float>(x.min(1)));
      out.push_back(bytes_of<uint32_t>(x.argmax(0)));
      out.push_back(bytes_of<uint32_t>(x.argmin(1)));
      out.push_back(bytes_of<float>(x.cumsum(0)));
      out.push_back(bytes_of<float>(x.var(0)));
      out.push_back(bytes_of<float>(x.log_sum_exp(1)));
      out.push_back(bytes_of<float>(x.sum_all()));
      out.push_back(bytes_of<float>(x.norm()));
      out.push_back(bytes_of<uint32_t>(x.arg_sort_last_dim(true)));
      out.push_back(bytes_of<float>(x.to_dtype(DType::F16).sum(0).to_dtype(DType::F32)));
    }
    out.push_back(bytes_of<float>(v.sum_all()));
    out.push_back(bytes_of<float>(v.mean_all()));
    out.push_back(bytes_of<float>(v.max_all()));
    out.push_back(bytes_of<uint32_t>(v.argmax(0)));
    out.push_back(bytes_of<float>(v.cumsum(0)));
    return out;
  };
  set_num_threads(1);
  auto one = run_all();
  set_num_threads(2);
  auto two = run_all();
  set_num_threads(3);
  auto three = run_all();
  set_num_threads(0);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i], two[i]) << "result " << i;
    EXPECT_EQ(one[i], three[i]) << "result " << i;
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(ReduceErrors, DimOutOfRangeNamesTheOp) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32, cpu());
  expect_error(ErrorKind::DimOutOfRange, {"sum", "[2, 3]"}, [&] { t.sum(2); });
  expect_error(ErrorKind::DimOutOfRange, {"sum"}, [&] { t.sum_keepdim(std::vector<int64_t>{0, -3}); });
  expect_error(ErrorKind::DimOutOfRange, {"mean"}, [&] { t.mean(5); });
  expect_error(ErrorKind::DimOutOfRange, {"max"}, [&] { t.max(-3); });
  expect_error(ErrorKind::DimOutOfRange, {"min"}, [&] { t.min_keepdim(2); });
  expect_error(ErrorKind::DimOutOfRange, {"argmax"}, [&] { t.argmax(2); });
  expect_error(ErrorKind::DimOutOfRange, {"argmin"}, [&] { t.argmin_keepdim(-4); });
  expect_error(ErrorKind::DimOutOfRange, {"var"}, [&] { t.var(2); });
  expect_error(ErrorKind::DimOutOfRange, {"cumsum"}, [&] { t.cumsum(2); });
  expect_error(ErrorKind::DimOutOfRange, {"log_sum_exp"}, [&] { t.log_sum_exp(std::vector<int64_t>{3}); });
  Tensor s = Tensor::new_(1.0f, cpu());
  expect_error(ErrorKind::DimOutOfRange, {"arg_sort_last_dim"}, [&] { s.arg_sort_last_dim(true); });
  expect_error(ErrorKind::DimOutOfRange, {"sort_last_dim"}, [&] { s.sort_last_dim(true); });
}

TEST(ReduceErrors, EmptyDimForMaxMinArg) {
  Tensor t = Tensor::zeros({2, 0}, DType::F32, cpu());
  expect_error(ErrorKind::InvalidArgument, {"max", "[2, 0]"}, [&] { t.max(1); });
  expect_error(ErrorKind::InvalidArgument, {"min", "[2, 0]"}, [&] { t.min_keepdim(1); });
  expect_error(ErrorKind::InvalidArgument, {"argmax", "[2, 0]"}, [&] { t.argmax(1); });
  expect_error(ErrorKind::InvalidArgument, {"argmin", "[2, 0]"}, [&] { t.argmin(-1); });
  expect_error(ErrorKind::InvalidArgument, {"max_all", "[2, 0]"}, [&] { t.max_all(); });
  expect_error(ErrorKind::InvalidArgument, {"min_all"}, [&] { t.min_all(); });
  // sums over an empty dim are fine; max over a non-empty dim of an empty tensor errs too (as PyTorch)
  EXPECT_EQ(t.sum(1).to_vec1<float>(), (std::vector<float>{0, 0}));
  expect_error(ErrorKind::InvalidArgument, {"max"}, [&] { Tensor::zeros({0, 3}, DType::F32, cpu()).max(0); });
  EXPECT_EQ(Tensor::zeros({0, 3}, DType::F32, cpu()).max(1).shape(), Shape({0}));
}

TEST(ReduceErrors, FloatOnlyOpsRejectIntegers) {
  Tensor t = Tensor::zeros({2, 3}, DType::I64, cpu());
  expect_error(ErrorKind::UnsupportedOp, {"var", "i64"}, [&] { t.var(0); });
  expect_error(ErrorKind::UnsupportedOp, {"norm", "i64"}, [&] { t.norm(); });
  expect_error(ErrorKind::UnsupportedOp, {"log_sum_exp", "i64"}, [&] { t.log_sum_exp(1); });
}

TEST(ReduceErrors, BackendRejectsBadDims) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32, cpu());
  EXPECT_THROW(t.storage()->reduce(ReduceOp::ArgMax, t.layout(), {0, 1}), Error);
  EXPECT_THROW(t.storage()->reduce(ReduceOp::Sum, t.layout(), {2}), Error);
  EXPECT_THROW(t.storage()->reduce(ReduceOp::Sum, t.layout(), {1, 0}), Error);
  EXPECT_THROW(t.storage()->cumsum(t.layout(), 2), Error);
}
