// Helpers of the Vulkan tests: the device under test (or a skip); the storage-level helpers
// shared with the differential harness are in tests/storage_util.h.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "candle/vulkan.h"
#include "storage_util.h"
#include "test_util.h"

namespace candle::vk_test {

// The Vulkan device under test: best_adapter(), else adapter 0 (a software device needs
// CANDLE_VULKAN_ALLOW_CPU=1, which ctest sets). nullopt, with the reason, when none opens.
inline std::optional<Device> device(std::string* why) {
  try {
    auto best = vulkan::best_adapter();
    return Device::vulkan(best ? *best : 0);
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;
  }
}

#define VK_DEVICE_OR_SKIP(dev)                                                                  \
  std::string dev##_why;                                                                        \
  auto dev##_opt = ::candle::vk_test::device(&dev##_why);                                       \
  if (!dev##_opt)                                                                               \
    GTEST_SKIP() << "no usable Vulkan device (tests need one; CI has lavapipe): " << dev##_why; \
  const ::candle::Device& dev = *dev##_opt

// values, make_pair, as_f32, expect_close, expect_same_bytes, layouts, float_dtypes
using namespace ::candle::storage_test;

}  // namespace candle::vk_test
