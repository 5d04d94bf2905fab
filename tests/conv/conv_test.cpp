// conv1d / conv2d / conv2d_fused: candle's conv tests with their numbers, then layouts,
// dtypes, groups, the fused epilogue, the scratch cap, determinism and bad input, each
// against a plain double-precision reference written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

namespace candle {
namespace {

using test_util::expect_near_vec;

std::vector<float> round4(const Tensor& t) {
  std::vector<float> v = t.to_dtype(DType::F32).flatten_to_vec<float>();
  for (float& x : v) x = std::round(x * 1e4f) / 1e4f;
  return v;
}

// Reference conv2d in double: x [b, c_in, h, w], k [c_out, c_in / g, kh, kw].
std::vector<float> ref_conv2d(const Tensor& x, const Tensor& k, size_t pad, size_t stride, size_t dil,
                              size_t groups) {
  const auto xv = x.to_dtype(DType::F64).flatten_to_vec<double>();
  const auto kv = k.to_dtype(DType::F64).flatten_to_vec<double>();
  const size_t b = x.dim(0), ci = x.dim(1), h = x.dim(2), w = x.dim(3);
  const size_t co = k.dim(0), cig = k.dim(1), kh = k.dim(2), kw = k.dim(3);
  const size_t oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
  const size_t ow = (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
  const size_t cog = co / groups;
  std::vector<float> out(b * co * oh * ow);
  for (size_t n = 0; n < b; ++n)
    for (size_t o = 0; o < co; ++o)
      for (size_t y = 0; y < oh; ++y)
        for (size_t xx = 0; xx < ow; ++xx) {
          double s = 0;
          const size_t g = o / cog;
          for (size_t c = 0; c < cig; ++c)
            for (size_t ky = 0; ky < kh; ++ky)
              for (size_t kx = 0; kx < kw; ++kx) {
                const long iy = long(y * stride + ky * dil) - long(pad);
                const long ix = long(xx * stride + kx * dil) - long(pad);
                if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
                s += xv[((n * ci + g * cig + c) * h + size_t(iy)) * w + size_t(ix)] *
                     kv[((o * cig + c) * kh + ky) * kw + kx];
              }
          out[((n * co + o) * oh + y) * ow + xx] = float(s);
        }
  return out;
}

Tensor randn(const Shape& s, DType dt = DType::F32) {
  return Tensor::randn(0.0, 1.0, s, DType::F32, Device::cpu()).to_dtype(dt);
}

std::vector<float> f32(const Tensor& t) { return t.to_dtype(DType::F32).flatten_to_vec<float>(); }

// ---- candle's conv_tests.rs ----------------------------------------------------------

const std::vector<float> kT1d = {0.4056f, -0.8689f, -0.0773f, -1.5630f, 1.2279f,  -0.9287f, -1.7030f,
                                 0.1370f, 0.1866f,  0.4145f,  1.8025f,  -0.1536f, 2.2013f,  -0.6836f,
                                 0.2477f, 1.3127f,  -0.6957f, 0.3278f,  -1.0124f, 0.5599f};
const std::vector<float> kW1d = {-0.8404f, -0.3490f, 0.0130f,  1.3123f,  0.1763f,  -1.9249f,
                                 1.4270f,  0.9421f,  0.8670f,  -0.7181f, -1.1111f, 0.8869f,
                                 -1.2429f, 1.8357f,  1.6052f,  -1.3844f, 0.3951f,  -1.2036f,
                                 0.6686f,  1.6261f,  -0.6451f, -0.0840f, -1.4247f, 0.5512f};

TEST(CandleConv, conv1d) {
  Tensor t = Tensor::from_vec(kT1d, {1, 4, 5}, Device::cpu());
  Tensor w = Tensor::from_vec(kW1d, {2, 4, 3}, Device::cpu());
  Tensor res = t.conv1d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(round4(res), (std::vector<float>{2.6357f, -1.3336f, 4.1393f, -1.1784f, 3.5675f, 0.5069f}));
  res = t.conv1d(w, 1, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 5}));
  EXPECT_EQ(round4(res), (std::vector<float>{2.4509f, 2.6357f, -1.3336f, 4.1393f, 0.5657f, 1.8091f, -1.1784f,
                                             3.5675f, 0.5069f, 3.3352f}));
}

TEST(CandleConv, conv1d_small) {
  Tensor t =
      Tensor::from_vec(std::vector<float>{0.4056f, -0.8689f, -0.0773f, -1.5630f}, {1, 1, 4}, Device::cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{1.f, 0.f, 0.f}, {1, 1, 3}, Device::cpu());
  Tensor res = t.conv1d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 2}));
  EXPECT_EQ(round4(res), (std::vector<float>{0.4056f, -0.8689f}));
  res = t.conv1d(w, 1, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 4}));
  EXPECT_EQ(round4(res), (std::vector<float>{0.0f, 0.4056f, -0.8689f, -0.0773f}));
}

const std::vector<float> kT2d = {
    0.4056f,  -0.8689f, -0.0773f, -1.5630f, -2.8012f, -1.5059f, 0.3972f,  1.0852f,  0.4997f,  3.0616f,
    1.6541f,  0.0964f,  -0.8338f, -1.6523f, -0.8323f, -0.1699f, 0.0823f,  0.3526f,  0.6843f,  0.2395f,
    1.2279f,  -0.9287f, -1.7030f, 0.1370f,  0.6047f,  0.3770f,  -0.6266f, 0.3529f,  2.2013f,  -0.6836f,
    0.2477f,  1.3127f,  -0.2260f, 0.2622f,  -1.2974f, -0.8140f, -0.8404f, -0.3490f, 0.0130f,  1.3123f,
    1.7569f,  -0.3956f, -1.8255f, 0.1727f,  -0.3538f, 2.6941f,  1.0529f,  0.4219f,  -0.2071f, 1.1586f,
    0.4717f,  0.3865f,  -0.5690f, -0.5010f, -0.1310f, 0.7796f,  0.6630f,  -0.2021f, 2.6090f,  0.2049f,
    0.6466f,  -0.5042f, -0.0603f, -1.6538f, -1.2429f, 1.8357f,  1.6052f,  -1.3844f, 0.3323f,  -1.3712f,
    0.9634f,  -0.4799f, -0.6451f, -0.0840f, -1.4247f, 0.5512f,  -0.1747f, -0.5509f, -0.3742f, 0.3790f,
    -0.4431f, -0.4720f, -0.7890f, 0.2620f,  0.7875f,  0.5377f,  -0.6779f, -0.8088f, 1.9098f,  1.2006f,
    -0.8000f, -0.4983f, 1.5480f,  0.8265f,  -0.1025f, 0.5138f,  0.5748f,  0.3821f,  -0.4607f, 0.0085f};
const std::vector<float> kW2d = {
    -0.9325f, 0.6451f,  -0.8537f, 0.2378f,  0.8764f,  -0.1832f, 0.2987f,  -0.6488f, -0.2273f,
    -2.4184f, -0.1192f, -0.4821f, -0.5079f, -0.5766f, -2.4729f, 1.6734f,  0.4558f,  0.2851f,
    1.1514f,  -0.9013f, 1.0662f,  -0.1817f, -0.0259f, 0.1709f,  0.5367f,  0.7513f,  0.8086f,
    -2.2586f, -0.5027f, 0.9141f,  -1.3086f, -1.3343f, -1.5669f, -0.1657f, 0.7958f,  0.1432f,
    0.3896f,  -0.4501f, 0.1667f,  0.0714f,  -0.0952f, 1.2970f,  -0.1674f, -0.3178f, 1.0677f,
    0.3060f,  0.7080f,  0.1914f,  1.1679f,  -0.3602f, 1.9265f,  -1.8626f, -0.5112f, -0.0982f,
    0.2621f,  0.6565f,  0.5908f,  1.0089f,  -0.1646f, 1.8032f,  -0.6286f, 0.2016f,  -0.3370f,
    1.2555f,  0.8009f,  -0.6488f, -0.4652f, -1.5685f, 1.5860f,  0.5583f,  0.4623f,  0.6026f};
const std::vector<float> kR2d = {-4.2812f, 2.0923f, 5.2187f, 7.5184f,  0.752f,   -14.9426f,
                                 10.0087f, 4.391f,  0.2918f, 1.6715f,  10.389f,  3.6023f,
                                 -4.2808f, 0.2672f, 5.3646f, -5.2023f, -2.1955f, -9.4075f};

TEST(CandleConv, conv2d) {
  Tensor t = Tensor::from_vec(kT2d, {1, 4, 5, 5}, Device::cpu());
  Tensor w = Tensor::from_vec(kW2d, {2, 4, 3, 3}, Device::cpu());
  Tensor res = t.conv2d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 3, 3}));
  EXPECT_EQ(round4(res), kR2d);
}

// conv2d_grad's forward value: the loss sum(conv^2) = 741.12 (to 2 decimals).
TEST(CandleConv, conv2d_loss_value) {
  Tensor t = Tensor::from_vec(kT2d, {1, 4, 5, 5}, Device::cpu());
  Tensor w = Tensor::from_vec(kW2d, {2, 4, 3, 3}, Device::cpu());
  const float loss = t.conv2d(w, 0, 1, 1, 1).sqr().sum_all().to_scalar<float>();
  EXPECT_FLOAT_EQ(std::round(loss * 100.f) / 100.f, 741.12f);
}

TEST(CandleConv, conv2d_small) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, 0.6843f, 0.2395f, 1.2279f, -0.9287f, -1.7030f, 0.1370f, 0.1866f,
                         0.4145f, -0.6266f, 0.3529f, 2.2013f, -0.6836f, 0.2477f, 1.3127f, -0.6957f, 0.3278f},
      {1, 2, 3, 3}, Device::cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{-0.9259f, 1.3017f}, {1, 2, 1, 1}, Device::cpu());
  Tensor res = t.conv2d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 3, 3}));
  const std::vector<float> inner = {0.164f,  -0.0111f, -0.1742f, 2.6437f, -2.0268f,
                                    1.1823f, 3.2855f,  -1.0324f, 0.2539f};
  EXPECT_EQ(round4(res), inner);
  res = t.conv2d(w, 2, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 7, 7}));
  std::vector<float> want(49, 0.0f);
  for (size_t y = 0; y < 3; ++y)
    for (size_t x = 0; x < 3; ++x) want[(y + 2) * 7 + x + 2] = inner[y * 3 + x];
  EXPECT_EQ(round4(res), want);
}

TEST(CandleConv, conv2d_smaller) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, 0.6843f, 0.2395f, 1.2279f, -0.9287f, -1.7030f, 0.1370f, 0.1866f},
      {1, 1, 3, 3}, Device::cpu());
  Tensor w = Tensor::ones({1, 1, 3, 3}, DType::F32, Device::cpu());
  Tensor res = t.conv2d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 1, 1}));
  EXPECT_EQ(round4(res), (std::vector<float>{-0.6197f}));
}

TEST(CandleConv, conv2d_non_square) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, -0.0773f, -1.5630f, -2.8012f, -1.5059f, 0.3972f, 1.0852f, 0.4997f,
                         3.0616f, 1.6541f, 0.0964f, -0.8338f, -1.6523f, -0.8323f, -0.1699f},
      {1, 2, 4, 2}, Device::cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{-1.1351f, 1.3841f}, {1, 2, 1, 1}, Device::cpu());
  Tensor res = t.conv2d(w, 0, 1, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 4, 2}));
  EXPECT_EQ(round4(res),
            (std::vector<float>{0.2312f, 5.2238f, 2.3772f, 1.9076f, 2.0256f, -0.5776f, -1.6028f, -1.467f}));
}

// ---- against the reference ------------------------------------------------------------

struct Case {
  size_t b, ci, h, w, co, kh, kw, pad, stride, dil, groups;
};

void check_case(const Case& c, DType dt, float tol) {
  Tensor x = randn({c.b, c.ci, c.h, c.w}, dt);
  Tensor k = randn({c.co, c.ci / c.groups, c.kh, c.kw}, dt);
  Tensor got = x.conv2d(k, c.pad, c.stride, c.dil, c.groups);
  std::vector<float> want = ref_conv2d(x, k, c.pad, c.stride, c.dil, c.groups);
  ASSERT_EQ(got.elem_count(), want.size());
  std::vector<float> g = f32(got);
  // rounding grows with the sqrt of the number of products summed (unit-normal inputs)
  const float scale = std::sqrt(float(c.ci / c.groups * c.kh * c.kw));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (scale + std::fabs(want[i]))) << "at " << i;
}

TEST(Conv2d, matches_reference_f32_shapes) {
  const std::vector<Case> cases = {
      {1, 3, 17, 19, 8, 3, 3, 1, 1, 1, 1},   {2, 5, 9, 8, 4, 5, 5, 2, 2, 1, 1},
      {1, 4, 12, 11, 6, 3, 3, 2, 1, 2, 2},   {3, 6, 7, 7, 6, 3, 3, 1, 1, 1, 6},
      {1, 8, 10, 10, 16, 1, 1, 0, 1, 1, 1},  {1, 8, 10, 10, 16, 1, 1, 0, 2, 1, 1},
      {1, 2, 5, 9, 3, 7, 3, 3, 1, 1, 1},     {1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1},
      {2, 32, 13, 15, 48, 3, 3, 1, 1, 1, 1}, {1, 16, 9, 9, 12, 1, 1, 1, 1, 1, 4}};
  // Winograd F(4x4, 3x3) (the 3x3 stride-1 cases with >= 16 channels) loses a few more bits
  for (const Case& c : cases) check_case(c, DType::F32, 5e-5f);
}

TEST(Conv2d, matches_reference_f64) {
  check_case({2, 6, 11, 9, 4, 3, 3, 1, 2, 1, 2}, DType::F64, 1e-6f);
  check_case({1, 64, 12, 12, 64, 3, 3, 1, 1, 1, 1}, DType::F64, 1e-6f);
}

TEST(Conv2d, matches_reference_f16_bf16) {
  check_case({1, 8, 11, 10, 6, 3, 3, 1, 1, 1, 1}, DType::F16, 1e-2f);
  check_case({2, 4, 9, 9, 4, 1, 1, 0, 1, 1, 1}, DType::F16, 1e-2f);
  check_case({1, 8, 11, 10, 6, 3, 3, 1, 2, 1, 2}, DType::BF16, 3e-2f);
}

TEST(Conv2d, f64_exact_small_integers) {
  // integer inputs: every product and sum is exact in f64
  Tensor x = Tensor::arange_step(0.0, 2.0 * 3 * 6 * 5, 1.0, Device::cpu())
                 .to_dtype(DType::F64)
                 .reshape({2, 3, 6, 5});
  Tensor k = Tensor::arange_step(-20.0, 34.0, 1.0, Device::cpu()).to_dtype(DType::F64).reshape({2, 3, 3, 3});
  Tensor got = x.conv2d(k, 1, 2, 1, 1);
  std::vector<float> want = ref_conv2d(x, k, 1, 2, 1, 1);
  std::vector<double> g = got.flatten_to_vec<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], double(want[i])) << "at " << i;
}

TEST(Conv1d, matches_reference_via_conv2d) {
  // conv1d == conv2d with h = 1 (padding only along the length)
  Tensor x = randn({2, 6, 23});
  Tensor k = randn({4, 3, 5});
  Tensor got = x.conv1d(k, 2, 2, 2, 2);
  // direct check: reference with stride/dilation along the length only
  const auto xv = f32(x), kv = f32(k);
  const size_t lo = (23 + 4 - 2 * 4 - 1) / 2 + 1;
  ASSERT_EQ(got.dims(), (std::vector<size_t>{2, 4, lo}));
  std::vector<float> g = f32(got);
  for (size_t n = 0; n < 2; ++n)
    for (size_t o = 0; o < 4; ++o)
      for (size_t l = 0; l < lo; ++l) {
        double s = 0;
        const size_t grp = o / 2;
        for (size_t c = 0; c < 3; ++c)
          for (size_t t = 0; t < 5; ++t) {
            const long il = long(l * 2 + t * 2) - 2;
            if (il < 0 || il >= 23) continue;
            s += double(xv[(n * 6 + grp * 3 + c) * 23 + size_t(il)]) * kv[(o * 3 + c) * 5 + t];
          }
        EXPECT_NEAR(g[(n * 4 + o) * lo + l], s, 2e-5 * (1 + std::fabs(s)));
      }
}

// ---- layouts -----------------------------------------------------------------------------

// A [b, c, h, w] tensor with the same values stored as [c, b, h, w] and viewed back.
Tensor permuted_view(const Tensor& t) {
  Tensor stored = t.transpose(0, 1).contiguous();
  return stored.transpose(0, 1);
}

TEST(Conv2d, strided_inputs_and_kernels_match_contiguous) {
  Tensor x = randn({2, 6, 13, 11});
  Tensor k = randn({8, 3, 3, 3});
  const std::vector<uint8_t> want = [&] {
    Tensor r = x.conv2d(k, 1, 1, 1, 2);
    std::vector<float> v = r.flatten_to_vec<float>();
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }();
  auto same = [&](const Tensor& xi, const Tensor& ki) {
    ASSERT_FALSE(xi.is_contiguous() && ki.is_contiguous() && xi.layout().start_offset() == 0 &&
                 ki.layout().start_offset() == 0);
    std::vector<float> v = xi.conv2d(ki, 1, 1, 1, 2).flatten_to_vec<float>();
    ASSERT_EQ(v.size() * 4, want.size());
    EXPECT_EQ(std::memcmp(v.data(), want.data(), want.size()), 0);
  };
  same(permuted_view(x), k);                          // transposed input
  same(x, permuted_view(k));                          // transposed kernel
  same(test_util::offset_view(x), k);                 // input at an offset
  same(x, test_util::offset_view(k, 3));              // kernel at an offset (contiguous view)
  same(test_util::offset_view(x), permuted_view(k));  // both
  // narrowed: the kernel is the middle 8 of 12 output channels, the input a narrow of width
  Tensor kbig = Tensor::cat({randn({2, 3, 3, 3}), k, randn({2, 3, 3, 3})}, 0);
  same(x, kbig.narrow(0, 2, 8));
  Tensor xbig = Tensor::cat({randn({2, 6, 13, 3}), x, randn({2, 6, 13, 2})}, 3);
  same(xbig.narrow(3, 3, 11), k);
}

TEST(Conv1d, strided_kernel_view_at_offset) {
  // the class of candle's bug: a kernel view at a non-zero offset must be read from there
  Tensor x = randn({1, 4, 16});
  Tensor kbig = randn({5, 4, 3});
  Tensor k = kbig.narrow(0, 2, 3);
  Tensor want = x.conv1d(k.contiguous(), 1, 1, 1, 1);
  Tensor got = x.conv1d(k, 1, 1, 1, 1);
  EXPECT_EQ(got.flatten_to_vec<float>(), want.flatten_to_vec<float>());
  Tensor xt = x.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_EQ(xt.conv1d(k, 1, 1, 1, 1).flatten_to_vec<float>(), want.flatten_to_vec<float>());
}

// ---- fused epilogue ----------------------------------------------------------------------

TEST(Conv2dFused, bias_and_activation_match_unfused_f32) {
  Tensor x = randn({2, 8, 15, 14});
  Tensor k = randn({12, 8, 3, 3});
  Tensor bias = randn({12});
  for (UnaryOp act : {UnaryOp::Relu, UnaryOp::Silu, UnaryOp::Gelu}) {
    Tensor got = x.conv2d_fused(k, bias, 1, 1, 1, 1, act);
    Tensor want = x.conv2d(k, 1, 1, 1, 1).broadcast_add(bias.reshape({1, 12, 1, 1}));
    want = act == UnaryOp::Relu ? want.relu() : (act == UnaryOp::Silu ? want.silu() : want.gelu());
    expect_near_vec(f32(got), f32(want), 1e-5f);
  }
  // bias only, activation only
  expect_near_vec(f32(x.conv2d_fused(k, bias, 0, 2, 1, 1, std::nullopt)),
                  f32(x.conv2d(k, 0, 2, 1, 1).broadcast_add(bias.reshape({1, 12, 1, 1}))), 1e-5f);
  expect_near_vec(f32(x.conv2d_fused(k, std::nullopt, 0, 1, 2, 1, UnaryOp::Relu)),
                  f32(x.conv2d(k, 0, 1, 2, 1).relu()), 0.0f);
}

TEST(Conv2dFused, f16_and_pointwise) {
  Tensor x = randn({1, 16, 9, 9}, DType::F16);
  Tensor k = randn({8, 16, 1, 1}, DType::F16);
  Tensor bias = randn({8}, DType::F16);
  Tensor got = x.conv2d_fused(k, bias, 0, 1, 1, 1, UnaryOp::Relu);
  Tensor want = x.to_dtype(DType::F32)
                    .conv2d(k.to_dtype(DType::F32), 0, 1, 1, 1)
                    .broadcast_add(bias.to_dtype(DType::F32).reshape({1, 8, 1, 1}))
                    .relu();
  EXPECT_EQ(got.dtype(), DType::F16);
  expect_near_vec(f32(got), f32(want), 2e-2f);
  Tensor x32 = randn({1, 16, 9, 9});
  Tensor k32 = randn({8, 16, 1, 1});
  Tensor b32 = randn({8});
  expect_near_vec(f32(x32.conv2d_fused(k32, b32, 0, 1, 1, 1, UnaryOp::Relu)),
                  f32(x32.conv2d(k32, 0, 1, 1, 1).broadcast_add(b32.reshape({1, 8, 1, 1})).relu()), 1e-5f);
}

TEST(Conv2dFused, bias_shape_checked) {
  Tensor x = randn({1, 4, 5, 5});
  Tensor k = randn({3, 4, 3, 3});
  EXPECT_THROW(x.conv2d_fused(k, randn({4}), 0, 1, 1, 1, std::nullopt), Error);
  EXPECT_THROW(x.conv2d_fused(k, randn({3}, DType::F64), 0, 1, 1, 1, std::nullopt), Error);
}

// ---- scratch cap -----------------------------------------------------------------------

TEST(ConvScratch, default_is_256_mib_and_settable) {
  set_conv_scratch_limit(0);
  if (std::getenv("CANDLE_CONV_SCRATCH_MB") == nullptr) {
    EXPECT_EQ(conv_scratch_limit(), size_t{256} << 20);
  }
  set_conv_scratch_limit(size_t{1} << 20);
  EXPECT_EQ(conv_scratch_limit(), size_t{1} << 20);
  set_conv_scratch_limit(0);
}

TEST(ConvScratch, tiny_cap_gives_same_result) {
  Tensor x = randn({2, 16, 33, 31});
  Tensor k = randn({8, 16, 5, 5});
  std::vector<float> want = x.conv2d(k, 2, 1, 1, 1).flatten_to_vec<float>();
  set_conv_scratch_limit(4096);  // smaller than one panel row: blocks of a few positions
  std::vector<float> got = x.conv2d(k, 2, 1, 1, 1).flatten_to_vec<float>();
  set_conv_scratch_limit(0);
  // the default run takes Winograd (kernel padded to 16 outputs), the capped one im2col
  // blocks: the same values up to their rounding (outputs are sums of 400 products ~ 20)
  expect_near_vec(got, want, 1e-3f);
  expect_near_vec(got, ref_conv2d(x, k, 2, 1, 1, 1), 1e-3f);
}

// ---- determinism -------------------------------------------------------------------------

using test_util::bytes_of;

TEST(ConvDeterminism, same_bytes_for_1_2_3_threads) {
  struct D {
    Shape x, k;
    size_t pad, stride, groups;
    DType dt;
  };
  const std::vector<D> cases = {
      {{1, 64, 48, 40}, {64, 64, 3, 3}, 1, 1, 1, DType::F32},  // Winograd-eligible
      {{2, 3, 70, 66}, {32, 3, 3, 3}, 1, 1, 1, DType::F32},
      {{1, 32, 60, 60}, {16, 32, 1, 1}, 0, 1, 1, DType::F32},
      {{1, 16, 64, 50}, {16, 8, 5, 5}, 2, 2, 2, DType::F32},
      {{1, 16, 64, 64}, {16, 16, 3, 3}, 1, 1, 1, DType::F16},
      {{1, 16, 64, 64}, {16, 16, 3, 3}, 1, 1, 1, DType::F64},
  };
  for (const D& c : cases) {
    Tensor x = randn(c.x, c.dt), k = randn(c.k, c.dt);
    Tensor bias = randn({c.k[0]}, c.dt);
    set_num_threads(1);
    auto one = bytes_of(x.conv2d_fused(k, bias, c.pad, c.stride, 1, c.groups, UnaryOp::Silu));
    for (size_t n : {2, 3}) {
      set_num_threads(n);
      EXPECT_EQ(bytes_of(x.conv2d_fused(k, bias, c.pad, c.stride, 1, c.groups, UnaryOp::Silu)), one)
          << "threads " << n << " x " << c.x.to_string();
    }
    set_num_threads(0);
  }
}

// ---- bad input -----------------------------------------------------------------------------

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ConvErrors, clear_messages) {
  Tensor x = randn({1, 4, 8, 8});
  expect_error(
      [&] {
        x.conv2d(randn({2, 3, 3, 3}), 0, 1, 1, 1);
      },
      ErrorKind::ShapeMismatch, "in_channel mismatch");
  expect_error(
      [&] {
        x.conv2d(randn({2, 4, 9, 3}), 0, 1, 1, 1);
      },
      ErrorKind::ShapeMismatch, "larger than the padded input");
  expect_error(
      [&] {
        x.conv2d(randn({2, 4, 3, 3}), 0, 1, 5, 1);
      },
      ErrorKind::ShapeMismatch, "larger than the padded input");
  expect_error([&] { x.conv2d(randn({2, 4, 3, 3}), 0, 0, 1, 1); }, ErrorKind::InvalidArgument, "stride");
  expect_error([&] { x.conv2d(randn({2, 4, 3, 3}), 0, 1, 0, 1); }, ErrorKind::InvalidArgument, "dilation");
  expect_error(
      [&] {
        x.conv2d(randn({3, 1, 3, 3}), 0, 1, 1, 3);
      },
      ErrorKind::ShapeMismatch, "do not divide the input");
  expect_error(
      [&] {
        x.conv2d(randn({3, 2, 3, 3}), 0, 1, 1, 2);
      },
      ErrorKind::ShapeMismatch, "do not divide the output");
  expect_error([&] { x.conv2d(randn({2, 4, 3}), 0, 1, 1, 1); }, ErrorKind::ShapeMismatch, "conv2d");
  expect_error(
      [&] {
        x.conv2d(randn({2, 4, 3, 3}, DType::F64), 0, 1, 1, 1);
      },
      ErrorKind::DTypeMismatch, "conv2d");
  Tensor xi = Tensor::zeros({1, 4, 8, 8}, DType::I64, Device::cpu());
  expect_error(
      [&] {
        xi.conv2d(Tensor::zeros({2, 4, 3, 3}, DType::I64, Device::cpu()), 0, 1, 1, 1);
      },
      ErrorKind::UnsupportedOp, "conv2d");
  Tensor x1 = randn({1, 4, 8});
  expect_error([&] { x1.conv1d(randn({2, 3, 3}), 0, 1, 1, 1); }, ErrorKind::ShapeMismatch, "conv1d");
  expect_error(
      [&] {
        x1.conv1d(randn({2, 4, 11}), 1, 1, 1, 1);
      },
      ErrorKind::ShapeMismatch, "larger than the padded input");
  expect_error([&] { x1.conv1d(randn({2, 4, 3}), 0, 0, 1, 1); }, ErrorKind::InvalidArgument, "stride");
}

TEST(Conv2d, kernel_exactly_the_padded_input) {
  Tensor x = randn({1, 2, 3, 4});
  Tensor k = randn({1, 2, 5, 6});
  Tensor r = x.conv2d(k, 1, 1, 1, 1);
  EXPECT_EQ(r.dims(), (std::vector<size_t>{1, 1, 1, 1}));
  expect_near_vec(f32(r), ref_conv2d(x, k, 1, 1, 1, 1), 1e-4f);
}

TEST(Conv2d, empty_batch) {
  Tensor x = Tensor::zeros({0, 4, 8, 8}, DType::F32, Device::cpu());
  Tensor r = x.conv2d(randn({2, 4, 3, 3}), 1, 1, 1, 1);
  EXPECT_EQ(r.dims(), (std::vector<size_t>{0, 2, 8, 8}));
}

}  // namespace
}  // namespace candle

namespace candle {
namespace {

// ---- Winograd F(4x4, 3x3) path (f32, 3x3, stride 1, >= 16 channels) -------------------

// The same conv through the im2col path: a scratch cap too small for Winograd blocks.
Tensor conv_im2col_path(const Tensor& x, const Tensor& k, const std::optional<Tensor>& bias, size_t pad,
                        std::optional<UnaryOp> act) {
  set_conv_scratch_limit(size_t{16} << 10);  // under 4 Winograd tiles of these shapes
  Tensor r = x.conv2d_fused(k, bias, pad, 1, 1, 1, act);
  set_conv_scratch_limit(0);
  return r;
}

TEST(ConvWinograd, matches_im2col_within_1e4_relative) {
  for (size_t pad : {0, 1, 2}) {
    Tensor x = randn({2, 24, 37, 29});
    Tensor k = randn({20, 24, 3, 3});
    Tensor got = x.conv2d(k, pad, 1, 1, 1);
    Tensor want = conv_im2col_path(x, k, std::nullopt, pad, std::nullopt);
    ASSERT_EQ(got.dims(), want.dims());
    const auto g = f32(got), w = f32(want);
    const float scale = std::sqrt(24.f * 9.f);  // typical magnitude of a sum of 216 unit products
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], w[i], 1e-4f * scale) << "pad " << pad << " at " << i;
    expect_near_vec(g, ref_conv2d(x, k, pad, 1, 1, 1), 1e-4f * scale);
  }
}

TEST(ConvWinograd, five_by_five_as_four_sub_kernels) {
  for (size_t pad : {0, 2}) {
    Tensor x = randn({1, 16, 26, 23});
    Tensor k = randn({24, 16, 5, 5});
    Tensor got = x.conv2d(k, pad, 1, 1, 1);
    Tensor want = conv_im2col_path(x, k, std::nullopt, pad, std::nullopt);
    ASSERT_EQ(got.dims(), want.dims());
    const float scale = std::sqrt(16.f * 25.f);
    expect_near_vec(f32(got), f32(want), 1e-4f * scale);
    expect_near_vec(f32(got), ref_conv2d(x, k, pad, 1, 1, 1), 1e-4f * scale);
  }
}

TEST(ConvWinograd, fused_bias_relu) {
  Tensor x = randn({1, 32, 21, 23});
  Tensor k = randn({16, 32, 3, 3});
  Tensor b = randn({16});
  Tensor got = x.conv2d_fused(k, b, 1, 1, 1, 1, UnaryOp::Relu);
  Tensor want = conv_im2col_path(x, k, b, 1, UnaryOp::Relu);
  expect_near_vec(f32(got), f32(want), 2e-3f);
  // relu really applied: no negatives, and some zeros
  const auto g = f32(got);
  EXPECT_EQ(*std::min_element(g.begin(), g.end()), 0.0f);
}

TEST(ConvWinograd, strided_views_give_identical_bytes) {
  Tensor x = randn({1, 32, 30, 26});
  Tensor k = randn({32, 32, 3, 3});
  const auto want = x.conv2d(k, 1, 1, 1, 1).flatten_to_vec<float>();
  EXPECT_EQ(permuted_view(x).conv2d(k, 1, 1, 1, 1).flatten_to_vec<float>(), want);
  EXPECT_EQ(x.conv2d(permuted_view(k), 1, 1, 1, 1).flatten_to_vec<float>(), want);
  EXPECT_EQ(
      test_util::offset_view(x, 1).conv2d(test_util::offset_view(k, 2), 1, 1, 1, 1).flatten_to_vec<float>(),
      want);
}

}  // namespace
// Few output channels (<= 8, f32, stride 1) take the direct kernel: every count, kernel size,
// padding and row width (below, at and past its 16-wide blocks), against the reference.
TEST(ConvDirectFewOutputs, MatchesTheReference) {
  for (size_t co : {1, 3, 4, 8}) {
    for (auto [k, pad, w] :
         std::vector<std::array<size_t, 3>>{{3, 1, 7}, {3, 0, 16}, {5, 2, 37}, {1, 0, 20}, {3, 2, 33}}) {
      Tensor x = randn({2, 5, 9, w});
      Tensor kern = randn({co, 5, k, k});
      std::vector<float> got = x.conv2d(kern, pad, 1, 1, 1).flatten_to_vec<float>();
      expect_near_vec(got, ref_conv2d(x, kern, pad, 1, 1, 1), 1e-4f);
    }
  }
}

}  // namespace candle
