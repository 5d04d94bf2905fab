// The bundled upscaler (candle::models::Rdn, ESRGAN slim x2 and x4) on Vulkan: every output
// pixel within 1 of the CPU's (after clamp + round), and no CPU round-trip over the network.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "candle/models/rdn.h"
#include "models/png_util.h"
#include "test_util.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;
using models::Rdn;

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/esrgan-slim/";

void check_scale(const Device& dev, size_t scale) {
  const std::string path = kModels + "x" + std::to_string(scale) + ".safetensors";
  Tensor img = test_models::load_rgb(kModels + "fixture.png");
  Tensor want = Rdn::load(path, Device::cpu()).forward(img);
  Rdn net = Rdn::load(path, dev);
  Tensor in = img.to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  vulkan::reset_stats();
  Tensor out = net.forward(in);
  dev.synchronize();
  auto s = vulkan::stats();
  EXPECT_TRUE(s.round_trips.empty()) << "x" << scale << " round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  EXPECT_GT(s.dispatches, 12u);
  ASSERT_EQ(out.dims(), want.dims());
  const auto d = test_util::image_diff(out, want);
  EXPECT_LE(d.worst, 1.0f) << "x" << scale << ": " << d.differ << " of " << d.total << " values differ";
}

TEST(VulkanUpscale, SlimX2MatchesTheCpuWithinOneWithoutRoundTrips) {
  VK_DEVICE_OR_SKIP(dev);
  check_scale(dev, 2);
}

TEST(VulkanUpscale, SlimX4MatchesTheCpuWithinOneWithoutRoundTrips) {
  VK_DEVICE_OR_SKIP(dev);
  check_scale(dev, 4);
}

}  // namespace
}  // namespace candle
