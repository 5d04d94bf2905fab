// The bundled ESRGAN medium x4 (models/esrgan-medium) on Vulkan as candle-upscale runs it:
// forward, then the 8-bit conversion on the device. Every output byte within 1 of the CPU's,
// and no CPU round-trip over the network or the conversion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "candle/models/rdn.h"
#include "models/png_util.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;
using models::Rdn;

const std::string kModels = std::string(CANDLE_TEST_DATA_DIR) + "/../../models/";

TEST(VulkanUpscale, MediumX4ToU8MatchesTheCpuWithinOneWithoutRoundTrips) {
  VK_DEVICE_OR_SKIP(dev);
  const std::string path = kModels + "esrgan-medium/x4.safetensors";
  // a 32x32 crop of the fixture (its textured middle)
  Tensor img = test_models::load_rgb(kModels + "esrgan-slim/fixture.png").narrow(2, 48, 32).narrow(3, 40, 32);
  img = img.contiguous();
  auto want = Rdn::load(path, Device::cpu()).forward(img).to_dtype(DType::U8).flatten_to_vec<uint8_t>();
  Rdn net = Rdn::load(path, dev);
  Tensor in = img.to_device(dev);
  dev.synchronize();
  reset_backend_stats();
  vulkan::reset_stats();
  Tensor out = net.forward(in).to_dtype(DType::U8);
  dev.synchronize();
  auto s = vulkan::stats();
  EXPECT_TRUE(s.round_trips.empty()) << "round-trip: "
                                     << (s.round_trips.empty() ? "" : s.round_trips.begin()->first);
  EXPECT_TRUE(backend_stats().empty());
  EXPECT_GT(s.dispatches, 28u);
  ASSERT_EQ(out.dims(), (std::vector<size_t>{1, 3, 128, 128}));
  ASSERT_EQ(out.dtype(), DType::U8);
  auto got = out.to_device(Device::cpu()).flatten_to_vec<uint8_t>();
  ASSERT_EQ(got.size(), want.size());
  int worst = 0;
  size_t off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    int d = std::abs(int(got[i]) - int(want[i]));
    worst = std::max(worst, d);
    off += d != 0;
  }
  EXPECT_LE(worst, 1) << off << " of " << got.size() << " bytes differ";
}

}  // namespace
}  // namespace candle
