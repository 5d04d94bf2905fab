// Tensors larger than maxStorageBufferRange (128 MiB on lavapipe): the kernels bind
// sub-ranges and split their dispatches. Values are checked at a few positions.
#include <gtest/gtest.h>

#include "candle/backend/cpu_storage.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

constexpr size_t kRows = 6000, kCols = 6000;  // 36M f32 = 137 MiB

// value(i) = (i % 1000) * 0.5
float value(size_t i) { return static_cast<float>(i % 1000) * 0.5f; }

class VulkanLarge : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto d = device(&why);
    if (!d) GTEST_SKIP() << "no usable Vulkan device: " << why;
    dev_ = *d;
    uint64_t range = 0;
    for (const auto& a : vulkan::adapters())
      if (a.name == dev_.backend().name()) range = a.max_storage_buffer_range;
    if (range >= kRows * kCols * 4) GTEST_SKIP() << "maxStorageBufferRange is larger than the test tensor";
    std::vector<float> v(kRows * kCols);
    for (size_t i = 0; i < v.size(); ++i) v[i] = value(i);
    x_ = Tensor::from_vec(v, {kRows, kCols}, Device::cpu()).to_device(dev_);
  }
  Device dev_;
  Tensor x_;
};

TEST_F(VulkanLarge, ElementwiseAndTransposedCopy) {
  vulkan::reset_stats();
  auto y = x_.affine(2.0, 1.0).t().contiguous();  // [kCols, kRows]
  auto c = y.to_device(Device::cpu());
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
  for (auto [r, col] :
       std::vector<std::pair<size_t, size_t>>{{0, 0}, {5999, 5999}, {1234, 4321}, {5999, 0}}) {
    // y[r, col] = 2 x[col, r] + 1
    EXPECT_EQ(c.get(r).get(col).to_scalar<float>(), 2.0f * value(col * kCols + r) + 1.0f) << r << "," << col;
  }
}

TEST_F(VulkanLarge, BroadcastBinaryAndReductions) {
  vulkan::reset_stats();
  auto row = Tensor::arange<float>(0.0f, static_cast<float>(kCols), dev_).reshape({1, kCols});
  auto z = x_.broadcast_sub(row);
  auto zc = z.to_device(Device::cpu());
  EXPECT_EQ(zc.get(3000).get(17).to_scalar<float>(), value(3000 * kCols + 17) - 17.0f);
  EXPECT_EQ(zc.get(5999).get(5999).to_scalar<float>(), value(5999 * kCols + 5999) - 5999.0f);
  // row sums: each row holds 6 full cycles of 0..999 (* 0.5) since 6000 % 1000 == 0
  auto s = x_.sum_keepdim(1).to_device(Device::cpu()).flatten_to_vec<float>();
  ASSERT_EQ(s.size(), kRows);
  EXPECT_EQ(s[0], 6.0f * 0.5f * 999.0f * 1000.0f / 2.0f);
  EXPECT_EQ(s[5999], s[0]);
  auto mx = x_.max_keepdim(0).to_device(Device::cpu()).flatten_to_vec<float>();
  EXPECT_EQ(mx[999], 499.5f);
  auto total = x_.sum_all().to_device(Device::cpu()).to_scalar<float>();
  const float want = 36000.0f * 0.5f * 999.0f * 1000.0f / 2.0f;
  EXPECT_NEAR(total, want, want * 1e-6f);  // a few f32 ulps
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
}

}  // namespace
}  // namespace candle
