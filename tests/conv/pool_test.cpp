// Pooling and resizing: candle's own test numbers (candle-core/tests/pool_tests.rs and
// bilinear_tests.rs), a PyTorch 1.13 grid (tests/data/pool_grid.safetensors, made by
// tools/gen_pool_fixtures.py), layouts, thread-count determinism and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/io/safetensors.h"
#include "test_util.h"

using namespace candle;

namespace {

const Device& cpu() {
  static const Device d = Device::cpu();
  return d;
}

std::vector<float> f32s(const Tensor& t) { return t.to_dtype(DType::F32).flatten_to_vec<float>(); }

using test_util::bytes_of;

// Values rounded to 4 decimals, as candle's test_utils::to_vec*_round.
std::vector<float> round4(const Tensor& t) {
  std::vector<float> v = f32s(t);
  for (float& x : v) x = std::round(x * 1e4f) / 1e4f;
  return v;
}

Tensor arange_f32(float n, const Shape& s) { return Tensor::arange(0.f, n, cpu()).reshape(s); }

struct ThreadCountGuard {
  ~ThreadCountGuard() { set_num_threads(0); }
};

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace

// ---- candle-core/tests/pool_tests.rs ----------------------------------------------------------

TEST(PoolCandle, AvgPool2d) {
  Tensor t = Tensor::from_vec(std::vector<float>{1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                              {1, 1, 4, 4}, cpu());
  EXPECT_EQ(f32s(t.avg_pool2d(2)), (std::vector<float>{0.5f, 1.f, 1.f, 1.f}));
  Tensor u = Tensor::from_vec(std::vector<float>{1, 2, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1, 5, 1, 1, 1},
                              {1, 1, 2, 8}, cpu());
  Tensor p = u.avg_pool2d(2);
  EXPECT_EQ(p.dims(), (std::vector<size_t>{1, 1, 1, 4}));
  EXPECT_EQ(f32s(p), (std::vector<float>{5.f / 4, 6.f / 4, 6.f / 4, 1.f}));
}

TEST(PoolCandle, MaxPool2d) {
  Tensor t = Tensor::from_vec(std::vector<float>{1, 2, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1, 5, 1, 1, 1},
                              {1, 1, 4, 4}, cpu());
  EXPECT_EQ(f32s(t.max_pool2d(2)), (std::vector<float>{2, 3, 5, 1}));
  EXPECT_EQ(f32s(t.reshape({1, 1, 2, 8}).max_pool2d(2)), (std::vector<float>{2, 3, 5, 1}));
}

TEST(PoolCandle, AvgPool2dPytorch) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, -0.0773f, -1.5630f, -2.8012f, -1.5059f, 0.3972f,  1.0852f,
                         0.4997f, 3.0616f,  1.6541f,  0.0964f,  -0.8338f, -1.6523f, -0.8323f, -0.1699f,
                         0.0823f, 0.3526f,  0.6843f,  0.2395f,  1.2279f,  -0.9287f, -1.7030f, 0.1370f,
                         0.6047f, 0.3770f,  -0.6266f, 0.3529f,  2.2013f,  -0.6836f, 0.2477f,  1.3127f},
      {1, 2, 4, 4}, cpu());
  EXPECT_EQ(round4(t.avg_pool2d(2)),
            (std::vector<float>{-1.1926f, -0.0395f, 0.2688f, 0.1871f, 0.1835f, -0.1606f, 0.6249f, 0.3217f}));
  EXPECT_EQ(round4(t.avg_pool2d(3)), (std::vector<float>{0.085f, 0.0078f}));
  EXPECT_EQ(round4(t.reshape({1, 1, 4, 8}).avg_pool2d(2)),
            (std::vector<float>{0.7745f, 0.0276f, -1.6983f, 0.12f, 0.3542f, 0.1625f, 0.4542f, -0.0014f}));
}

TEST(PoolCandle, UpsampleNearest2d) {
  Tensor t = arange_f32(6, {1, 1, 2, 3});
  Tensor u = t.upsample_nearest2d(4, 6);
  EXPECT_EQ(u.dims(), (std::vector<size_t>{1, 1, 4, 6}));
  EXPECT_EQ(f32s(u),
            (std::vector<float>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 3, 3, 4, 4, 5, 5}));
  EXPECT_EQ(f32s(t.interpolate2d(4, 6)), f32s(u));
}

// ---- candle-core/tests/bilinear_tests.rs --------------------------------------------------------

TEST(PoolCandle, Bilinear2xUpscale) {
  Tensor out = arange_f32(16, {1, 1, 4, 4}).upsample_bilinear2d(8, 8, false);
  test_util::expect_near_vec(
      f32s(out),
      {0.00f,  0.25f,  0.75f,  1.25f,  1.75f,  2.25f,  2.75f,  3.00f,  1.00f,  1.25f,  1.75f,  2.25f,  2.75f,
       3.25f,  3.75f,  4.00f,  3.00f,  3.25f,  3.75f,  4.25f,  4.75f,  5.25f,  5.75f,  6.00f,  5.00f,  5.25f,
       5.75f,  6.25f,  6.75f,  7.25f,  7.75f,  8.00f,  7.00f,  7.25f,  7.75f,  8.25f,  8.75f,  9.25f,  9.75f,
       10.00f, 9.00f,  9.25f,  9.75f,  10.25f, 10.75f, 11.25f, 11.75f, 12.00f, 11.00f, 11.25f, 11.75f, 12.25f,
       12.75f, 13.25f, 13.75f, 14.00f, 12.00f, 12.25f, 12.75f, 13.25f, 13.75f, 14.25f, 14.75f, 15.00f},
      1e-4f);
}

TEST(PoolCandle, BilinearDownscale) {
  Tensor out = arange_f32(64, {1, 1, 8, 8}).upsample_bilinear2d(4, 4, false);
  test_util::expect_near_vec(f32s(out),
                             {4.5f, 6.5f, 8.5f, 10.5f, 20.5f, 22.5f, 24.5f, 26.5f, 36.5f, 38.5f, 40.5f, 42.5f,
                              52.5f, 54.5f, 56.5f, 58.5f},
                             1e-4f);
}

TEST(PoolCandle, BilinearMultiChannel) {
  Tensor in = Tensor::from_vec(
      std::vector<float>{1.9269f,  1.4873f,  0.9007f,  -2.1055f, 0.6784f,  -1.2345f, -0.0431f, -1.6047f,
                         -0.7521f, 1.6487f,  -0.3925f, -1.4036f, -0.7279f, -0.5594f, -0.7688f, 0.7624f,
                         1.6423f,  -0.1596f, -0.4974f, 0.4396f,  -0.7581f, 1.0783f,  0.8008f,  1.6806f,
                         1.2791f,  1.2964f,  0.6105f,  1.3347f,  -0.2316f, 0.0418f,  -0.2516f, 0.8599f},
      {1, 2, 4, 4}, cpu());
  Tensor out = in.upsample_bilinear2d(8, 8, false);
  ASSERT_EQ(out.dims(), (std::vector<size_t>{1, 2, 8, 8}));
  test_util::expect_near_vec(f32s(out.get(0).get(0).get(0)),
                             {1.9269f, 1.8170f, 1.5972f, 1.3406f, 1.0474f, 0.1492f, -1.3540f, -2.1055f},
                             1e-3f);
  test_util::expect_near_vec(f32s(out.get(0).get(1).get(0)),
                             {1.6423f, 1.1918f, 0.2909f, -0.2440f, -0.4129f, -0.2632f, 0.2053f, 0.4396f},
                             1e-3f);
}

TEST(PoolCandle, BilinearAlignCornersTrue) {
  Tensor in = Tensor::from_vec(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2}, cpu());
  std::vector<float> got = f32s(in.upsample_bilinear2d(4, 4, true));
  test_util::expect_near_vec(got,
                             {1.0f, 1.3333f, 1.6667f, 2.0f, 1.6667f, 2.0f, 2.3333f, 2.6667f, 2.3333f, 2.6667f,
                              3.0f, 3.3333f, 3.0f, 3.3333f, 3.6667f, 4.0f},
                             1e-3f);
  EXPECT_NEAR(got[0], 1.f, 1e-5f);
  EXPECT_NEAR(got[3], 2.f, 1e-5f);
  EXPECT_NEAR(got[12], 3.f, 1e-5f);
  EXPECT_NEAR(got[15], 4.f, 1e-5f);
}

TEST(PoolCandle, BilinearScaleFactorEqualsSize) {
  Tensor in = arange_f32(16, {1, 1, 4, 4});
  test_util::expect_near_vec(f32s(in.upsample_bilinear2d_with_scale(2.0, 2.0, false)),
                             f32s(in.upsample_bilinear2d(8, 8, false)), 1e-6f);
}

TEST(PoolCandle, BilinearNonSquare) {
  Tensor out = arange_f32(24, {1, 1, 4, 6}).upsample_bilinear2d(8, 12, false);
  std::vector<float> want = {
      0.0f,  0.25f,  0.75f,  1.25f,  1.75f,  2.25f,  2.75f,  3.25f,  3.75f,  4.25f,  4.75f,  5.0f,
      1.5f,  1.75f,  2.25f,  2.75f,  3.25f,  3.75f,  4.25f,  4.75f,  5.25f,  5.75f,  6.25f,  6.5f,
      4.5f,  4.75f,  5.25f,  5.75f,  6.25f,  6.75f,  7.25f,  7.75f,  8.25f,  8.75f,  9.25f,  9.5f,
      7.5f,  7.75f,  8.25f,  8.75f,  9.25f,  9.75f,  10.25f, 10.75f, 11.25f, 11.75f, 12.25f, 12.5f,
      10.5f, 10.75f, 11.25f, 11.75f, 12.25f, 12.75f, 13.25f, 13.75f, 14.25f, 14.75f, 15.25f, 15.5f,
      13.5f, 13.75f, 14.25f, 14.75f, 15.25f, 15.75f, 16.25f, 16.75f, 17.25f, 17.75f, 18.25f, 18.5f,
      16.5f, 16.75f, 17.25f, 17.75f, 18.25f, 18.75f, 19.25f, 19.75f, 20.25f, 20.75f, 21.25f, 21.5f,
      18.0f, 18.25f, 18.75f, 19.25f, 19.75f, 20.25f, 20.75f, 21.25f, 21.75f, 22.25f, 22.75f, 23.0f};
  test_util::expect_near_vec(f32s(out), want, 1e-4f);
}

TEST(PoolCandle, BilinearTiny) {
  Tensor one = Tensor::from_vec(std::vector<float>{5.f}, {1, 1, 1, 1}, cpu());
  EXPECT_EQ(f32s(one.upsample_bilinear2d(3, 3, false)), std::vector<float>(9, 5.f));
  Tensor two = Tensor::from_vec(std::vector<float>{2.f, 8.f}, {1, 1, 1, 2}, cpu());
  std::vector<float> row = {2, 2, 4, 6, 8, 8};
  std::vector<float> want;
  for (int i = 0; i < 3; ++i) want.insert(want.end(), row.begin(), row.end());
  test_util::expect_near_vec(f32s(two.upsample_bilinear2d(3, 6, false)), want, 1e-6f);
}

TEST(PoolCandle, BilinearOutputDimensions) {
  using V = std::vector<size_t>;
  EXPECT_EQ(arange_f32(32, {1, 1, 4, 8}).upsample_bilinear2d(6, 12, false).dims(), (V{1, 1, 6, 12}));
  EXPECT_EQ(arange_f32(192, {4, 3, 4, 4}).upsample_bilinear2d(8, 8, false).dims(), (V{4, 3, 8, 8}));
  Tensor t = arange_f32(16, {1, 1, 4, 4});
  EXPECT_EQ(t.upsample_bilinear2d_with_scale(2.0, 3.0, false).dims(), (V{1, 1, 8, 12}));
  EXPECT_EQ(t.upsample_bilinear2d_with_scale(1.5, 1.5, false).dims(), (V{1, 1, 6, 6}));
  Tensor one = t.upsample_bilinear2d(1, 1, false);
  EXPECT_EQ(one.dims(), (V{1, 1, 1, 1}));
  // PyTorch: the 1x1 output samples the input at (1.5, 1.5), the mean of 5, 6, 9, 10
  EXPECT_FLOAT_EQ(f32s(one)[0], 7.5f);
  EXPECT_EQ(arange_f32(4, {1, 1, 2, 2}).upsample_bilinear2d_with_scale(5.0, 5.0, false).dims(),
            (V{1, 1, 10, 10}));
}

TEST(PoolCandle, BilinearIdentityAndAlignCornersDiffer) {
  Tensor t = arange_f32(16, {1, 1, 4, 4});
  EXPECT_EQ(f32s(t.upsample_bilinear2d(4, 4, false)), f32s(t));
  std::vector<float> a = f32s(t.upsample_bilinear2d(8, 8, false)),
                     b = f32s(t.upsample_bilinear2d(8, 8, true));
  float diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::fabs(a[i] - b[i]);
  EXPECT_GT(diff, 0.1f);
}

// ---- the PyTorch grid ------------------------------------------------------------------------

namespace {

const std::unordered_map<std::string, Tensor>& grid() {
  static const auto tensors =
      safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/pool_grid.safetensors", cpu());
  return tensors;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

std::pair<double, double> two_numbers(const std::string& s) {  // "3x4" or "1.5x2.5"
  size_t x = s.find('x');
  return {std::stod(s.substr(0, x)), std::stod(s.substr(x + 1))};
}

// Relative tolerance of a dtype's result against the reference.
double tolerance(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-12;
    case DType::F32: return 2e-6;
    case DType::F16: return 1e-3;
    case DType::BF16: return 8e-3;
    default: return 0;
  }
}

void expect_matches(const Tensor& got, const Tensor& want, const std::string& name) {
  ASSERT_EQ(got.dims(), want.dims()) << name;
  std::vector<double> g = got.to_dtype(DType::F64).flatten_to_vec<double>();
  std::vector<double> w = want.to_dtype(DType::F64).flatten_to_vec<double>();
  const double tol = tolerance(got.dtype());
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::fabs(g[i] - w[i]) > tol * std::max(1.0, std::fabs(w[i])) && bad++ < 3)
      ADD_FAILURE() << name << " at " << i << ": got " << g[i] << ", want " << w[i];
  }
}

// Runs `fn(input, what)` for each expected output named <prefix>/.../<what>.
size_t for_grid(const std::string& prefix,
                const std::function<Tensor(const Tensor&, const std::string&)>& fn) {
  size_t n = 0;
  for (const auto& [name, want] : grid()) {
    if (name.rfind(prefix + "/", 0) != 0) continue;
    const size_t slash = name.rfind('/');
    const std::string what = name.substr(slash + 1);
    if (what == "x") continue;
    const Tensor& x = grid().at(name.substr(0, slash) + "/x");
    SCOPED_TRACE(name);
    expect_matches(fn(x, what), want, name);
    ++n;
  }
  return n;
}

}  // namespace

TEST(PoolGrid, Pooling) {
  size_t n = for_grid("pool", [](const Tensor& x, const std::string& what) {
    auto parts = split(what, '_');  // avg, k2x3, s2x1
    auto [kh, kw] = two_numbers(parts[1].substr(1));
    auto [sh, sw] = two_numbers(parts[2].substr(1));
    std::array<size_t, 2> k{static_cast<size_t>(kh), static_cast<size_t>(kw)};
    std::array<size_t, 2> s{static_cast<size_t>(sh), static_cast<size_t>(sw)};
    return parts[0] == "avg" ? x.avg_pool2d_with_stride(k, s) : x.max_pool2d_with_stride(k, s);
  });
  EXPECT_EQ(n, 2u * 16 * (4 * 2 + 2));  // shapes x kernel/stride pairs x (4 floats x 2 ops + 2 ints)
}

TEST(PoolGrid, Nearest2d) {
  size_t n = for_grid("nearest2d", [](const Tensor& x, const std::string& what) {
    auto [h, w] = two_numbers(what);
    return x.upsample_nearest2d(static_cast<size_t>(h), static_cast<size_t>(w));
  });
  EXPECT_EQ(n, 6u * 13);
}

TEST(PoolGrid, Nearest1d) {
  size_t n = for_grid("nearest1d", [](const Tensor& x, const std::string& what) {
    return x.upsample_nearest1d(std::stoul(what));
  });
  EXPECT_EQ(n, 6u * 7);
}

TEST(PoolGrid, Bilinear) {
  size_t n = for_grid("bilinear", [](const Tensor& x, const std::string& what) {
    auto parts = split(what, '_');  // size, 3x4, ac1
    auto [a, b] = two_numbers(parts[1]);
    const bool ac = parts[2] == "ac1";
    if (parts[0] == "size") return x.upsample_bilinear2d(static_cast<size_t>(a), static_cast<size_t>(b), ac);
    return x.upsample_bilinear2d_with_scale(a, b, ac);
  });
  EXPECT_EQ(n, 4u * 2 * 23);  // dtypes x align_corners x (13 sizes + 10 scales)
}

// ---- semantics beyond the grid -----------------------------------------------------------------

TEST(PoolSemantics, NearestIndexIsExactWhereCandleRoundsDown) {
  // floor(49 * 2 / 98) = 1; candle's f64 ratio gives 0.9999999999999999 -> 0. PyTorch: 1.
  Tensor x = Tensor::from_vec(std::vector<float>{10.f, 20.f}, {1, 1, 2}, cpu());
  std::vector<float> v = f32s(x.upsample_nearest1d(98));
  EXPECT_EQ(v[48], 10.f);
  EXPECT_EQ(v[49], 20.f);
}

TEST(PoolSemantics, MaxPoolPropagatesNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vec(std::vector<float>{1, nan, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}, cpu());
  std::vector<float> v = f32s(x.max_pool2d(2));
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 8.f);
  std::vector<float> o = f32s(x.max_pool2d_with_stride({1, 3}, {1, 1}));  // overlapping windows
  EXPECT_TRUE(std::isnan(o[0]) && std::isnan(o[1]));
  EXPECT_EQ(o[2], 7.f);
  EXPECT_EQ(o[3], 8.f);
}

TEST(PoolSemantics, OverlappingWindows) {
  Tensor x = arange_f32(20, {1, 1, 4, 5});
  EXPECT_EQ(f32s(x.max_pool2d_with_stride({2, 2}, {1, 1})),
            (std::vector<float>{6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19}));
  EXPECT_EQ(f32s(x.avg_pool2d_with_stride({3, 3}, {1, 2})), (std::vector<float>{6, 8, 11, 13}));
}

TEST(PoolSemantics, IntegerMaxPoolAndNearestEveryDType) {
  for (DType dt : {DType::U8, DType::U32, DType::I16, DType::I32, DType::I64, DType::F8E4M3}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = Tensor::from_vec(std::vector<float>{1, 9, 3, 4, 5, 2, 7, 8, 0, 6, 11, 10}, {1, 1, 3, 4}, cpu())
                   .to_dtype(dt);
    Tensor m = x.max_pool2d(2);
    EXPECT_EQ(m.dtype(), dt);
    EXPECT_EQ(f32s(m), (std::vector<float>{9, 8}));
    Tensor u = x.upsample_nearest2d(2, 8);
    EXPECT_EQ(u.dtype(), dt);
    EXPECT_EQ(f32s(u), (std::vector<float>{1, 1, 9, 9, 3, 3, 4, 4, 5, 5, 2, 2, 7, 7, 8, 8}));
  }
}

TEST(PoolSemantics, BilinearDimThatKeepsItsSizeIgnoresTheScale) {
  // PyTorch 1.13: in 3 x 4, scale 1.7 x 1.1 -> out 5 x 4; the width (4 -> 4) is mapped one to
  // one although 1 / 1.1 would move the samples; the height uses 1 / 1.7:
  // row 1 samples (1 + 0.5) / 1.7 - 0.5 = 0.38235.
  Tensor x = arange_f32(12, {1, 1, 3, 4});
  Tensor y = x.upsample_bilinear2d_with_scale(1.7, 1.1, false);
  ASSERT_EQ(y.dims(), (std::vector<size_t>{1, 1, 5, 4}));
  std::vector<float> v = f32s(y);
  const float r1 = 4.f * (1.5f / 1.7f - 0.5f);
  test_util::expect_near_vec({v[0], v[1], v[2], v[3], v[4], v[5], v[16], v[19]},
                             {0, 1, 2, 3, r1, r1 + 1, 8, 11}, 1e-5f);
  EXPECT_EQ(f32s(x.upsample_bilinear2d_with_scale(1.2, 1.1, false)), f32s(x));
}

TEST(PoolSemantics, BilinearIdentityCopiesNonFiniteValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vec(std::vector<float>{1, inf, 3, 4}, {1, 1, 2, 2}, cpu());
  std::vector<float> v = f32s(x.upsample_bilinear2d(2, 2, false));
  EXPECT_EQ(v, (std::vector<float>{1, inf, 3, 4}));
}

TEST(PoolSemantics, EmptyOutputs) {
  Tensor x = Tensor::zeros({0, 3, 4, 4}, DType::F32, cpu());
  EXPECT_EQ(x.avg_pool2d(2).dims(), (std::vector<size_t>{0, 3, 2, 2}));
  EXPECT_EQ(x.max_pool2d(2).dims(), (std::vector<size_t>{0, 3, 2, 2}));
  EXPECT_EQ(x.upsample_nearest2d(8, 8).dims(), (std::vector<size_t>{0, 3, 8, 8}));
  EXPECT_EQ(x.upsample_bilinear2d(8, 8, true).dims(), (std::vector<size_t>{0, 3, 8, 8}));
  Tensor y = Tensor::ones({1, 2, 3, 3}, DType::F32, cpu());
  EXPECT_EQ(y.upsample_nearest2d(0, 5).elem_count(), 0u);
  EXPECT_EQ(y.reshape({1, 2, 9}).upsample_nearest1d(0).dims(), (std::vector<size_t>{1, 2, 0}));
}

// ---- layouts ---------------------------------------------------------------------------------

namespace {

std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> layout_ops(bool is_float) {
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"max k2 s1",
       [](const Tensor& t) {
         return t.max_pool2d_with_stride({2, 2}, {1, 1});
       }},
      {"max k3x2 s2x3",
       [](const Tensor& t) {
         return t.max_pool2d_with_stride({3, 2}, {2, 3});
       }},
      {"max 2x2", [](const Tensor& t) { return t.max_pool2d(2); }},
      {"nearest x2", [](const Tensor& t) { return t.upsample_nearest2d(14, 18); }},
      {"nearest 17x20", [](const Tensor& t) { return t.upsample_nearest2d(17, 20); }},
      {"nearest down", [](const Tensor& t) { return t.upsample_nearest2d(3, 4); }},
      {"nearest1d", [](const Tensor& t) { return t.get(0).upsample_nearest1d(19); }},
  };
  if (is_float) {
    ops.push_back({"avg 2x2", [](const Tensor& t) { return t.avg_pool2d(2); }});
    ops.push_back({"avg k3 s2x1", [](const Tensor& t) { return t.avg_pool2d_with_stride({3, 3}, {2, 1}); }});
    ops.push_back({"bilinear", [](const Tensor& t) { return t.upsample_bilinear2d(11, 20, false); }});
    ops.push_back({"bilinear ac", [](const Tensor& t) { return t.upsample_bilinear2d(5, 4, true); }});
    ops.push_back({"bilinear scale",
                   [](const Tensor& t) { return t.upsample_bilinear2d_with_scale(1.5, 0.7, false); }});
  }
  return ops;
}

// Views with the values of a [2, 3, 7, 9] tensor: transposed, narrowed/offset, permuted, broadcast.
std::vector<std::pair<std::string, Tensor>> views(DType dt) {
  Device dev = cpu();
  dev.set_seed(11);
  Tensor big = (Tensor::randn(0.f, 4.f, {3, 4, 10, 12}, dev)).to_dtype(dt);
  Tensor x = big.narrow(0, 1, 2).narrow(1, 1, 3).narrow(2, 2, 7).narrow(3, 1, 9);  // offset + strides
  std::vector<std::pair<std::string, Tensor>> v;
  v.push_back({"narrowed", x});
  v.push_back({"transposed", x.transpose(2, 3).contiguous().transpose(2, 3)});
  v.push_back({"permuted", x.permute({1, 0, 2, 3}).contiguous().permute({1, 0, 2, 3})});
  v.push_back({"transposed hw of 9x7", x.contiguous().transpose(2, 3)});
  v.push_back({"broadcast c", x.narrow(1, 1, 1).broadcast_as({2, 3, 7, 9})});
  v.push_back({"broadcast w", x.narrow(3, 4, 1).broadcast_as({2, 3, 7, 9})});
  v.push_back({"offset", test_util::offset_view(x.contiguous(), 3)});
  return v;
}

}  // namespace

TEST(PoolLayouts, StridedEqualsContiguous) {
  for (DType dt : {DType::F32, DType::F16, DType::F64, DType::U8, DType::I64}) {
    const bool is_float = dtype_is_float(dt);
    for (const auto& [vname, v] : views(dt)) {
      ASSERT_FALSE(v.is_contiguous() && vname != "offset") << vname;
      Tensor c = v.contiguous();
      for (const auto& [oname, op] : layout_ops(is_float)) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + vname + " " + oname);
        EXPECT_EQ(bytes_of(op(v)), bytes_of(op(c)));
      }
    }
  }
}

// ---- determinism ------------------------------------------------------------------------------

TEST(PoolDeterminism, SameBytesForOneTwoThreeThreads) {
  ThreadCountGuard guard;
  Device dev = cpu();
  dev.set_seed(5);
  Tensor x = Tensor::randn(0.f, 1.f, {2, 8, 128, 130}, dev);  // 266K elements
  Tensor xh = x.to_dtype(DType::BF16);
  Tensor xt = x.transpose(2, 3);
  std::vector<std::pair<const char*, std::function<Tensor()>>> ops = {
      {"avg 2x2", [&] { return x.avg_pool2d(2); }},
      {"avg k3 s1",
       [&] {
         return x.avg_pool2d_with_stride({3, 3}, {1, 1});
       }},
      {"avg bf16 k3 s2",
       [&] {
         return xh.avg_pool2d_with_stride({3, 3}, {2, 2});
       }},
      {"max 2x2", [&] { return x.max_pool2d(2); }},
      {"max transposed k2 s1",
       [&] {
         return xt.max_pool2d_with_stride({2, 2}, {1, 1});
       }},
      {"nearest x2", [&] { return x.upsample_nearest2d(256, 260); }},
      {"nearest 200x150", [&] { return x.upsample_nearest2d(200, 150); }},
      {"nearest1d",
       [&] {
         return x.reshape({16, 128, 130}).upsample_nearest1d(300);
       }},
      {"bilinear", [&] { return x.upsample_bilinear2d(200, 190, false); }},
      {"bilinear ac bf16", [&] { return xh.upsample_bilinear2d(100, 300, true); }},
      {"bilinear scale", [&] { return xt.upsample_bilinear2d_with_scale(1.7, 0.6, false); }},
  };
  for (auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    set_num_threads(1);
    auto one = bytes_of(fn());
    ASSERT_GT(one.size(), 32u * 1024u);
    for (size_t n : {2, 3}) {
      set_num_threads(n);
      EXPECT_EQ(bytes_of(fn()), one) << n << " threads";
    }
  }
}

// Outputs above 64 MB are written with streaming stores (src/cpu/pool.cpp): the same values as
// the per-channel results, which stay below that size.
TEST(PoolLarge, NearestStreamedOutputEqualsPerChannel) {
  Device dev = cpu();
  dev.set_seed(9);
  struct Case {
    Shape in;
    size_t oh, ow;
    DType dt;
  };
  // f32 x8 (replicated rows, 84 MB); bf16 to an odd, non-integer width (gathered rows, 69 MB).
  for (const Case& c :
       {Case{{1, 5, 256, 256}, 2048, 2048, DType::F32}, Case{{1, 2, 300, 301}, 4800, 3613, DType::BF16}}) {
    Tensor x = Tensor::randn(0.f, 1.f, c.in, dev).to_dtype(c.dt);
    Tensor big = x.upsample_nearest2d(c.oh, c.ow);
    ASSERT_GT(big.elem_count() * dtype_size(c.dt), size_t{64} << 20);
    for (size_t ch = 0; ch < c.in.dims()[1]; ++ch) {
      SCOPED_TRACE(ch);
      Tensor one = x.narrow(1, ch, 1).upsample_nearest2d(c.oh, c.ow);
      EXPECT_TRUE(bytes_of(big.narrow(1, ch, 1)) == bytes_of(one));
    }
  }
}

// ---- errors -----------------------------------------------------------------------------------

TEST(PoolErrors, KernelLargerThanInput) {
  Tensor x = Tensor::zeros({1, 2, 3, 5}, DType::F32, cpu());
  expect_error([&] { x.avg_pool2d(4); }, ErrorKind::InvalidArgument, {"avg_pool2d", "[1, 2, 3, 5]"});
  expect_error(
      [&] {
        x.max_pool2d_with_stride({2, 6}, {1, 1});
      },
      ErrorKind::InvalidArgument, {"max_pool2d", "[1, 2, 3, 5]"});
}

TEST(PoolErrors, ZeroKernelOrStride) {
  Tensor x = Tensor::zeros({1, 2, 3, 5}, DType::F32, cpu());
  expect_error([&] { x.avg_pool2d(0); }, ErrorKind::InvalidArgument, {"avg_pool2d", "[1, 2, 3, 5]"});
  expect_error(
      [&] {
        x.max_pool2d_with_stride({2, 2}, {0, 1});
      },
      ErrorKind::InvalidArgument, {"max_pool2d", "[1, 2, 3, 5]"});
}

TEST(PoolErrors, WrongRank) {
  Tensor x3 = Tensor::zeros({2, 3, 5}, DType::F32, cpu());
  Tensor x4 = Tensor::zeros({1, 2, 3, 5}, DType::F32, cpu());
  expect_error([&] { x3.avg_pool2d(2); }, ErrorKind::ShapeMismatch, {"avg_pool2d", "[2, 3, 5]"});
  expect_error([&] { x3.max_pool2d(2); }, ErrorKind::ShapeMismatch, {"max_pool2d", "[2, 3, 5]"});
  expect_error([&] { x3.upsample_nearest2d(4, 4); }, ErrorKind::ShapeMismatch,
               {"upsample_nearest2d", "[2, 3, 5]"});
  expect_error([&] { x4.upsample_nearest1d(4); }, ErrorKind::ShapeMismatch,
               {"upsample_nearest1d", "[1, 2, 3, 5]"});
  expect_error([&] { x3.upsample_bilinear2d(4, 4, false); }, ErrorKind::ShapeMismatch,
               {"upsample_bilinear2d", "[2, 3, 5]"});
}

TEST(PoolErrors, FloatOnlyOpsRejectIntegers) {
  Tensor x = Tensor::zeros({1, 1, 4, 4}, DType::I64, cpu());
  expect_error([&] { x.avg_pool2d(2); }, ErrorKind::UnsupportedOp, {"avg_pool2d", "i64"});
  expect_error([&] { x.to_dtype(DType::U8).upsample_bilinear2d(8, 8, false); }, ErrorKind::UnsupportedOp,
               {"upsample_bilinear2d", "u8"});
  expect_error([&] { x.upsample_bilinear2d_with_scale(2.0, 2.0, true); }, ErrorKind::UnsupportedOp,
               {"upsample_bilinear2d", "i64"});
}

TEST(PoolErrors, BadScales) {
  Tensor x = Tensor::zeros({1, 1, 4, 4}, DType::F32, cpu());
  for (double s :
       {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    expect_error([&] { x.upsample_bilinear2d_with_scale(s, 2.0, false); }, ErrorKind::InvalidArgument,
                 {"upsample_bilinear2d_with_scale", "[1, 1, 4, 4]"});
  }
}

TEST(PoolErrors, EmptyInputToNonEmptyOutput) {
  Tensor x = Tensor::zeros({1, 1, 0, 4}, DType::F32, cpu());
  expect_error([&] { x.upsample_nearest2d(2, 2); }, ErrorKind::InvalidArgument,
               {"upsample_nearest2d", "[1, 1, 0, 4]"});
  expect_error([&] { x.upsample_bilinear2d(2, 2, false); }, ErrorKind::InvalidArgument,
               {"upsample_bilinear2d", "[1, 1, 0, 4]"});
  expect_error(
      [&] {
        Tensor::zeros({1, 1, 0}, DType::F32, cpu()).upsample_nearest1d(3);
      },
      ErrorKind::InvalidArgument, {"upsample_nearest1d", "[1, 1, 0]"});
}
