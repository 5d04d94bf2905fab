// candle's custom ops on a Vulkan tensor: an op with only a CPU forward is a clear error naming
// the op and the device; an op with a vulkan_fwd runs it on the device (here through the
// BackendStorage interface, as a plugin-agnostic op would) with no CPU round-trip.
#include "candle/custom_op.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;
using test_util::error_of;

// y = 2 x + 1; CPU forward only.
struct TwiceXPlusOneCpuOnly : CustomOp1 {
  std::string name() const override { return "twice-x-plus-one"; }
  CpuOpResult cpu_fwd(const CpuStorage& s, const Layout& l) const override {
    return {std::static_pointer_cast<CpuStorage>(s.affine(l, 2.0, 1.0)), l.shape()};
  }
};

// The same op with a Vulkan forward: the device's own affine kernel.
struct TwiceXPlusOne final : TwiceXPlusOneCpuOnly {
  OpResult vulkan_fwd(const BackendStorage& s, const Layout& l) const override {
    return {s.affine(l, 2.0, 1.0), l.shape()};
  }
};

// A Vulkan forward that hands back a CPU storage: an error, never a tensor on the wrong device.
struct ReturnsACpuStorage final : TwiceXPlusOneCpuOnly {
  OpResult vulkan_fwd(const BackendStorage& s, const Layout& l) const override {
    return {s.to_cpu()->affine(l, 2.0, 1.0), l.shape()};
  }
};

TEST(VulkanCustomOp, ACpuOnlyOpNamesTheMissingVulkanForward) {
  VK_DEVICE_OR_SKIP(dev);
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f}, Device::cpu()).to_device(dev);
  std::string msg = error_of([&] { x.apply_op1_no_bwd(TwiceXPlusOneCpuOnly{}); });
  EXPECT_NE(msg.find("custom op 'twice-x-plus-one' has no forward for vulkan"), std::string::npos) << msg;
}

TEST(VulkanCustomOp, AVulkanForwardRunsOnTheDevice) {
  VK_DEVICE_OR_SKIP(dev);
  Tensor x = Tensor::new_<float>({1.f, 2.f, 3.f}, Device::cpu()).to_device(dev);
  dev.synchronize();
  vulkan::reset_stats();
  reset_backend_stats();
  Tensor y = x.apply_op1_no_bwd(TwiceXPlusOne{});
  dev.synchronize();
  EXPECT_TRUE(y.device().is_vulkan());
  EXPECT_EQ(vulkan::stats().dispatches, 1u);
  EXPECT_TRUE(vulkan::stats().round_trips.empty());
  EXPECT_TRUE(backend_stats().empty());
  EXPECT_EQ(y.to_device(Device::cpu()).to_vec1<float>(), (std::vector<float>{3.f, 5.f, 7.f}));
}

TEST(VulkanCustomOp, AForwardResultOnAnotherDeviceIsAnError) {
  VK_DEVICE_OR_SKIP(dev);
  Tensor x = Tensor::new_<float>({1.f, 2.f}, Device::cpu()).to_device(dev);
  std::string msg = error_of([&] { x.apply_op1_no_bwd(ReturnsACpuStorage{}); });
  EXPECT_NE(msg.find("custom op 'twice-x-plus-one' returned a storage on cpu"), std::string::npos) << msg;
}

}  // namespace
}  // namespace candle
