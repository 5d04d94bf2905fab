// conv_transpose1d / conv_transpose2d: candle's expected values, a PyTorch grid
// (tests/data/convt_grid.safetensors, made by tools/gen_convt_fixtures.py), layouts,
// thread-count determinism and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"

using namespace candle;

namespace {

const Device& cpu() {
  static const Device d = Device::cpu();
  return d;
}

// Rounds to 4 decimals, as candle's test_utils::to_vec1_round.
std::vector<float> round4(const Tensor& t) {
  std::vector<float> v = t.to_dtype(DType::F32).flatten_to_vec<float>();
  for (float& x : v) x = std::round(x * 1e4f) / 1e4f;
  return v;
}

void expect_round4(const Tensor& t, const std::vector<float>& want) {
  std::vector<float> got = round4(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1.5e-4f) << "at " << i;
}

using test_util::bytes_of;

// A plain reference in double: x [b, c_in, h, w], k [c_in, c_out/g, kh, kw]. A 1-D case is
// passed with w == kw == 1 and gets no padding/stride along that axis.
std::vector<double> naive_conv_transpose2d(const Tensor& x, const Tensor& k, size_t pad, size_t out_pad,
                                           size_t stride, size_t dil, size_t groups,
                                           std::vector<size_t>& out_dims) {
  const bool one_d = x.dims()[3] == 1 && k.dims()[3] == 1;
  const auto xd = x.dims(), kd = k.dims();
  const size_t b = xd[0], c_in = xd[1], h = xd[2], w = xd[3];
  const size_t cog = kd[1], kh = kd[2], kw = kd[3], cig = c_in / groups, c_out = cog * groups;
  const size_t oh = (h - 1) * stride - 2 * pad + dil * (kh - 1) + out_pad + 1;
  const size_t ow = one_d ? 1 : (w - 1) * stride - 2 * pad + dil * (kw - 1) + out_pad + 1;
  const size_t pad_x = one_d ? 0 : pad, stride_x = one_d ? 1 : stride, dil_x = one_d ? 1 : dil;
  out_dims = {b, c_out, oh, ow};
  std::vector<double> xv = x.to_dtype(DType::F64).flatten_to_vec<double>();
  std::vector<double> kv = k.to_dtype(DType::F64).flatten_to_vec<double>();
  std::vector<double> out(b * c_out * oh * ow, 0.0);
  for (size_t bi = 0; bi < b; ++bi)
    for (size_t ci = 0; ci < c_in; ++ci) {
      const size_t gi = ci / cig;
      for (size_t col = 0; col < cog; ++col)
        for (size_t iy = 0; iy < h; ++iy)
          for (size_t ix = 0; ix < w; ++ix)
            for (size_t ky = 0; ky < kh; ++ky)
              for (size_t kx = 0; kx < kw; ++kx) {
                const long oy = long(iy * stride + ky * dil) - long(pad);
                const long ox = long(ix * stride_x + kx * dil_x) - long(pad_x);
                if (oy < 0 || ox < 0 || oy >= long(oh) || ox >= long(ow)) continue;
                const size_t co = gi * cog + col;
                out[((bi * c_out + co) * oh + size_t(oy)) * ow + size_t(ox)] +=
                    xv[((bi * c_in + ci) * h + iy) * w + ix] * kv[((ci * cog + col) * kh + ky) * kw + kx];
              }
    }
  return out;
}

void expect_matches_naive(const Tensor& got, const Tensor& x, const Tensor& k, size_t pad, size_t out_pad,
                          size_t stride, size_t dil, size_t groups, double tol) {
  std::vector<size_t> dims;
  std::vector<double> want = naive_conv_transpose2d(x, k, pad, out_pad, stride, dil, groups, dims);
  Tensor g4 = got.rank() == 3 ? got.unsqueeze(3) : got;
  ASSERT_EQ(g4.dims(), dims);
  std::vector<double> gv = g4.to_dtype(DType::F64).flatten_to_vec<double>();
  size_t bad = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    if (std::abs(gv[i] - want[i]) > tol * (1.0 + std::abs(want[i])) && ++bad < 10) {
      ADD_FAILURE() << "at " << i << ": got " << gv[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

// candle's conv tests inputs (torch.manual_seed(4242)).
Tensor candle_t1d() {
  return Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, -0.0773f, -1.5630f, 1.2279f,  -0.9287f, -1.7030f,
                         0.1370f, 0.1866f,  0.4145f,  1.8025f,  -0.1536f, 2.2013f,  -0.6836f,
                         0.2477f, 1.3127f,  -0.6957f, 0.3278f,  -1.0124f, 0.5599f},
      {1, 4, 5}, cpu());
}
Tensor candle_w1d() {
  return Tensor::from_vec(
      std::vector<float>{-0.8404f, -0.3490f, 0.0130f,  1.3123f, 0.1763f,  -1.9249f, 1.4270f,  0.9421f,
                         0.8670f,  -0.7181f, -1.1111f, 0.8869f, -1.2429f, 1.8357f,  1.6052f,  -1.3844f,
                         0.3951f,  -1.2036f, 0.6686f,  1.6261f, -0.6451f, -0.0840f, -1.4247f, 0.5512f},
      {2, 4, 3}, cpu());
}
Tensor candle_t2d() {
  return Tensor::from_vec(
      std::vector<float>{
          0.4056f,  -0.8689f, -0.0773f, -1.5630f, -2.8012f, -1.5059f, 0.3972f,  1.0852f,  0.4997f,  3.0616f,
          1.6541f,  0.0964f,  -0.8338f, -1.6523f, -0.8323f, -0.1699f, 0.0823f,  0.3526f,  0.6843f,  0.2395f,
          1.2279f,  -0.9287f, -1.7030f, 0.1370f,  0.6047f,  0.3770f,  -0.6266f, 0.3529f,  2.2013f,  -0.6836f,
          0.2477f,  1.3127f,  -0.2260f, 0.2622f,  -1.2974f, -0.8140f, -0.8404f, -0.3490f, 0.0130f,  1.3123f,
          1.7569f,  -0.3956f, -1.8255f, 0.1727f,  -0.3538f, 2.6941f,  1.0529f,  0.4219f,  -0.2071f, 1.1586f,
          0.4717f,  0.3865f,  -0.5690f, -0.5010f, -0.1310f, 0.7796f,  0.6630f,  -0.2021f, 2.6090f,  0.2049f,
          0.6466f,  -0.5042f, -0.0603f, -1.6538f, -1.2429f, 1.8357f,  1.6052f,  -1.3844f, 0.3323f,  -1.3712f,
          0.9634f,  -0.4799f, -0.6451f, -0.0840f, -1.4247f, 0.5512f,  -0.1747f, -0.5509f, -0.3742f, 0.3790f,
          -0.4431f, -0.4720f, -0.7890f, 0.2620f,  0.7875f,  0.5377f,  -0.6779f, -0.8088f, 1.9098f,  1.2006f,
          -0.8000f, -0.4983f, 1.5480f,  0.8265f,  -0.1025f, 0.5138f,  0.5748f,  0.3821f,  -0.4607f, 0.0085f},
      {1, 4, 5, 5}, cpu());
}
Tensor candle_w2d() {
  return Tensor::from_vec(
      std::vector<float>{-0.9325f, 0.6451f,  -0.8537f, 0.2378f,  0.8764f,  -0.1832f, 0.2987f,  -0.6488f,
                         -0.2273f, -2.4184f, -0.1192f, -0.4821f, -0.5079f, -0.5766f, -2.4729f, 1.6734f,
                         0.4558f,  0.2851f,  1.1514f,  -0.9013f, 1.0662f,  -0.1817f, -0.0259f, 0.1709f,
                         0.5367f,  0.7513f,  0.8086f,  -2.2586f, -0.5027f, 0.9141f,  -1.3086f, -1.3343f,
                         -1.5669f, -0.1657f, 0.7958f,  0.1432f,  0.3896f,  -0.4501f, 0.1667f,  0.0714f,
                         -0.0952f, 1.2970f,  -0.1674f, -0.3178f, 1.0677f,  0.3060f,  0.7080f,  0.1914f,
                         1.1679f,  -0.3602f, 1.9265f,  -1.8626f, -0.5112f, -0.0982f, 0.2621f,  0.6565f,
                         0.5908f,  1.0089f,  -0.1646f, 1.8032f,  -0.6286f, 0.2016f,  -0.3370f, 1.2555f,
                         0.8009f,  -0.6488f, -0.4652f, -1.5685f, 1.5860f,  0.5583f,  0.4623f,  0.6026f},
      {2, 4, 3, 3}, cpu());
}

}  // namespace

// ---- candle's tests (candle-core/tests/conv_tests.rs) ---------------------------------------

// conv1d: the kernel transposed to [4, 2, 3], both as a strided view and contiguous.
TEST(ConvTranspose1d, CandleGroups1) {
  Tensor w = candle_w1d().transpose(0, 1);
  for (const Tensor& k : {w, w.contiguous()}) {
    Tensor res = candle_t1d().conv_transpose1d(k, 0, 0, 1, 1, 1);
    EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 7}));
    expect_round4(res, {0.0699f, -1.2899f, 8.3018f, 5.5873f, 2.4572f, -2.6143f, -0.0706f, 1.8765f, 4.8318f,
                        1.1538f, 4.7076f, -5.9745f, -0.8276f, 1.621f});
  }
}

TEST(ConvTranspose1d, CandleGroups2) {
  Tensor w = candle_w1d().transpose(0, 1);
  for (const Tensor& k : {w, w.contiguous()}) {
    Tensor res = candle_t1d().conv_transpose1d(k, 0, 0, 1, 1, 2);
    EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 4, 7}));
    expect_round4(
        res, {-1.5596f, -1.8099f, 2.0407f,  4.8764f, -0.1743f, -0.735f, -0.7819f, 0.7816f, 3.8152f, -0.5926f,
              2.2515f,  -5.1844f, -0.3157f, 1.4721f, 1.6295f,  0.52f,   6.2611f,  0.7109f, 2.6315f, -1.8793f,
              0.7113f,  1.0949f,  1.0166f,  1.7464f, 2.4561f,  -0.79f,  -0.5119f, 0.1488f});
  }
}

TEST(ConvTranspose2d, CandleConv2d) {
  Tensor res = candle_t2d().conv_transpose2d(candle_w2d().transpose(0, 1), 0, 0, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 7, 7}));
  expect_round4(
      res,
      {-1.9918f, 2.6797f,  -0.4599f, -1.6037f, 1.4131f,  -2.4012f, 2.9277f,  1.8016f,   -3.5361f, 1.0757f,
       3.5395f,  -8.2168f, -3.2023f, 0.5375f,  0.8243f,  1.8675f,  7.8929f,  -4.0746f,  -6.4415f, 5.1139f,
       1.6889f,  0.2722f,  8.9679f,  3.3477f,  1.8514f,  -4.2896f, -3.8228f, -7.5632f,  -8.5412f, -5.8142f,
       -7.1587f, -1.6095f, 0.4651f,  0.2748f,  -2.0985f, 2.0833f,  -0.6482f, -12.1692f, -4.1284f, -2.9765f,
       -0.0656f, -4.5114f, 5.307f,   2.6957f,  2.3087f,  1.0478f,  0.7808f,  -1.1519f,  -0.9579f, 1.089f,
       0.1872f,  -0.6408f, -0.9897f, 0.8503f,  1.1019f,  -0.9211f, -0.1741f, -0.2915f,  4.2472f,  1.9417f,
       1.65f,    0.6303f,  -4.7131f, 1.6555f,  2.4026f,  -2.9293f, 2.9953f,  0.5328f,   3.5873f,  -0.9621f,
       -1.4289f, -3.2787f, 4.1747f,  -6.0341f, -4.6341f, -5.7945f, 4.142f,   7.5973f,   6.4431f,  5.9872f,
       2.1639f,  -8.6566f, 3.3143f,  -3.4059f, -0.8775f, -3.048f,  11.6543f, 0.6442f,   2.3218f,  -0.4765f,
       1.1516f,  -5.5423f, -2.5188f, 1.0754f,  -0.0563f, -2.9386f, -1.1504f, 1.0171f});
}

TEST(ConvTranspose2d, CandleConv2dDilation2) {
  Tensor res = candle_t2d().conv_transpose2d(candle_w2d().transpose(0, 1), 0, 0, 1, 2);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 2, 9, 9}));
  expect_round4(
      res,
      {-1.9918f, 3.1652f,  -0.6778f, -4.3442f, 4.4351f,  0.6652f,  -3.0124f, -0.6031f, 2.9277f,  2.7036f,
       -1.7156f, -0.3969f, 1.0516f,  1.6381f,  -2.8886f, -0.205f,  2.4682f,  -1.0499f, -0.9459f, 3.1631f,
       3.707f,   -4.8369f, -8.5166f, -1.4496f, -2.7559f, -3.2698f, 1.4376f,  -0.2157f, 3.7786f,  -2.0252f,
       -4.2633f, 3.6731f,  -1.5142f, 5.9391f,  -0.2622f, -0.141f,  -6.8121f, -3.1744f, 1.5945f,  3.0637f,
       -9.6088f, 1.4446f,  2.9489f,  -3.0082f, -7.3822f, 0.2371f,  3.3303f,  0.3861f,  2.2646f,  -4.6784f,
       4.1235f,  -0.0109f, 0.3176f,  -0.03f,   -2.5339f, -2.9564f, -3.4518f, -4.4594f, -9.1873f, -1.9709f,
       -0.4676f, 0.51f,    -3.5024f, 4.007f,   0.3067f,  -2.2954f, 1.1105f,  -0.1992f, 1.6372f,  -2.9268f,
       0.2807f,  -1.2787f, 5.307f,   1.1317f,  1.3518f,  0.9049f,  3.8116f,  -0.4075f, -0.8874f, -0.2241f,
       -0.9579f, 1.089f,   -0.6483f, 0.0726f,  -0.4752f, -1.3283f, 1.7103f,  1.0703f,  0.1076f,  -0.9211f,
       -0.8629f, 0.1376f,  0.3202f,  2.0955f,  0.9696f,  2.8988f,  -1.0012f, 1.5049f,  -0.1278f, 1.9286f,
       -1.5255f, -2.9563f, 2.4589f,  3.3611f,  -0.6951f, 0.3525f,  -1.7724f, -5.9861f, 1.1226f,  2.1561f,
       3.6417f,  4.7546f,  -0.692f,  4.4126f,  -5.1902f, 6.0805f,  2.3185f,  1.0111f,  0.3604f,  0.6432f,
       -3.6605f, 7.9517f,  -9.2955f, -5.2988f, -3.7803f, -2.0642f, 3.3172f,  -1.7967f, -3.6576f, -2.0942f,
       1.3158f,  0.112f,   -1.7405f, 2.9167f,  0.7957f,  5.1001f,  1.8995f,  -1.8639f, 1.1262f,  9.9629f,
       2.683f,   -3.6319f, -1.1607f, 0.5856f,  -4.8445f, -0.5642f, 4.2317f,  0.0856f,  1.2267f,  -0.5712f,
       1.736f,   1.0997f,  0.6908f,  -5.5423f, -1.1831f, -1.2176f, 0.0843f,  0.0446f,  -0.7545f, -2.4798f,
       -0.0827f, 1.0171f});
}

// conv2d_small: a 1x1 kernel, then the input transposed to [2, 1, 3, 3] (a strided view).
TEST(ConvTranspose2d, CandleSmall) {
  Tensor t = Tensor::from_vec(
      std::vector<float>{0.4056f, -0.8689f, 0.6843f, 0.2395f, 1.2279f, -0.9287f, -1.7030f, 0.1370f, 0.1866f,
                         0.4145f, -0.6266f, 0.3529f, 2.2013f, -0.6836f, 0.2477f, 1.3127f, -0.6957f, 0.3278f},
      {1, 2, 3, 3}, cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{-0.9259f, 1.3017f}, {1, 2, 1, 1}, cpu());
  Tensor res = t.conv_transpose2d(w.transpose(0, 1), 0, 0, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{1, 1, 3, 3}));
  expect_round4(res, {0.164f, -0.0111f, -0.1742f, 2.6437f, -2.0268f, 1.1823f, 3.2855f, -1.0324f, 0.2539f});
  res = t.transpose(0, 1).conv_transpose2d(w, 0, 0, 1, 1);
  EXPECT_EQ(res.dims(), (std::vector<size_t>{2, 2, 3, 3}));
  expect_round4(res,
                {-0.3755f, 0.8045f,  -0.6336f, -0.2218f, -1.1369f, 0.8599f,  1.5768f,  -0.1268f, -0.1728f,
                 0.528f,   -1.131f,  0.8908f,  0.3118f,  1.5984f,  -1.2089f, -2.2168f, 0.1783f,  0.2429f,
                 -0.3838f, 0.5802f,  -0.3268f, -2.0382f, 0.6329f,  -0.2293f, -1.2154f, 0.6441f,  -0.3035f,
                 0.5396f,  -0.8156f, 0.4594f,  2.8654f,  -0.8898f, 0.3224f,  1.7087f,  -0.9056f, 0.4267f});
}

// ---- small hand-checked cases ---------------------------------------------------------------

TEST(ConvTranspose2d, OverlappingKernelSums) {
  Tensor x = Tensor::from_vec(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2}, cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2}, cpu());
  Tensor y = x.conv_transpose2d(w, 0, 0, 1, 1);
  EXPECT_EQ(y.flatten_to_vec<float>(), (std::vector<float>{1, 4, 4, 6, 20, 16, 9, 24, 16}));
}

// stride 2, padding 1, output_padding 1: the last row/column only gets contributions that
// padding does not cut (here none from the 1x1 input: zeros).
TEST(ConvTranspose1d, StridePaddingOutputPadding) {
  Tensor x = Tensor::from_vec(std::vector<float>{1, 10}, {1, 1, 2}, cpu());
  Tensor w = Tensor::from_vec(std::vector<float>{1, 2, 3}, {1, 1, 3}, cpu());
  // l_out = (2-1)*2 - 2 + 2 + 1 + 1 = 4; full (unpadded) output: [1, 2, 13, 20, 30, 0]
  Tensor y = x.conv_transpose1d(w, 1, 1, 2, 1, 1);
  EXPECT_EQ(y.flatten_to_vec<float>(), (std::vector<float>{2, 13, 20, 30}));
}

TEST(ConvTranspose1d, EmptyBatchGivesEmptyOutput) {
  Tensor x = Tensor::zeros({0, 4, 5}, DType::F32, cpu());
  Tensor w = Tensor::zeros({4, 3, 2}, DType::F32, cpu());
  Tensor y = x.conv_transpose1d(w, 0, 0, 2, 1, 2);
  EXPECT_EQ(y.dims(), (std::vector<size_t>{0, 6, 10}));
}

// ---- PyTorch grid ----------------------------------------------------------------------------

namespace {

const std::unordered_map<std::string, Tensor>& grid() {
  static const auto tensors =
      safetensors::load(std::string(CANDLE_TEST_DATA_DIR) + "/convt_grid.safetensors", Device::cpu());
  return tensors;
}

// |got - want| <= tol * (1 + |want|), with the reference in its own dtype.
void check_grid(const std::string& op, const std::string& dt, double tol) {
  size_t cases = 0;
  for (size_t i = 0; i < 64; ++i) {
    const std::string prefix = op + "/" + dt + "/" + std::to_string(i) + "/";
    auto it = grid().find(prefix + "x");
    if (it == grid().end()) continue;
    ++cases;
    const Tensor& x = it->second;
    const Tensor& w = grid().at(prefix + "w");
    const Tensor& want = grid().at(prefix + "y");
    std::vector<int64_t> p = grid().at(prefix + "p").flatten_to_vec<int64_t>();
    Tensor got = op == "c1d" ? x.conv_transpose1d(w, size_t(p[0]), size_t(p[1]), size_t(p[2]), size_t(p[3]),
                                                  size_t(p[4]))
                             : x.conv_transpose2d(w, size_t(p[0]), size_t(p[1]), size_t(p[2]), size_t(p[3]));
    SCOPED_TRACE(prefix + " x " + x.shape().to_string() + " w " + w.shape().to_string());
    ASSERT_EQ(got.dims(), want.dims());
    ASSERT_EQ(got.dtype(), want.dtype());
    std::vector<double> g = got.to_dtype(DType::F64).flatten_to_vec<double>();
    std::vector<double> e = want.to_dtype(DType::F64).flatten_to_vec<double>();
    for (size_t j = 0; j < g.size(); ++j) ASSERT_NEAR(g[j], e[j], tol * (1 + std::abs(e[j]))) << "at " << j;
  }
  EXPECT_GE(cases, 8u);
}

}  // namespace

TEST(ConvTransposeGrid, Conv1dF32) { check_grid("c1d", "f32", 1e-5); }
TEST(ConvTransposeGrid, Conv1dF64) { check_grid("c1d", "f64", 1e-12); }
// f16/bf16: computed in f32 and rounded once, as the reference; one ulp for the sum order.
TEST(ConvTransposeGrid, Conv1dF16) { check_grid("c1d", "f16", 1e-3); }
TEST(ConvTransposeGrid, Conv1dBF16) { check_grid("c1d", "bf16", 8e-3); }
TEST(ConvTransposeGrid, Conv2dF32) { check_grid("c2d", "f32", 1e-5); }
TEST(ConvTransposeGrid, Conv2dF64) { check_grid("c2d", "f64", 1e-12); }
TEST(ConvTransposeGrid, Conv2dF16) { check_grid("c2d", "f16", 1e-3); }
TEST(ConvTransposeGrid, Conv2dBF16) { check_grid("c2d", "bf16", 8e-3); }

// ---- layouts: strided views give the same bytes as contiguous operands -----------------------

namespace {

// x [2, 6, 9] stored as [6, 2, 9] and viewed transposed, at an offset.
Tensor strided_view_1d(const Tensor& x) {
  Tensor stored = test_util::offset_view(x.transpose(0, 1).contiguous(), 3);
  return stored.transpose(0, 1);
}

}  // namespace

TEST(ConvTransposeLayout, Conv1dViewsEqualContiguous) {
  Device::cpu().set_seed(7);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = Tensor::randn(0.0, 1.0, {2, 6, 9}, dt, cpu());
    Tensor w = Tensor::randn(0.0, 1.0, {6, 2, 3}, dt, cpu());
    Tensor want = x.conv_transpose1d(w, 1, 1, 2, 1, 3);
    Tensor xv = strided_view_1d(x);
    ASSERT_FALSE(xv.is_contiguous());
    // the kernel stored as [3, 2, 6] (k outermost), permuted back to [6, 2, 3]
    Tensor wv = w.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
    ASSERT_FALSE(wv.is_contiguous());
    EXPECT_EQ(bytes_of(xv.conv_transpose1d(w, 1, 1, 2, 1, 3)), bytes_of(want)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(x.conv_transpose1d(wv, 1, 1, 2, 1, 3)), bytes_of(want)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(xv.conv_transpose1d(wv, 1, 1, 2, 1, 3)), bytes_of(want)) << dtype_name(dt);
    if (dt == DType::F32)
      expect_matches_naive(want.unsqueeze(3), x.unsqueeze(3), w.unsqueeze(3), 1, 1, 2, 1, 3, 1e-5);
  }
}

TEST(ConvTransposeLayout, Conv2dViewsEqualContiguous) {
  Device::cpu().set_seed(8);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = Tensor::randn(0.0, 1.0, {2, 3, 5, 7}, dt, cpu());
    Tensor w = Tensor::randn(0.0, 1.0, {3, 4, 3, 2}, dt, cpu());
    Tensor want = x.conv_transpose2d(w, 1, 1, 2, 1);
    // input stored channels-last ([b, h, w, c]) and permuted to [b, c, h, w]
    Tensor xv = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    // kernel: the [c_out, c_in, kh, kw] storage of a conv2d weight, transposed (candle's
    // strided-kernel case), then narrowed out of a larger one (an offset view)
    Tensor wt = w.transpose(0, 1).contiguous().transpose(0, 1);
    Tensor wbig = Tensor::cat({Tensor::zeros({3, 4, 2, 3}, dt, cpu()), w.transpose(2, 3).contiguous()}, 0);
    Tensor wn = wbig.narrow(0, 3, 3).transpose(2, 3);
    ASSERT_FALSE(xv.is_contiguous());
    ASSERT_FALSE(wt.is_contiguous());
    ASSERT_FALSE(wn.is_contiguous());
    EXPECT_EQ(bytes_of(xv.conv_transpose2d(w, 1, 1, 2, 1)), bytes_of(want)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(x.conv_transpose2d(wt, 1, 1, 2, 1)), bytes_of(want)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(xv.conv_transpose2d(wn, 1, 1, 2, 1)), bytes_of(want)) << dtype_name(dt);
    if (dt == DType::F32) expect_matches_naive(want, x, w, 1, 1, 2, 1, 1, 1e-5);
  }
}

// Stride-0 (broadcast) operands: the same bytes as their materialised copies.
TEST(ConvTransposeLayout, BroadcastOperands) {
  Device::cpu().set_seed(9);
  Tensor row = Tensor::randn(0.0f, 1.0f, {1, 1, 4, 5}, cpu());
  Tensor xb = row.broadcast_as({2, 3, 4, 5});
  Tensor w = Tensor::randn(0.0f, 1.0f, {3, 2, 2, 2}, cpu());
  Tensor wb = Tensor::randn(0.0f, 1.0f, {1, 2, 2, 2}, cpu()).broadcast_as({3, 2, 2, 2});
  EXPECT_EQ(bytes_of(xb.conv_transpose2d(w, 0, 0, 2, 1)),
            bytes_of(xb.contiguous().conv_transpose2d(w, 0, 0, 2, 1)));
  EXPECT_EQ(bytes_of(xb.conv_transpose2d(wb, 0, 0, 2, 1)),
            bytes_of(xb.contiguous().conv_transpose2d(wb.contiguous(), 0, 0, 2, 1)));
}

// ---- larger shapes against a plain reference, and thread-count determinism ---------------

namespace {

struct ThreadCount {
  explicit ThreadCount(size_t n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(0); }
};

template <typename Fn>
void expect_same_bytes_for_threads(Fn&& fn) {
  std::vector<uint8_t> one;
  {
    ThreadCount t(1);
    one = bytes_of(fn());
  }
  for (size_t n : {2, 3}) {
    ThreadCount t(n);
    EXPECT_EQ(bytes_of(fn()), one) << n << " threads";
  }
}

}  // namespace

// U-Net upsampling shape (k 2, stride 2: no overlap, one pass) and k 4 stride 2 (overlap,
// two passes), > 32K input elements.
TEST(ConvTransposeThreads, Conv2dStride2Deterministic) {
  Device::cpu().set_seed(10);
  Tensor x = Tensor::randn(0.0f, 1.0f, {2, 16, 40, 44}, cpu());
  for (size_t k : {2, 3, 4}) {
    Tensor w = Tensor::randn(0.0f, 1.0f, {16, 8, k, k}, cpu());
    const size_t pad = k / 2 - (k == 2 ? 1 : 0), out_pad = k == 3 ? 1 : 0;
    expect_same_bytes_for_threads([&] { return x.conv_transpose2d(w, pad, out_pad, 2, 1); });
    expect_matches_naive(x.conv_transpose2d(w, pad, out_pad, 2, 1), x, w, pad, out_pad, 2, 1, 1, 1e-4);
  }
}

TEST(ConvTransposeThreads, Conv2dStride1Dilation2Deterministic) {
  Device::cpu().set_seed(11);
  Tensor x = Tensor::randn(0.0f, 1.0f, {1, 8, 70, 65}, cpu());
  Tensor w = Tensor::randn(0.0f, 1.0f, {8, 5, 3, 3}, cpu());
  expect_same_bytes_for_threads([&] { return x.conv_transpose2d(w, 2, 1, 1, 2); });
  expect_matches_naive(x.conv_transpose2d(w, 2, 1, 1, 2), x, w, 2, 1, 1, 2, 1, 1e-4);
}

TEST(ConvTransposeThreads, Conv1dGroupsDeterministic) {
  Device::cpu().set_seed(12);
  Tensor x = Tensor::randn(0.0f, 1.0f, {2, 32, 700}, cpu());
  Tensor w = Tensor::randn(0.0f, 1.0f, {32, 6, 8}, cpu());
  expect_same_bytes_for_threads([&] { return x.conv_transpose1d(w, 2, 0, 4, 1, 2); });
  expect_matches_naive(x.conv_transpose1d(w, 2, 0, 4, 1, 2).unsqueeze(3), x.unsqueeze(3), w.unsqueeze(3), 2,
                       0, 4, 1, 2, 1e-4);
}

// Wide rows whose cols do not fit one piece: a row is cut into column chunks.
TEST(ConvTransposeThreads, WideRowsInColumnChunks) {
  Device::cpu().set_seed(13);
  Tensor x = Tensor::randn(0.0f, 1.0f, {1, 4, 3, 1200}, cpu());
  Tensor w = Tensor::randn(0.0f, 1.0f, {4, 64, 4, 4}, cpu());
  expect_same_bytes_for_threads([&] { return x.conv_transpose2d(w, 1, 0, 2, 1); });
  expect_matches_naive(x.conv_transpose2d(w, 1, 0, 2, 1), x, w, 1, 0, 2, 1, 1, 1e-4);
}

TEST(ConvTransposeThreads, HalfDeterministic) {
  Device::cpu().set_seed(14);
  Tensor x = Tensor::randn(0.0, 1.0, {1, 16, 48, 48}, DType::BF16, cpu());
  Tensor w = Tensor::randn(0.0, 1.0, {16, 16, 4, 4}, DType::BF16, cpu());
  expect_same_bytes_for_threads([&] { return x.conv_transpose2d(w, 1, 0, 2, 1); });
}

// ---- errors -----------------------------------------------------------------------------------

namespace {

template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ConvTransposeErrors, RankMismatch) {
  Tensor x = Tensor::zeros({1, 2, 5}, DType::F32, cpu());
  Tensor w4 = Tensor::zeros({2, 3, 2, 2}, DType::F32, cpu());
  expect_error([&] { x.conv_transpose2d(w4, 0, 0, 1, 1); }, ErrorKind::ShapeMismatch, "conv_transpose2d");
  expect_error([&] { x.conv_transpose1d(w4, 0, 0, 1, 1, 1); }, ErrorKind::ShapeMismatch, "[2, 3, 2, 2]");
}

TEST(ConvTransposeErrors, ChannelMismatch) {
  Tensor x = Tensor::zeros({1, 2, 5}, DType::F32, cpu());
  Tensor w = Tensor::zeros({3, 3, 2}, DType::F32, cpu());
  expect_error([&] { x.conv_transpose1d(w, 0, 0, 1, 1, 1); }, ErrorKind::ShapeMismatch,
               "conv_transpose1d: in_channel mismatch between input (2) and kernel (3), input: [1, 2, 5]");
}

TEST(ConvTransposeErrors, GroupsMustDivideChannels) {
  Tensor x = Tensor::zeros({1, 4, 5}, DType::F32, cpu());
  Tensor w = Tensor::zeros({4, 3, 2}, DType::F32, cpu());
  expect_error([&] { x.conv_transpose1d(w, 0, 0, 1, 1, 3); }, ErrorKind::ShapeMismatch, "groups (3)");
  expect_error([&] { x.conv_transpose1d(w, 0, 0, 1, 1, 0); }, ErrorKind::ShapeMismatch, "groups (0)");
}

TEST(ConvTransposeErrors, ZeroStrideOrDilation) {
  Tensor x = Tensor::zeros({1, 2, 4, 4}, DType::F32, cpu());
  Tensor w = Tensor::zeros({2, 3, 2, 2}, DType::F32, cpu());
  expect_error([&] { x.conv_transpose2d(w, 0, 0, 0, 1); }, ErrorKind::InvalidArgument, "stride");
  expect_error([&] { x.conv_transpose2d(w, 0, 0, 1, 0); }, ErrorKind::InvalidArgument, "dilation");
}

// PyTorch's rule: output_padding must be smaller than the stride or the dilation.
TEST(ConvTransposeErrors, OutputPaddingTooLarge) {
  Tensor x = Tensor::zeros({1, 2, 5}, DType::F32, cpu());
  Tensor w = Tensor::zeros({2, 3, 2}, DType::F32, cpu());
  expect_error([&] { x.conv_transpose1d(w, 0, 2, 2, 2, 1); }, ErrorKind::InvalidArgument,
               "output_padding (2)");
  EXPECT_EQ(x.conv_transpose1d(w, 0, 1, 1, 2, 1).dims(), (std::vector<size_t>{1, 3, 8}));   // 1 < dilation
  EXPECT_EQ(x.conv_transpose1d(w, 0, 1, 2, 1, 1).dims(), (std::vector<size_t>{1, 3, 11}));  // 1 < stride
}

TEST(ConvTransposeErrors, NonPositiveOutputSize) {
  Tensor x = Tensor::zeros({1, 2, 2, 2}, DType::F32, cpu());
  Tensor w = Tensor::zeros({2, 3, 1, 1}, DType::F32, cpu());
  // (2-1)*1 - 2*1 + 0 + 0 + 1 = 0
  expect_error([&] { x.conv_transpose2d(w, 1, 0, 1, 1); }, ErrorKind::ShapeMismatch, "output height size 0");
}

TEST(ConvTransposeErrors, DTypes) {
  Tensor x = Tensor::zeros({1, 2, 5}, DType::I64, cpu());
  Tensor w = Tensor::zeros({2, 3, 2}, DType::I64, cpu());
  expect_error([&] { x.conv_transpose1d(w, 0, 0, 1, 1, 1); }, ErrorKind::UnsupportedOp, "conv_transpose1d");
  Tensor xf = Tensor::zeros({1, 2, 5}, DType::F32, cpu());
  Tensor wd = Tensor::zeros({2, 3, 2}, DType::F64, cpu());
  expect_error([&] { xf.conv_transpose1d(wd, 0, 0, 1, 1, 1); }, ErrorKind::DTypeMismatch, "conv_transpose1d");
}
