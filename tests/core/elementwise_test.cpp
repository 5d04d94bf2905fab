// Elementwise ops: candle's tensor_tests.rs values, the f32 approximations against double
// precision, every dtype, strided layouts, errors and thread-count determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "cpu/vec_math.h"
#include "test_util.h"

using namespace candle;
using test_util::view;

namespace {

const Device& dev() {
  static Device d = Device::cpu();
  return d;
}

using Mat = std::vector<std::vector<float>>;

// candle's test_utils::to_vec*_round: each value (as f32) rounded to `digits` decimals in f32
// arithmetic; the results must equal the expected values as f32.
void expect_rounded(const Tensor& t, int digits, const std::vector<double>& want) {
  std::vector<float> v = t.to_dtype(DType::F32).flatten_to_vec<float>();
  float m = std::pow(10.0f, static_cast<float>(digits));
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(std::round(v[i] * m) / m, static_cast<float>(want[i])) << "at " << i;
}

// Deterministic pseudo-random values in [lo, hi).
std::vector<float> pseudo_random(size_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = static_cast<double>(s >> 11) / 9007199254740992.0;
    x = static_cast<float>(lo + (hi - lo) * u);
  }
  return v;
}

using test_util::bytes_of;

// A stride-0 broadcast view of t (without the shape family's broadcast_as).
Tensor bcast(const Tensor& t, const Shape& shape) { return view(t, t.layout().broadcast_as(shape)); }

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// Distance in units of the last place of the f32 nearest to `ref` (subnormal spacing below
// the normal range).
double ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0.0 : 1e30;
  float rf = static_cast<float>(ref);
  if (std::isinf(rf)) return got == rf ? 0.0 : 1e30;
  int e;
  std::frexp(std::fabs(ref), &e);
  double spacing = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(got) - ref) / spacing;
}

// Samples [lo, hi] with about 20000 points per binade (every float near zero).
template <typename F>
void for_samples(float lo, float hi, F&& f) {
  for (float x = lo; x <= hi;) {
    f(x);
    float step = std::fabs(x) / 20000.0f;
    x = std::max(std::nextafter(x, std::numeric_limits<float>::infinity()), x + step);
  }
}

}  // namespace

// ---- candle's tensor_tests.rs ------------------------------------------------------------------

TEST(Elementwise, CandleUnaryOpValues) {
  Tensor t = Tensor::new_({{-3.f, 1.f, 4.f, -0.1f, 0.5f}, {2.7f, -1.8f, -0.28f, 1.8f, 2.8f}}, dev());
  expect_rounded(t.gelu(), 4,
                 {-0.0036, 0.8412, 3.9999, -0.046, 0.3457, 2.6911, -0.0647, -0.1091, 1.7353, 2.7933});
  expect_rounded(t.gelu_erf(), 4,
                 {-0.004, 0.8413, 3.9999, -0.046, 0.3457, 2.6906, -0.0647, -0.1091, 1.7353, 2.7928});
  expect_rounded(t.erf(), 4, {-1.0, 0.8427, 1.0, -0.1125, 0.5205, 0.9999, -0.9891, -0.3079, 0.9891, 0.9999});
  expect_rounded(t.silu(), 4,
                 {-0.1423, 0.7311, 3.9281, -0.0475, 0.3112, 2.53, -0.2553, -0.1205, 1.5447, 2.6395});
  expect_rounded(t.ceil(), 4, {-3.0, 1.0, 4.0, -0.0, 1.0, 3.0, -1.0, -0.0, 2.0, 3.0});
  expect_rounded(t.floor(), 4, {-3.0, 1.0, 4.0, -1.0, 0.0, 2.0, -2.0, -1.0, 1.0, 2.0});
  expect_rounded(t.round(), 4, {-3.0, 1.0, 4.0, -0.0, 1.0, 3.0, -2.0, -0.0, 2.0, 3.0});
}

TEST(Elementwise, CandleGeluF16CloseToF32) {
  Tensor t = Tensor::new_({{-3.f, 1.f, 4.f, -0.1f, 0.5f}, {2.7f, -1.8f, -0.28f, 1.8f, 2.8f}}, dev());
  auto a = t.gelu().flatten_to_vec<float>();
  auto b = t.to_dtype(DType::F16).gelu().to_dtype(DType::F32).flatten_to_vec<float>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(std::fabs(a[i] - b[i]), 5e-3f) << i;
}

TEST(Elementwise, CandleRoundTo) {
  Tensor t = Tensor::new_({2997.9246f, 314.15926f}, dev());
  expect_rounded(t.round_to(2), 4, {2997.92, 314.16});
  expect_rounded(t.round_to(-2), 4, {3000.0, 300.0});
  EXPECT_EQ(t.round_to(2).to_vec1<float>(), (std::vector<float>{2997.92f, 314.16f}));
}

TEST(Elementwise, RoundToIntegers) {
  Tensor t = Tensor::new_({1249, -1251, 37}, dev());
  EXPECT_EQ(t.round_to(2).to_vec1<int32_t>(), (std::vector<int32_t>{1249, -1251, 37}));
  EXPECT_EQ(t.round_to(-2).to_vec1<int32_t>(), (std::vector<int32_t>{1200, -1300, 0}));
}

TEST(Elementwise, CandleSign) {
  Tensor t = Tensor::new_({-1.01f, -0.9f, -0.1f, 0.0f, -0.0f, 0.1f, 0.9f, 1.0f, 1.1f}, dev());
  EXPECT_EQ(t.sign().to_vec1<float>(), (std::vector<float>{-1, -1, -1, 0, 0, 1, 1, 1, 1}));
}

TEST(Elementwise, CandleElu) {
  Tensor t = Tensor::new_({-1.0f, 0.f, -2.f, 3.f}, dev());
  expect_rounded(t.elu(2.0), 4, {-1.2642, 0.0, -1.7293, 3.0});
  // the transposed view of candle's metal regression test
  Tensor tt = view(t, Layout::contiguous({2, 2}).transpose(0, 1));
  expect_rounded(tt.elu(2.0), 4, {-1.2642, -1.7293, 0.0, 3.0});
}

TEST(Elementwise, CandleF64GeluErfAndErf) {
  Tensor t = Tensor::new_({-20.0, -6., -3., -0.1, 0.5, 1.8, 2.8, 4., 6., 20.}, dev());
  expect_rounded(t.gelu_erf(), 4, {0.0, 0.0, -0.004, -0.046, 0.3457, 1.7353, 2.7928, 3.9999, 6.0, 20.0});
  expect_rounded(t.erf(), 4, {-1.0, -1.0, -1.0, -0.1125, 0.5205, 0.9891, 0.9999, 1.0, 1.0, 1.0});
}

TEST(Elementwise, CandleBinaryOp) {
  Tensor t1 = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, dev());
  Tensor t2 = Tensor::new_({{5.f, 5.f, 5.f, 5.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, dev());
  Tensor t = t1 + (t1 * t1) / (t1 + t2);
  EXPECT_EQ(t.to_vec2<float>(),
            (Mat{{4.125f, 1.1666666f, 5.7777777f, 1.1666666f, 7.5f}, {3.0f, 1.5f, 10.5f, 12.0f, 3.0f}}));
  EXPECT_EQ((t - t).to_vec2<float>()[0], (std::vector<float>{0, 0, 0, 0, 0}));
  EXPECT_EQ(t1.minimum(t2 * 0.5).to_vec2<float>(),
            (Mat{{2.5f, 1.0f, 2.5f, 1.0f, 2.5f}, {1.0f, 0.5f, 3.5f, 4.0f, 1.0f}}));
  EXPECT_EQ(t1.maximum(t2 * 0.5).to_vec2<float>(),
            (Mat{{3.0f, 2.5f, 4.0f, 2.5f, 5.0f}, {2.0f, 1.0f, 7.0f, 8.0f, 2.0f}}));
}

TEST(Elementwise, CandleBinaryUniformBlocks) {
  // base [3, 6, 5] narrowed to [3, 4, 5]: strides [30, 5, 1] (blocks of 20 with gaps)
  const size_t b = 3, s = 4, h = 5, pad = 2;
  std::vector<float> base(b * (s + pad) * h), sc(b * s * h);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(i + 1);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<float>(i + 1);
  Tensor bt = Tensor::from_vec(base, {b, s + pad, h}, dev());
  Tensor ub = view(bt, bt.layout().narrow(1, 0, s));
  Tensor cont = ub.contiguous();
  Tensor scale = Tensor::from_vec(sc, {b, s, h}, dev());
  EXPECT_EQ((ub + scale).to_vec3<float>(), (cont + scale).to_vec3<float>());
  EXPECT_EQ((ub * scale).to_vec3<float>(), (cont * scale).to_vec3<float>());
  EXPECT_EQ((scale + ub).to_vec3<float>(), (scale + cont).to_vec3<float>());
  EXPECT_EQ((ub + scale).to_vec3<float>()[1][2][3], base[1 * 30 + 2 * 5 + 3] + sc[1 * 20 + 2 * 5 + 3]);
}

TEST(Elementwise, CandleBroadcasting) {
  std::vector<float> v(24);
  for (size_t i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  Tensor t1 = Tensor::from_vec(v, {4, 2, 3}, dev());
  Tensor t2 = Tensor::new_({100.f, 200.f}, dev());
  Tensor t2c = Tensor::from_vec(std::vector<float>{100.f, 200.f}, {2, 1}, dev());
  using M3 = std::vector<Mat>;
  EXPECT_EQ(t1.broadcast_add(t2c).to_vec3<float>(), (M3{{{100, 101, 102}, {203, 204, 205}},
                                                        {{106, 107, 108}, {209, 210, 211}},
                                                        {{112, 113, 114}, {215, 216, 217}},
                                                        {{118, 119, 120}, {221, 222, 223}}}));
  Tensor t1t = view(t1, t1.layout().transpose(1, 2));
  EXPECT_EQ(t1t.broadcast_add(t2).to_vec3<float>(), (M3{{{100, 203}, {101, 204}, {102, 205}},
                                                        {{106, 209}, {107, 210}, {108, 211}},
                                                        {{112, 215}, {113, 216}, {114, 217}},
                                                        {{118, 221}, {119, 222}, {120, 223}}}));
  EXPECT_EQ(t1.broadcast_sub(t2c).to_vec3<float>(), (M3{{{-100, -99, -98}, {-197, -196, -195}},
                                                        {{-94, -93, -92}, {-191, -190, -189}},
                                                        {{-88, -87, -86}, {-185, -184, -183}},
                                                        {{-82, -81, -80}, {-179, -178, -177}}}));
  EXPECT_EQ(t1t.broadcast_sub(t2).to_vec3<float>(), (M3{{{-100, -197}, {-99, -196}, {-98, -195}},
                                                        {{-94, -191}, {-93, -190}, {-92, -189}},
                                                        {{-88, -185}, {-87, -184}, {-86, -183}},
                                                        {{-82, -179}, {-81, -178}, {-80, -177}}}));
  // narrowed (start offset 12)
  Tensor n1 = view(t1, t1.layout().narrow(0, 2, 2));
  Tensor n1t = view(t1, t1.layout().narrow(0, 2, 2).transpose(1, 2));
  EXPECT_EQ(n1.broadcast_add(t2c).to_vec3<float>(),
            (M3{{{112, 113, 114}, {215, 216, 217}}, {{118, 119, 120}, {221, 222, 223}}}));
  EXPECT_EQ(n1t.broadcast_add(t2).to_vec3<float>(),
            (M3{{{112, 215}, {113, 216}, {114, 217}}, {{118, 221}, {119, 222}, {120, 223}}}));
  EXPECT_EQ(n1.broadcast_sub(t2c).to_vec3<float>(),
            (M3{{{-88, -87, -86}, {-185, -184, -183}}, {{-82, -81, -80}, {-179, -178, -177}}}));
  Tensor t3 = Tensor::new_(1.f, dev()).broadcast_div(t2);
  Tensor t3c = Tensor::from_vec(t3.to_vec1<float>(), {2, 1}, dev());
  Tensor s = n1.broadcast_mul(t2c);
  EXPECT_EQ(s.to_vec3<float>(),
            (M3{{{1200, 1300, 1400}, {3000, 3200, 3400}}, {{1800, 1900, 2000}, {4200, 4400, 4600}}}));
  EXPECT_EQ(s.to_vec3<float>(), n1.broadcast_div(t3c).to_vec3<float>());
  Tensor st = n1t.broadcast_mul(t2);
  EXPECT_EQ(st.to_vec3<float>(),
            (M3{{{1200, 3000}, {1300, 3200}, {1400, 3400}}, {{1800, 4200}, {1900, 4400}, {2000, 4600}}}));
  EXPECT_EQ(st.to_vec3<float>(), n1t.broadcast_div(t3).to_vec3<float>());
}

TEST(Elementwise, CandleCmp) {
  Tensor t1 = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, dev());
  Tensor t2 = Tensor::new_({{1.f, 0.f}, {3.f, 3.f}, {4.f, 7.f}}, dev());
  using M8 = std::vector<std::vector<uint8_t>>;
  EXPECT_EQ(t1.eq(t2).to_vec2<uint8_t>(), (M8{{0, 0}, {0, 1}, {1, 0}}));
  EXPECT_EQ(t1.ne(t2).to_vec2<uint8_t>(), (M8{{1, 1}, {1, 0}, {0, 1}}));
  EXPECT_EQ(t1.le(t2).to_vec2<uint8_t>(), (M8{{1, 0}, {1, 1}, {1, 1}}));
  EXPECT_EQ(t1.lt(t2).to_vec2<uint8_t>(), (M8{{1, 0}, {1, 0}, {0, 1}}));
  EXPECT_EQ(t1.gt(t2).to_vec2<uint8_t>(), (M8{{0, 1}, {0, 0}, {0, 0}}));
  EXPECT_EQ(t1.ge(t2).to_vec2<uint8_t>(), (M8{{0, 1}, {0, 1}, {1, 0}}));
  EXPECT_EQ(t1.cmp(CmpOp::Ge, t2).to_vec2<uint8_t>(), (M8{{0, 1}, {0, 1}, {1, 0}}));
  EXPECT_EQ(t1.eq(t2).dtype(), DType::U8);
}

TEST(Elementwise, CmpScalarAndBroadcast) {
  Tensor t = Tensor::new_({{0.f, 1.f}, {2.f, 3.f}, {4.f, 5.f}}, dev());
  using M8 = std::vector<std::vector<uint8_t>>;
  EXPECT_EQ(t.gt(Scalar(2.5)).to_vec2<uint8_t>(), (M8{{0, 0}, {0, 1}, {1, 1}}));
  EXPECT_EQ(t.eq(Scalar(4)).to_vec2<uint8_t>(), (M8{{0, 0}, {0, 0}, {1, 0}}));
  EXPECT_EQ(t.le(Scalar(1.0)).to_vec2<uint8_t>(), (M8{{1, 1}, {0, 0}, {0, 0}}));
  EXPECT_EQ(t.ne(Scalar(0)).to_vec2<uint8_t>(), (M8{{0, 1}, {1, 1}, {1, 1}}));
  EXPECT_EQ(t.lt(Scalar(3)).to_vec2<uint8_t>(), (M8{{1, 1}, {1, 0}, {0, 0}}));
  EXPECT_EQ(t.ge(Scalar(5)).to_vec2<uint8_t>(), (M8{{0, 0}, {0, 0}, {0, 1}}));
  Tensor row = Tensor::new_({{1.f, 4.f}}, dev());
  EXPECT_EQ(t.broadcast_lt(row).to_vec2<uint8_t>(), (M8{{1, 1}, {0, 1}, {0, 0}}));
  EXPECT_EQ(t.broadcast_ge(row).to_vec2<uint8_t>(), (M8{{0, 0}, {1, 0}, {1, 1}}));
  EXPECT_EQ(t.broadcast_eq(row).to_vec2<uint8_t>(), (M8{{0, 0}, {0, 0}, {0, 0}}));
  EXPECT_EQ(t.broadcast_ne(row).to_vec2<uint8_t>(), (M8{{1, 1}, {1, 1}, {1, 1}}));
  EXPECT_EQ(t.broadcast_le(row).to_vec2<uint8_t>(), (M8{{1, 1}, {0, 1}, {0, 0}}));
  EXPECT_EQ(t.broadcast_gt(row).to_vec2<uint8_t>(), (M8{{0, 0}, {1, 0}, {1, 1}}));
}

TEST(Elementwise, CandleWhereCond) {
  Tensor ids = Tensor::new_({{uint8_t{0}, uint8_t{1}, uint8_t{0}, uint8_t{1}, uint8_t{0}},
                             {uint8_t{1}, uint8_t{1}, uint8_t{1}, uint8_t{0}, uint8_t{0}}},
                            dev());
  Tensor a = Tensor::new_({{0.f, 1.f, 2.f, 3.f, 4.f}, {5.f, 6.f, 7.f, 8.f, 9.f}}, dev());
  Tensor b = Tensor::new_({{10.f, 11.f, 12.f, 13.f, 14.f}, {15.f, 16.f, 17.f, 18.f, 19.f}}, dev());
  Tensor r = ids.where_cond(a, b);
  EXPECT_EQ(r.dims(), (std::vector<size_t>{2, 5}));
  EXPECT_EQ(r.flatten_to_vec<float>(), (std::vector<float>{10, 1, 12, 3, 14, 5, 6, 7, 18, 19}));
  Tensor fill = bcast(Tensor::new_(7.f, dev()), {2, 5});
  EXPECT_EQ(ids.where_cond(fill, b).to_vec2<float>(), (Mat{{10, 7, 12, 7, 14}, {7, 7, 7, 18, 19}}));
  Tensor mask =
      bcast(Tensor::new_({{uint8_t{0}, uint8_t{1}, uint8_t{1}, uint8_t{0}, uint8_t{1}}}, dev()), {2, 5});
  EXPECT_EQ(mask.where_cond(a, b).to_vec2<float>(), mask.contiguous().where_cond(a, b).to_vec2<float>());
  EXPECT_EQ(mask.where_cond(a, b).to_vec2<float>(), (Mat{{10, 1, 2, 13, 4}, {15, 6, 7, 18, 9}}));
  Tensor at = view(Tensor::from_vec(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}, dev()),
                   Layout::contiguous({5, 2}).transpose(0, 1));
  Tensor ids_src = Tensor::new_({{uint8_t{0}, uint8_t{1}},
                                 {uint8_t{1}, uint8_t{1}},
                                 {uint8_t{0}, uint8_t{0}},
                                 {uint8_t{1}, uint8_t{0}},
                                 {uint8_t{1}, uint8_t{1}}},
                                dev());
  Tensor ids_t = view(ids_src, Layout::contiguous({5, 2}).transpose(0, 1));
  EXPECT_EQ(ids_t.where_cond(at, b).to_vec2<float>(),
            ids_t.contiguous().where_cond(at.contiguous(), b).to_vec2<float>());
  EXPECT_EQ(ids_t.where_cond(at, b).to_vec2<float>(), (Mat{{10, 2, 12, 6, 8}, {1, 3, 17, 18, 9}}));
  Tensor row_mask = bcast(Tensor::new_({{uint8_t{1}}, {uint8_t{0}}}, dev()), {2, 5});
  EXPECT_EQ(row_mask.where_cond(a, fill).to_vec2<float>(), (Mat{{0, 1, 2, 3, 4}, {7, 7, 7, 7, 7}}));
}

TEST(Elementwise, WhereCondBroadcastsOperands) {
  Tensor cond =
      Tensor::new_({{uint8_t{1}, uint8_t{0}, uint8_t{1}}, {uint8_t{0}, uint8_t{0}, uint8_t{1}}}, dev());
  Tensor on_true = Tensor::new_({1.f, 2.f, 3.f}, dev());  // [3] -> [2, 3]
  Tensor on_false = Tensor::new_(-1.f, dev());            // scalar
  EXPECT_EQ(cond.where_cond(on_true, on_false).to_vec2<float>(), (Mat{{1, -1, 3}, {-1, -1, 3}}));
  // the condition broadcasts too: [1, 3] with [2, 3] values
  Tensor row = Tensor::new_({{uint8_t{0}, uint8_t{1}, uint8_t{0}}}, dev());
  Tensor vals = Tensor::new_({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, dev());
  EXPECT_EQ(row.where_cond(vals, on_false).to_vec2<float>(), (Mat{{-1, 2, -1}, {-1, 5, -1}}));
}

TEST(Elementwise, CandleClamp) {
  Tensor t = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, dev());
  EXPECT_EQ(t.clamp(1.5, 6.2).to_vec2<float>(),
            (Mat{{3.0f, 1.5f, 4.0f, 1.5f, 5.0f}, {2.0f, 1.5f, 6.2f, 6.2f, 2.0f}}));
}

TEST(Elementwise, ClampWithTensorsBroadcasts) {
  Tensor t = Tensor::new_({{3.f, 1.f, 4.f}, {2.f, 9.f, 7.f}}, dev());
  Tensor hi = Tensor::new_({{3.f}, {8.f}}, dev());
  EXPECT_EQ(t.clamp(Tensor::new_({2.f, 2.f, 5.f}, dev()), hi).to_vec2<float>(), (Mat{{3, 2, 3}, {2, 8, 7}}));
}

TEST(Elementwise, CandlePow) {
  Tensor lhs = Tensor::new_({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, dev());
  Tensor rhs = lhs - 2.0;
  expect_rounded(lhs.pow(rhs), 3, {1.0, 1.0, 3.0, 16.0, 125.0, 1296.0});
}

TEST(Elementwise, PowOfNegativeBase) {
  // candle's exp(rhs * log(lhs)) gives NaN for these; std::pow semantics give the real power
  Tensor base = Tensor::new_({-2.f, -3.f, -2.f, 0.f}, dev());
  Tensor e = Tensor::new_({2.f, 3.f, 0.5f, 0.f}, dev());
  auto r = base.pow(e).to_vec1<float>();
  EXPECT_EQ(r[0], 4.f);
  EXPECT_EQ(r[1], -27.f);
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_EQ(r[3], 1.f);
  EXPECT_EQ(base.broadcast_pow(Tensor::new_(2.f, dev())).to_vec1<float>(), (std::vector<float>{4, 9, 4, 0}));
}

TEST(Elementwise, CandleI64Abs) {
  EXPECT_EQ(Tensor::new_({int64_t{-42}, int64_t{1337}}, dev()).abs().to_vec1<int64_t>(),
            (std::vector<int64_t>{42, 1337}));
}

TEST(Elementwise, CandleTransposeAffine) {
  Tensor t = Tensor::new_({{3.f, 1.f, 4.f, 1.f, 5.f}, {2.f, 1.f, 7.f, 8.f, 2.f}}, dev());
  Tensor tt = view(t, t.layout().transpose(0, 1));
  Tensor back = (tt + 1.0);
  EXPECT_EQ(view(back, back.layout().transpose(0, 1)).affine(1.0, -1.0).to_vec2<float>(), t.to_vec2<float>());
}

TEST(Elementwise, CandleZeroDim) {
  Tensor t = Tensor::zeros({4, 0, 1}, DType::F32, dev());
  EXPECT_EQ(t.sqrt().dims(), (std::vector<size_t>{4, 0, 1}));
  EXPECT_EQ((t + 1.0).dims(), (std::vector<size_t>{4, 0, 1}));
  EXPECT_EQ(t.add(t).dims(), (std::vector<size_t>{4, 0, 1}));
  EXPECT_EQ(t.broadcast_mul(Tensor::zeros({1}, DType::F32, dev())).dims(), (std::vector<size_t>{4, 0, 1}));
}

// ---- more values ------------------------------------------------------------------------------

TEST(Elementwise, UnaryValuesF32) {
  Tensor t = Tensor::new_({-2.f, -0.5f, 0.f, 0.25f, 1.f, 3.f}, dev());
  auto near = [&](const Tensor& r, double (*f)(double)) {
    auto v = r.to_vec1<float>();
    std::vector<float> in = t.to_vec1<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      double want = f(in[i]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(v[i])) << i;
      else if (std::isinf(want))
        EXPECT_EQ(v[i], want) << i;
      else
        EXPECT_NEAR(v[i], want, 2e-7 * std::max(1.0, std::fabs(want))) << i;  // f32 rounding
    }
  };
  near(t.exp(), [](double x) { return std::exp(x); });
  near(t.tanh(), [](double x) { return std::tanh(x); });
  near(t.sin(), [](double x) { return std::sin(x); });
  near(t.cos(), [](double x) { return std::cos(x); });
  near(t.sigmoid(), [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  near(t.neg(), [](double x) { return -x; });
  near(t.abs(), [](double x) { return std::fabs(x); });
  near(t.sqr(), [](double x) { return x * x; });
  near(t.relu(), [](double x) { return x > 0 ? x : 0.0; });
  near(t.abs().sqrt(), [](double x) { return std::sqrt(std::fabs(x)); });
  near(t.abs().log(), [](double x) { return std::log(std::fabs(x)); });
  near(t.recip(), [](double x) { return 1.0 / x; });
  near(t.powf(2.0), [](double x) { return x * x; });
  near(t.abs().powf(0.5), [](double x) { return std::sqrt(std::fabs(x)); });
}

TEST(Elementwise, ScalarOperators) {
  Tensor t = Tensor::new_({1.f, 2.f, 4.f}, dev());
  EXPECT_EQ((t + 1.0).to_vec1<float>(), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ((1.0 + t).to_vec1<float>(), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ((t - 1.0).to_vec1<float>(), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ((10.0 - t).to_vec1<float>(), (std::vector<float>{9, 8, 6}));
  EXPECT_EQ((t * 3.0).to_vec1<float>(), (std::vector<float>{3, 6, 12}));
  EXPECT_EQ((3.0 * t).to_vec1<float>(), (std::vector<float>{3, 6, 12}));
  EXPECT_EQ((t / 2.0).to_vec1<float>(), (std::vector<float>{0.5, 1, 2}));
  EXPECT_EQ((8.0 / t).to_vec1<float>(), (std::vector<float>{8, 4, 2}));
  EXPECT_EQ((-t).to_vec1<float>(), (std::vector<float>{-1, -2, -4}));
  EXPECT_EQ(t.affine(2.0, 0.5).to_vec1<float>(), (std::vector<float>{2.5, 4.5, 8.5}));
  EXPECT_EQ(t.maximum(Scalar(2.0)).to_vec1<float>(), (std::vector<float>{2, 2, 4}));
  EXPECT_EQ(t.minimum(Scalar(2)).to_vec1<float>(), (std::vector<float>{1, 2, 2}));
}

TEST(Elementwise, MaximumMinimumPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::new_({nan, 1.f, 2.f}, dev());
  Tensor b = Tensor::new_({1.f, nan, 3.f}, dev());
  auto mx = a.maximum(b).to_vec1<float>();
  auto mn = a.minimum(b).to_vec1<float>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mx[2], 3.f);
  EXPECT_EQ(mn[2], 2.f);
}

// ---- integer semantics --------------------------------------------------------------------------

TEST(Elementwise, IntegerUnaryOps) {
  Tensor t = Tensor::new_({int64_t{-3}, int64_t{0}, int64_t{5}}, dev());
  EXPECT_EQ(t.neg().to_vec1<int64_t>(), (std::vector<int64_t>{3, 0, -5}));
  EXPECT_EQ(t.abs().to_vec1<int64_t>(), (std::vector<int64_t>{3, 0, 5}));
  EXPECT_EQ(t.sqr().to_vec1<int64_t>(), (std::vector<int64_t>{9, 0, 25}));
  EXPECT_EQ(t.relu().to_vec1<int64_t>(), (std::vector<int64_t>{0, 0, 5}));
  EXPECT_EQ(t.sign().to_vec1<int64_t>(), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(t.ceil().to_vec1<int64_t>(), (std::vector<int64_t>{-3, 0, 5}));
  EXPECT_EQ(t.floor().to_vec1<int64_t>(), (std::vector<int64_t>{-3, 0, 5}));
  EXPECT_EQ(t.round().to_vec1<int64_t>(), (std::vector<int64_t>{-3, 0, 5}));
  Tensor u = Tensor::new_({uint8_t{0}, uint8_t{7}, uint8_t{200}}, dev());
  EXPECT_EQ(u.sign().to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(u.abs().to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 7, 200}));
  EXPECT_EQ(u.neg().to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 249, 56}));  // wraps
  EXPECT_EQ(u.sqr().to_vec1<uint8_t>(), (std::vector<uint8_t>{0, 49, 64}));   // 40000 mod 256
}

TEST(Elementwise, IntegerArithmeticWrapsAndDivisionByZeroGivesZero) {
  Tensor a =
      Tensor::new_({std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 7}, dev())
          .to_dtype(DType::I32);
  Tensor one = Tensor::new_({1, -1, 0}, dev()).to_dtype(DType::I32);
  EXPECT_EQ(a.add(one).to_vec1<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(),
                                                                 std::numeric_limits<int32_t>::max(), 7}));
  EXPECT_EQ(a.div(one).to_vec1<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                                                 std::numeric_limits<int32_t>::min(), 0}));
  Tensor i16 = Tensor::new_({int64_t{300}, int64_t{-7}}, dev()).to_dtype(DType::I16);
  EXPECT_EQ(i16.mul(i16).to_vec1<int16_t>(), (std::vector<int16_t>{static_cast<int16_t>(90000 - 65536), 49}));
  Tensor u = Tensor::new_({uint32_t{7}, uint32_t{9}}, dev());
  EXPECT_EQ(u.div(Tensor::new_({uint32_t{2}, uint32_t{0}}, dev())).to_vec1<uint32_t>(),
            (std::vector<uint32_t>{3, 0}));
  EXPECT_EQ(u.sub(Tensor::new_({uint32_t{8}, uint32_t{1}}, dev())).to_vec1<uint32_t>(),
            (std::vector<uint32_t>{0xffffffffu, 8}));
}

TEST(Elementwise, IntegerAffine) {
  Tensor u = Tensor::new_({uint8_t{3}, uint8_t{10}, uint8_t{255}}, dev());
  EXPECT_EQ(u.affine(2.0, 1.0).to_vec1<uint8_t>(), (std::vector<uint8_t>{7, 21, 255}));  // 511 wraps to 255
  EXPECT_EQ((u + 1.0).to_vec1<uint8_t>(), (std::vector<uint8_t>{4, 11, 0}));
  // a fractional factor is applied in f64, then truncated (candle would give zeros)
  EXPECT_EQ((u * 0.5).to_vec1<uint8_t>(), (std::vector<uint8_t>{1, 5, 127}));
  Tensor i = Tensor::new_({int64_t{-5}, int64_t{4}}, dev());
  EXPECT_EQ((i * -3.0).to_vec1<int64_t>(), (std::vector<int64_t>{15, -12}));
  EXPECT_EQ((i / 2.0).to_vec1<int64_t>(), (std::vector<int64_t>{-2, 2}));
}

TEST(Elementwise, IntegerDtypesRejectFloatOnlyOps) {
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
    Tensor t = Tensor::ones({3}, dt, dev());
    for (auto f :
         {&Tensor::exp, &Tensor::log, &Tensor::sin, &Tensor::cos, &Tensor::tanh, &Tensor::sqrt,
          &Tensor::recip, &Tensor::gelu, &Tensor::gelu_erf, &Tensor::erf, &Tensor::silu, &Tensor::sigmoid}) {
      EXPECT_THROW((t.*f)(), Error) << dtype_name(dt);
    }
    expect_error([&] { t.exp(); }, ErrorKind::UnsupportedOp, {"exp", std::string(dtype_name(dt))});
    expect_error([&] { t.elu(1.0); }, ErrorKind::UnsupportedOp, {"elu"});
    expect_error([&] { t.powf(2.0); }, ErrorKind::UnsupportedOp, {"powf"});
    expect_error([&] { t.pow(t); }, ErrorKind::UnsupportedOp, {"pow"});
    // the backend checks too, before touching data
    expect_error([&] { t.storage()->unary(UnaryOp::Tanh, t.layout()); }, ErrorKind::UnsupportedOp, {"tanh"});
  }
}

// ---- every dtype ----------------------------------------------------------------------------

TEST(Elementwise, BinaryAndCmpEveryDtype) {
  Tensor a32 = Tensor::new_({{6.f, 2.f, 0.f}, {3.f, 8.f, 5.f}}, dev());
  Tensor b32 = Tensor::new_({{3.f, 2.f, 1.f}, {4.f, 2.f, 5.f}}, dev());
  using M8 = std::vector<std::vector<uint8_t>>;
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = a32.to_dtype(dt), b = b32.to_dtype(dt);
    auto f32 = [](const Tensor& t) { return t.to_dtype(DType::F32).to_vec2<float>(); };
    EXPECT_EQ(f32(a + b), (Mat{{9, 4, 1}, {7, 10, 10}}));
    if (dt != DType::F8E4M3) {  // 25 and 17 are not f8e4m3 values
      EXPECT_EQ(f32(a * b), (Mat{{18, 4, 0}, {12, 16, 25}}));
      EXPECT_EQ(f32(a.affine(2.0, 1.0)), (Mat{{13, 5, 1}, {7, 17, 11}}));
      EXPECT_EQ(f32(a.sqr()), (Mat{{36, 4, 0}, {9, 64, 25}}));
    }
    EXPECT_EQ(f32(a.div(b)), (Mat{{2, 1, 0}, {dtype_is_int(dt) ? 0.f : 0.75f, 4, 1}}));
    EXPECT_EQ(f32(a.maximum(b)), (Mat{{6, 2, 1}, {4, 8, 5}}));
    EXPECT_EQ(f32(a.minimum(b)), (Mat{{3, 2, 0}, {3, 2, 5}}));
    EXPECT_EQ(f32(a.maximum(b).sub(b)), (Mat{{3, 0, 0}, {0, 6, 0}}));
    EXPECT_EQ(f32(a.broadcast_add(view(b, b.layout().narrow(0, 0, 1)))), (Mat{{9, 4, 1}, {6, 10, 6}}));
    EXPECT_EQ(a.lt(b).to_vec2<uint8_t>(), (M8{{0, 0, 1}, {1, 0, 0}}));
    EXPECT_EQ(a.eq(b).to_vec2<uint8_t>(), (M8{{0, 1, 0}, {0, 0, 1}}));
    EXPECT_EQ(a.ge(Scalar(5)).to_vec2<uint8_t>(), (M8{{1, 0, 0}, {0, 1, 1}}));
    EXPECT_EQ(f32(a.clamp(2, 5)), (Mat{{5, 2, 2}, {3, 5, 5}}));
    EXPECT_EQ(f32(a.relu()), f32(a));
  }
}

TEST(Elementwise, FloatOpsOnSmallFloatsMatchF32Rounded) {
  // f16/bf16/f8e4m3 compute in f32 and round once: the result is the f32 result converted
  Tensor x = Tensor::new_({-2.5f, -1.f, -0.25f, 0.f, 0.5f, 1.f, 3.f}, dev());
  for (DType dt : {DType::F16, DType::BF16, DType::F8E4M3}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor xs = x.to_dtype(dt);
    Tensor x32 = xs.to_dtype(DType::F32);  // the exact small-float values
    for (UnaryOp op :
         {UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Gelu, UnaryOp::GeluErf, UnaryOp::Erf, UnaryOp::Silu,
          UnaryOp::Sigmoid, UnaryOp::Neg, UnaryOp::Sqr, UnaryOp::Abs, UnaryOp::Sin, UnaryOp::Round}) {
      SCOPED_TRACE(unary_op_name(op));
      Tensor got = Tensor::from_storage(xs.storage()->unary(op, xs.layout()), xs.layout(), dt, dev());
      Tensor want =
          Tensor::from_storage(x32.storage()->unary(op, x32.layout()), x32.layout(), DType::F32, dev());
      EXPECT_EQ(bytes_of(got), bytes_of(want.to_dtype(dt)));
    }
    EXPECT_EQ(bytes_of(xs.elu(1.5)), bytes_of(x32.elu(1.5).to_dtype(dt)));
    EXPECT_EQ(bytes_of(xs.powf(2.0)), bytes_of(x32.powf(2.0).to_dtype(dt)));
    EXPECT_EQ(bytes_of(xs.affine(0.5, 1.0)), bytes_of(x32.affine(0.5, 1.0).to_dtype(dt)));
    EXPECT_EQ(bytes_of(xs.mul(xs)), bytes_of(x32.mul(x32).to_dtype(dt)));
  }
}

TEST(Elementwise, F64UsesLibm) {
  Tensor x = Tensor::new_({-3.0, -0.5, 0.1, 2.0}, dev());
  std::vector<double> in = x.to_vec1<double>();
  auto e = x.exp().to_vec1<double>();
  auto th = x.tanh().to_vec1<double>();
  auto sg = x.sigmoid().to_vec1<double>();
  auto si = x.silu().to_vec1<double>();
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(e[i], std::exp(in[i]));
    EXPECT_EQ(th[i], std::tanh(in[i]));
    EXPECT_DOUBLE_EQ(sg[i], 1.0 / (1.0 + std::exp(-in[i])));
    EXPECT_DOUBLE_EQ(si[i], in[i] / (1.0 + std::exp(-in[i])));
  }
}

TEST(Elementwise, WhereCondEveryDtype) {
  Tensor c8 = Tensor::new_({uint8_t{1}, uint8_t{0}, uint8_t{2}}, dev());
  for (DType cd : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64}) {
    for (DType vd : kAllDTypes) {
      SCOPED_TRACE(std::string(dtype_name(cd)) + " " + std::string(dtype_name(vd)));
      Tensor t = Tensor::new_({1.f, 2.f, 3.f}, dev()).to_dtype(vd);
      Tensor f = Tensor::new_({-1.f, -2.f, -3.f}, dev()).to_dtype(vd);
      Tensor r = c8.to_dtype(cd).where_cond(t, f);
      EXPECT_EQ(r.dtype(), vd);
      std::vector<float> want = dtype_is_int(vd) && vd != DType::I16 && vd != DType::I32 && vd != DType::I64
                                    ? std::vector<float>{1, 0, 3}  // -2 saturates to 0 in unsigned
                                    : std::vector<float>{1, -2, 3};
      EXPECT_EQ(r.to_dtype(DType::F32).to_vec1<float>(), want);
    }
  }
  expect_error(
      [&] { Tensor::new_({1.f}, dev()).where_cond(Tensor::new_({1.f}, dev()), Tensor::new_({1.f}, dev())); },
      ErrorKind::DTypeMismatch, {"where_cond", "f32"});
}

// ---- layouts ------------------------------------------------------------------------------------

TEST(Elementwise, StridedLayoutsMatchContiguous) {
  const size_t rows = 37, cols = 53;  // odd sizes: vector loops plus scalar tails
  std::vector<float> av = pseudo_random(rows * cols, -4.f, 4.f, 1);
  std::vector<float> bv = pseudo_random(rows * cols, 0.5f, 4.f, 2);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = Tensor::from_vec(av, {rows, cols}, dev()).to_dtype(dt);
    Tensor b = Tensor::from_vec(bv, {rows, cols}, dev()).to_dtype(dt);
    std::vector<Tensor> as{test_util::transposed_copy_view(a), test_util::offset_view(a)};
    std::vector<Tensor> bs{test_util::offset_view(b), test_util::transposed_copy_view(b)};
    for (size_t k = 0; k < as.size(); ++k) {
      ASSERT_FALSE(as[k].is_contiguous() && as[k].layout().start_offset() == 0);
      EXPECT_EQ(bytes_of(as[k].add(bs[k])), bytes_of(a.add(b)));
      EXPECT_EQ(bytes_of(as[k].div(bs[k])), bytes_of(a.div(b)));
      EXPECT_EQ(bytes_of(as[k].maximum(bs[k])), bytes_of(a.maximum(b)));
      EXPECT_EQ(bytes_of(as[k].lt(bs[k])), bytes_of(a.lt(b)));
      EXPECT_EQ(bytes_of(as[k].abs()), bytes_of(a.abs()));
      EXPECT_EQ(bytes_of(as[k].affine(3.0, -1.0)), bytes_of(a.affine(3.0, -1.0)));
      if (dtype_is_float(dt)) {
        for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Gelu, UnaryOp::GeluErf, UnaryOp::Silu,
                           UnaryOp::Sigmoid, UnaryOp::Erf, UnaryOp::Sqrt, UnaryOp::Log}) {
          SCOPED_TRACE(unary_op_name(op));
          Tensor sv = Tensor::from_storage(as[k].storage()->unary(op, as[k].layout()),
                                           Layout::contiguous(a.shape()), dt, dev());
          Tensor cv = Tensor::from_storage(a.storage()->unary(op, a.layout()), Layout::contiguous(a.shape()),
                                           dt, dev());
          EXPECT_EQ(bytes_of(sv), bytes_of(cv));
        }
        EXPECT_EQ(bytes_of(as[k].elu(0.7)), bytes_of(a.elu(0.7)));
      }
    }
  }
}

TEST(Elementwise, BroadcastLayoutsMatchMaterialized) {
  const size_t n = 45, c = 67;
  Tensor x = Tensor::from_vec(pseudo_random(n * c, -3.f, 3.f, 3), {n, c}, dev());
  Tensor row = Tensor::from_vec(pseudo_random(c, 0.5f, 2.f, 4), {1, c}, dev());
  Tensor col = Tensor::from_vec(pseudo_random(n, 0.5f, 2.f, 5), {n, 1}, dev());
  Tensor rowm = bcast(row, {n, c}).contiguous();
  Tensor colm = bcast(col, {n, c}).contiguous();
  ASSERT_TRUE(rowm.is_contiguous());
  EXPECT_EQ(bytes_of(x.broadcast_mul(row)), bytes_of(x.mul(rowm)));
  EXPECT_EQ(bytes_of(x.broadcast_sub(col)), bytes_of(x.sub(colm)));
  EXPECT_EQ(bytes_of(row.broadcast_div(x)), bytes_of(rowm.div(x)));
  EXPECT_EQ(bytes_of(col.broadcast_add(x)), bytes_of(colm.add(x)));
  EXPECT_EQ(bytes_of(x.broadcast_gt(col)), bytes_of(x.gt(colm)));
  // broadcasting both sides: [n, 1] op [1, c]
  EXPECT_EQ(bytes_of(col.broadcast_mul(row)), bytes_of(colm.mul(rowm)));
  // a broadcast view as a unary input
  EXPECT_EQ(bytes_of(bcast(row, {n, c}).exp()), bytes_of(rowm.exp()));
  // [n, c] op [c] (rank extension) and a transposed lhs
  Tensor row1 = Tensor::from_vec(row.flatten_to_vec<float>(), {c}, dev());
  Tensor xt = test_util::transposed_copy_view(x);
  EXPECT_EQ(bytes_of(xt.broadcast_add(row1)), bytes_of(x.broadcast_add(row1)));
  EXPECT_EQ(x.broadcast_add(row1).dims(), (std::vector<size_t>{n, c}));
}

TEST(Elementwise, ScalarTensors) {
  Tensor a = Tensor::new_(2.f, dev());
  Tensor b = Tensor::new_(5.f, dev());
  EXPECT_EQ(a.add(b).to_scalar<float>(), 7.f);
  EXPECT_EQ(a.mul(b).rank(), 0u);
  EXPECT_EQ(a.lt(b).to_scalar<uint8_t>(), 1);
  EXPECT_EQ(a.sqr().to_scalar<float>(), 4.f);
  EXPECT_EQ(a.broadcast_mul(Tensor::new_({1.f, 2.f}, dev())).to_vec1<float>(), (std::vector<float>{2, 4}));
}

// ---- errors -------------------------------------------------------------------------------------

TEST(Elementwise, ShapeMismatchNamesOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::F32, dev());
  Tensor b = Tensor::zeros({3, 2}, DType::F32, dev());
  expect_error([&] { a.add(b); }, ErrorKind::ShapeMismatch, {"add", "[2, 3]", "[3, 2]"});
  expect_error([&] { a* b; }, ErrorKind::ShapeMismatch, {"mul", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.maximum(b); }, ErrorKind::ShapeMismatch, {"maximum", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.pow(b); }, ErrorKind::ShapeMismatch, {"pow", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.eq(b); }, ErrorKind::ShapeMismatch, {"eq", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.broadcast_mul(b); }, ErrorKind::ShapeMismatch, {"broadcast_mul", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.broadcast_lt(b); }, ErrorKind::ShapeMismatch, {"broadcast_lt", "[2, 3]", "[3, 2]"});
  expect_error([&] { a.clamp(b, b); }, ErrorKind::ShapeMismatch, {"broadcast_maximum", "[2, 3]", "[3, 2]"});
  Tensor c = Tensor::zeros({3, 2}, DType::U8, dev());
  expect_error([&] { c.where_cond(a, a); }, ErrorKind::ShapeMismatch, {"where_cond", "[3, 2]", "[2, 3]"});
}

TEST(Elementwise, DtypeMismatchNamesOp) {
  Tensor a = Tensor::zeros({2}, DType::F32, dev());
  Tensor b = Tensor::zeros({2}, DType::F64, dev());
  expect_error([&] { a.sub(b); }, ErrorKind::DTypeMismatch, {"sub", "f32", "f64"});
  expect_error([&] { a.broadcast_div(b); }, ErrorKind::DTypeMismatch, {"broadcast_div", "f32", "f64"});
  expect_error([&] { a.ge(b); }, ErrorKind::DTypeMismatch, {"ge", "f32", "f64"});
  Tensor c = Tensor::zeros({2}, DType::U8, dev());
  expect_error([&] { c.where_cond(a, b); }, ErrorKind::DTypeMismatch, {"where_cond", "f32", "f64"});
  // the backend checks on its own too
  expect_error([&] { a.storage()->binary(BinaryOp::Add, a.layout(), *b.storage(), b.layout()); },
               ErrorKind::DTypeMismatch, {"add"});
}

// ---- the f32 approximations ------------------------------------------------------------------

// Tolerances, in f32 ulps of the double-precision reference: exp 1, expm1 2, tanh 3, sigmoid 3,
// silu 3 (outputs in the normal range), erf 3 (or 2e-7 absolute near the |x| = 1 switch).
TEST(VecMath, ExpWithinOneUlp) {
  double worst = 0;
  for_samples(-104.f, 89.f, [&](float x) {
    worst = std::max(worst, ulp_error(candle::cpu::vm::exp_f32(x), std::exp(double(x))));
  });
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(candle::cpu::vm::exp_f32(0.f), 1.f);
  EXPECT_EQ(candle::cpu::vm::exp_f32(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(candle::cpu::vm::exp_f32(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(candle::cpu::vm::exp_f32(89.f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(candle::cpu::vm::exp_f32(-200.f), 0.f);
  EXPECT_GT(candle::cpu::vm::exp_f32(-100.f), 0.f);  // subnormal results survive
  EXPECT_TRUE(std::isnan(candle::cpu::vm::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, Expm1WithinTwoUlp) {
  double worst = 0;
  for_samples(-87.f, 87.f, [&](float x) {
    worst = std::max(worst, ulp_error(candle::cpu::vm::expm1_f32(x), std::expm1(double(x))));
  });
  EXPECT_LE(worst, 2.0);
}

TEST(VecMath, TanhWithinThreeUlp) {
  double worst = 0;
  for_samples(-30.f, 30.f, [&](float x) {
    worst = std::max(worst, ulp_error(candle::cpu::vm::tanh_f32(x), std::tanh(double(x))));
  });
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(candle::cpu::vm::tanh_f32(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_EQ(candle::cpu::vm::tanh_f32(-std::numeric_limits<float>::infinity()), -1.f);
  EXPECT_EQ(candle::cpu::vm::tanh_f32(1e-30f), 1e-30f);
  EXPECT_TRUE(std::isnan(candle::cpu::vm::tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, SigmoidAndSiluWithinThreeUlp) {
  double ws = 0, wl = 0;
  for_samples(-87.f, 100.f, [&](float x) {
    double e = std::exp(-double(x));
    ws = std::max(ws, ulp_error(candle::cpu::vm::sigmoid_f32(x), 1.0 / (1.0 + e)));
    wl = std::max(wl, ulp_error(candle::cpu::vm::silu_f32(x), double(x) / (1.0 + e)));
  });
  EXPECT_LE(ws, 3.0);
  EXPECT_LE(wl, 3.0);
  EXPECT_EQ(candle::cpu::vm::sigmoid_f32(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(candle::cpu::vm::sigmoid_f32(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_GT(candle::cpu::vm::sigmoid_f32(-95.f), 0.f);  // e^-95 is a (subnormal) float, not 0
}

// gelu (tanh form) is ill-conditioned for x < -1: an ulp of rounding inside u = c (x + k x^3)
// becomes ~2|u| ulps of the result. Tolerance: 3 ulp for x >= -1, else 1e-7 absolute.
TEST(VecMath, GeluTanhAccuracy) {
  double worst_ulp = 0, worst_abs = 0;
  for_samples(-12.f, 30.f, [&](float x) {
    double xd = x;
    double ref = 0.5 * xd * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
    float got = candle::cpu::vm::gelu_tanh_f32(x);
    if (x >= -1.f)
      worst_ulp = std::max(worst_ulp, ulp_error(got, ref));
    else
      worst_abs = std::max(worst_abs, std::fabs(got - ref));
  });
  EXPECT_LE(worst_ulp, 3.0);
  EXPECT_LE(worst_abs, 1e-7);
}

TEST(VecMath, ErfAccuracy) {
  double worst = 0;
  for_samples(-10.f, 10.f, [&](float x) {
    double ref = std::erf(double(x));
    float got = candle::cpu::vm::erf_f32(x);
    if (std::fabs(got - ref) > 2e-7 * std::fabs(ref)) worst = std::max(worst, ulp_error(got, ref));
  });
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(candle::cpu::vm::erf_f32(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_EQ(candle::cpu::vm::erf_f32(-std::numeric_limits<float>::infinity()), -1.f);
  EXPECT_EQ(candle::cpu::vm::erf_f32(0.f), 0.f);
}

// gelu_erf: 4 ulp for x >= -1; below, the function's own conditioning (2 z^2 for
// z = x / sqrt 2) dominates: 4e-7 absolute.
TEST(VecMath, GeluErfAccuracy) {
  double worst_ulp = 0, worst_abs = 0;
  for_samples(-14.f, 30.f, [&](float x) {
    double ref = 0.5 * double(x) * std::erfc(-double(x) / std::sqrt(2.0));
    float got = candle::cpu::vm::gelu_erf_f32(x);
    if (x >= -1.f)
      worst_ulp = std::max(worst_ulp, ulp_error(got, ref));
    else
      worst_abs = std::max(worst_abs, std::fabs(got - ref));
  });
  EXPECT_LE(worst_ulp, 4.0);
  EXPECT_LE(worst_abs, 4e-7);
}

TEST(VecMath, TensorOpsUseTheApproximations) {
  std::vector<float> v = pseudo_random(1000, -20.f, 20.f, 9);
  Tensor t = Tensor::from_vec(v, {1000}, dev());
  auto e = t.exp().to_vec1<float>();
  auto g = t.gelu().to_vec1<float>();
  auto s = t.silu().to_vec1<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(e[i], candle::cpu::vm::exp_f32(v[i]));
    ASSERT_EQ(g[i], candle::cpu::vm::gelu_tanh_f32(v[i]));
    ASSERT_EQ(s[i], candle::cpu::vm::silu_f32(v[i]));
  }
}

// ---- threads --------------------------------------------------------------------------------

TEST(Elementwise, ThreadCountDoesNotChangeBytes) {
  const size_t rows = 300, cols = 333;  // ~100K elements: several parallel chunks
  Tensor x = Tensor::from_vec(pseudo_random(rows * cols, -6.f, 6.f, 11), {rows, cols}, dev());
  Tensor y = Tensor::from_vec(pseudo_random(rows * cols, 0.1f, 3.f, 12), {rows, cols}, dev());
  Tensor row = Tensor::from_vec(pseudo_random(cols, -1.f, 1.f, 13), {1, cols}, dev());
  Tensor xt = test_util::transposed_copy_view(x);
  Tensor xh = x.to_dtype(DType::BF16);
  auto run_all = [&]() {
    std::vector<std::vector<uint8_t>> out;
    for (const Tensor& r : {x.exp(),
                            x.gelu(),
                            x.gelu_erf(),
                            x.silu(),
                            x.tanh(),
                            x.erf(),
                            x.sigmoid(),
                            xt.exp(),
                            xt.silu(),
                            x.elu(1.0),
                            x.powf(1.5),
                            x.affine(0.5, 2.0),
                            xh.gelu(),
                            x.add(y),
                            x.div(y),
                            xt.mul(y),
                            x.broadcast_mul(row),
                            x.broadcast_sub(view(y, y.layout().narrow(1, 0, 1))),
                            x.lt(y),
                            x.broadcast_ge(row),
                            x.gt(Scalar(0.0)).where_cond(x, y),
                            x.clamp(-1.0, 1.0)}) {
      out.push_back(bytes_of(r));
    }
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
