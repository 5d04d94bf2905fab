// candle::models::Rdn on the bundled ESRGAN medium models (models/esrgan-medium: x4 and x8 of
// @upscalerjs/esrgan-medium@1.0.0): their topology as loaded and UpscalerJS's own x4 sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "candle/candle.h"
#include "candle/models/rdn.h"
#include "png_util.h"

namespace {

using namespace candle;
using candle::models::Rdn;

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/";

// RDN with D=10 blocks of C=1 conv, G=G0=64: F_m1, F_0, 10 x (F_d_1, LFF_d), GFF_1, GFF_2,
// UPN1..3, SR = 28 convs; with the input, 12 relus, 11 concats, 11 adds and the upsample, the
// converted graph keeps the package's 64 layers.
TEST(RdnMedium, BundledModelsLoadWithTheirTopology) {
  for (size_t s : {4, 8}) {
    Rdn net = Rdn::load(kModels + "esrgan-medium/x" + std::to_string(s) + ".safetensors", Device::cpu());
    EXPECT_EQ(net.scale(), s);
    EXPECT_EQ(net.in_channels(), 3u);
    EXPECT_EQ(net.out_channels(), 3u);
    EXPECT_EQ(net.num_convs(), 28u);
    EXPECT_EQ(net.num_layers(), 64u);
  }
}

TEST(RdnMedium, ReceptiveRadiusAndHalo) {
  Rdn net = Rdn::load(kModels + "esrgan-medium/x4.safetensors", Device::cpu());
  // 3x3 convs F_m1 F_0 F_1_1..F_10_1 GFF_2 UPN2 UPN3 (15, 1 each) + 5x5 UPN1 (2) = 17 before the
  // upsampling, and the 3x3 SR conv after it reaches one more input pixel.
  EXPECT_EQ(net.receptive_radius(), 18u);
  // plus 3 per spatial conv before the upsampling (16 convs); the SR conv fused with the
  // upsampling reaches ceil((1 + 3 * s) / s) = 4 source pixels
  EXPECT_EQ(net.halo(), 17u + 48u + 4u);
}

TEST(RdnMedium, X4MatchesUpscalerJsSample) {
  Rdn net = Rdn::load(kModels + "esrgan-medium/x4.safetensors", Device::cpu());
  // the package's assets/fixture.png is the same file as esrgan-slim's
  Tensor in = test_models::load_rgb(kModels + "esrgan-slim/fixture.png");
  Tensor want = test_models::load_rgb(kModels + "esrgan-medium/samples/4x/result.png");
  Tensor got = net.forward(in);
  ASSERT_EQ(got.dims(), (std::vector<size_t>{1, 3, 512, 512}));
  ASSERT_EQ(want.dims(), got.dims());
  // UpscalerJS ran the model in TF.js (float32, another summation order) and wrote 8-bit
  // pixels: every pixel within 1.
  auto g = got.flatten_to_vec<float>(), w = want.flatten_to_vec<float>();
  float worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - w[i]));
  EXPECT_LE(worst, 1.0f);
}

// The raw output on a small odd-sized image: the right shape, finite, and an image (the net
// was trained on 0..255 targets: nearly all of its raw values lie within them).
TEST(RdnMedium, X8RawOutputOfASmallImageIsAnImage) {
  Rdn net = Rdn::load(kModels + "esrgan-medium/x8.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "esrgan-slim/fixture.png").narrow(2, 40, 13).narrow(3, 60, 9);
  Tensor raw = net.forward_raw(in);
  ASSERT_EQ(raw.dims(), (std::vector<size_t>{1, 3, 104, 72}));
  auto v = raw.flatten_to_vec<float>();
  size_t outside = 0;
  double sum = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    outside += x < -16.0f || x > 271.0f;
    sum += x;
  }
  EXPECT_LE(outside, v.size() / 100);
  // the mean follows the input's (bilinear-like upscaling keeps the mean within a few levels)
  const float in_mean = in.mean_all().to_scalar<float>();
  EXPECT_NEAR(sum / double(v.size()), in_mean, 8.0);
}

}  // namespace
