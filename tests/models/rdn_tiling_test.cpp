// Rdn's tiling policy (plan) and upscale(), which writes 8-bit tiles into the output as they
// finish: the same pixels as forward() whatever the plan.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "candle/candle.h"
#include "candle/models/rdn.h"
#include "png_util.h"

using namespace candle;
using candle::models::Rdn;

namespace {

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/";

// forward()'s output as interleaved 8-bit pixels with `stride` bytes per pixel.
std::vector<uint8_t> interleaved(const Tensor& y, size_t stride, uint8_t fill) {
  const size_t c = y.dim(1), h = y.dim(2), w = y.dim(3);
  std::vector<uint8_t> planar = y.to_dtype(DType::U8).flatten_to_vec<uint8_t>();
  std::vector<uint8_t> out(h * w * stride, fill);
  for (size_t i = 0; i < h * w; ++i)
    for (size_t k = 0; k < c; ++k) out[i * stride + k] = planar[k * h * w + i];
  return out;
}

}  // namespace

TEST(RdnTiling, WholeImageWhenItFitsTilesWhenItDoesNot) {
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  const uint64_t bpp = net.activation_bytes_per_pixel();
  // fits: the whole image, one tile covering it
  Rdn::TilePlan whole = net.plan(100, 300, bpp * 100 * 300);
  EXPECT_FALSE(whole.tiled());
  EXPECT_EQ(whole.tile, 300u);
  // a budget for a quarter of the image: tiles, each of whose extended region fits
  Rdn::TilePlan tiled = net.plan(400, 400, bpp * 200 * 200);
  EXPECT_TRUE(tiled.tiled());
  const size_t ext = tiled.tile + 2 * net.halo() + Rdn::kTileAlign;
  EXPECT_LE(bpp * ext * ext, tiled.budget_bytes);
  EXPECT_EQ(tiled.tiles_x, (400 + tiled.tile - 1) / tiled.tile);
  // a forced tile size, and the lower bound
  EXPECT_EQ(net.plan(400, 400, 0, 50).tile, 50u);
  EXPECT_THROW(net.plan(400, 400, 0, 1), Error);
  // a budget below the smallest tile is an error naming the budget
  try {
    net.plan(400, 400, 1 << 20);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 MiB"), std::string::npos) << e.what();
  }
  // the default budget comes from the device's free memory
  EXPECT_GT(net.default_budget(), 0u);
  EXPECT_LE(net.default_budget(), Device::cpu().memory().free_bytes);
  EXPECT_THROW(net.plan(0, 10), Error);
}

TEST(RdnTiling, UpscaleWritesForwardsPixelsTiledOrNot) {
  Rdn net = Rdn::load(kModels + "x2.safetensors", Device::cpu());
  Tensor in = test_models::load_rgb(kModels + "fixture.png").narrow(2, 3, 90).narrow(3, 7, 77).contiguous();
  const std::vector<uint8_t> want = interleaved(net.forward(in), 4, 0xAB);
  for (size_t tile : {0, 32, 45}) {
    Rdn::TilePlan plan = tile ? net.plan(90, 77, 0, tile) : net.plan(90, 77);
    EXPECT_EQ(plan.tiled(), tile != 0);
    std::vector<uint8_t> got(want.size(), 0xAB);  // the 4th byte of each pixel stays as it is
    size_t calls = 0;
    net.upscale(in, plan, got.data(), 4, [&](size_t done, size_t total) {
      ++calls;
      EXPECT_EQ(total, plan.tiles_x * plan.tiles_y);
      EXPECT_EQ(done, calls);
    });
    EXPECT_EQ(calls, plan.tiles_x * plan.tiles_y);
    EXPECT_EQ(got, want) << "tile " << tile;
  }
  std::vector<uint8_t> small(10);
  EXPECT_THROW(net.upscale(in, net.plan(90, 77), small.data(), 2), Error);  // stride < channels
}
