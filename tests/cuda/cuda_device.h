// cuda:0 for the CUDA tests, or the reason it does not open (CI has no GPU: the tests skip with it).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "candle/candle.h"

namespace candle::test_cuda {

inline const std::optional<Device>& device0(std::string* why) {
  static std::string reason;
  static const std::optional<Device> dev = []() -> std::optional<Device> {
    try {
      return Device::cuda(0);
    } catch (const Error& e) {
      reason = e.what();
      return std::nullopt;
    }
  }();
  *why = reason;
  return dev;
}

}  // namespace candle::test_cuda

// Skips the test where cuda:0 does not open; else `dev` is cuda:0.
#define NEED_CUDA_DEVICE()                                                                             \
  std::string cuda_why_;                                                                               \
  if (!::candle::test_cuda::device0(&cuda_why_)) GTEST_SKIP() << "no CUDA device here: " << cuda_why_; \
  const ::candle::Device& dev = *::candle::test_cuda::device0(&cuda_why_)
