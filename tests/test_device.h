// candle's `test_device!` for GoogleTest: a test written once runs on every device kind, as
// value-parameterized tests named <Suite>.<Name>/cpu, /vulkan, /cuda, /rocm.
//
//   CANDLE_DEVICE_TEST_SUITE(CandleTensor);       // once per suite (the fixture + instantiation)
//   CANDLE_DEVICE_TEST(CandleTensor, zeros) {     // the body sees `const Device& dev`
//     Tensor t = Tensor::zeros({5, 2}, DType::F32, dev);
//   }
//
// Every kind is always instantiated: a device that does not open here is reported as skipped,
// with the reason, never as a pass. The CPU always opens; Vulkan is vulkan::best_adapter(), else
// adapter 0 (a software device needs CANDLE_VULKAN_ALLOW_CPU=1, which ctest sets), as in
// tests/vulkan/vk_util.h; CUDA and ROCm are ordinal 0 and join as soon as their backends load.
//
// On a non-CPU device each test also checks, when it ends, that no op took a CPU round-trip
// (backend_stats()): the backend claims a kernel for every op unless the test allows one by name
// with allow_round_trip(kind, "op", "why").
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "candle/candle.h"
#include "test_util.h"
#if CANDLE_TEST_WITH_VULKAN
#include "candle/vulkan.h"
#endif

namespace candle {
// GoogleTest prints a test's parameter with this (`where GetParam() = vulkan`).
inline void PrintTo(DeviceKind kind, std::ostream* os) { *os << device_kind_name(kind); }
}  // namespace candle

namespace candle::test_device {

// The kinds every device test is instantiated for (the CPU first).
inline std::vector<DeviceKind> kinds() {
  return {DeviceKind::Cpu, DeviceKind::Vulkan, DeviceKind::Cuda, DeviceKind::Rocm};
}

// Every kind but the CPU.
inline std::vector<DeviceKind> gpu_kinds() {
  std::vector<DeviceKind> k = kinds();
  k.erase(k.begin());
  return k;
}

struct Opened {
  std::optional<Device> device;
  std::string why;  // why it did not open
};

// The device of `kind` under test, opened once per process; no device (and the reason) where it
// does not open.
inline const Opened& open(DeviceKind kind) {
  static std::map<DeviceKind, Opened> opened;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = opened.find(kind);
  if (it != opened.end()) return it->second;
  Opened o;
  try {
    switch (kind) {
      case DeviceKind::Cpu: o.device = Device::cpu(); break;
      case DeviceKind::Vulkan: {
#if CANDLE_TEST_WITH_VULKAN
        auto best = vulkan::best_adapter();
        o.device = Device::vulkan(best ? *best : 0);
#else
        o.device = Device::vulkan(0);
#endif
        break;
      }
      default: o.device = Device::open(kind, 0); break;
    }
  } catch (const Error& e) {
    o.why = e.what();
  }
  return opened.emplace(kind, std::move(o)).first->second;
}

// The devices that open here (the CPU always), for tests that loop over devices themselves.
inline std::vector<Device> present() {
  std::vector<Device> out;
  for (DeviceKind k : kinds())
    if (open(k).device) out.push_back(*open(k).device);
  return out;
}

// The CPU round-trips counted since the last reset_backend_stats(), less the allowed op names.
inline std::map<std::string, size_t> unexpected_round_trips(const std::set<std::string>& allowed = {}) {
  std::map<std::string, size_t> out;
  for (const auto& [op, n] : backend_stats())
    if (n && !allowed.count(op)) out[op] = n;
  return out;
}

// For a non-CPU device: no op since the last reset_backend_stats() went through the CPU, except
// the `allowed` ones. Resets the counters.
inline void expect_no_round_trips(const Device& dev, const std::string& what,
                                  const std::set<std::string>& allowed = {}) {
  if (!dev.is_cpu()) {
    for (const auto& [op, n] : unexpected_round_trips(allowed))
      ADD_FAILURE() << what << ": " << op << " took " << n << " CPU round-trip(s) on " << dev.to_string()
                    << " (the backend claims a kernel for it)";
  }
  reset_backend_stats();
}

// |got - want| <= max(atol, rtol |want|) everywhere; non-finite references as
// test_util::element_close.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                         double rtol, const std::string& what, bool nonfinite_expected = false) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = test_util::element_close(got[i], want[i], std::max(atol, rtol * std::fabs(want[i])),
                                             nonfinite_expected);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i]
                    << (std::isfinite(want[i]) ? "" : " (the reference is not finite)");
  }
  EXPECT_EQ(bad, 0u) << what << ": elements out of tolerance";
}

// The same for tensors (any device, any dtype; compared as f64 on the CPU).
inline void expect_close(const Tensor& got, const Tensor& want, double atol, double rtol,
                         const std::string& what, bool nonfinite_expected = false) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  auto as_f64 = [](const Tensor& t) {
    return t.to_device(Device::cpu()).to_dtype(DType::F64).flatten_to_vec<double>();
  };
  expect_close(as_f64(got), as_f64(want), atol, rtol, what, nonfinite_expected);
}

// The fixture of CANDLE_DEVICE_TEST: `dev` is the device of the parameter's kind (the CPU as a
// placeholder while the test is skipped).
class DeviceTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  DeviceTest() : opened_(open(GetParam())), dev(opened_.device ? *opened_.device : cpu_) {}

  void SetUp() override {
    if (!opened_.device) GTEST_SKIP() << "no " << device_kind_name(GetParam()) << " device: " << opened_.why;
    reset_backend_stats();
  }

  void TearDown() override {
    if (opened_.device) expect_no_round_trips(dev, "this test", allowed_);
  }

  // `op` may go through the CPU on devices of `kind` in this test (say why at the call).
  void allow_round_trip(DeviceKind kind, const std::string& op) {
    if (GetParam() == kind) allowed_.insert(op);
  }

 private:
  Device cpu_ = Device::cpu();
  const Opened& opened_;
  std::set<std::string> allowed_;

 protected:
  const Device& dev;
};

inline std::string kind_suffix(const ::testing::TestParamInfo<DeviceKind>& info) {
  return std::string(device_kind_name(info.param));
}

}  // namespace candle::test_device

// Declares the suite's fixture and instantiates it for every device kind (once per suite, before
// or after its tests).
#define CANDLE_DEVICE_TEST_SUITE(Suite)                                                  \
  class Suite : public ::candle::test_device::DeviceTest {};                             \
  INSTANTIATE_TEST_SUITE_P(, Suite, ::testing::ValuesIn(::candle::test_device::kinds()), \
                           ::candle::test_device::kind_suffix)

// The same for tests that compare a device with the CPU: every kind but the CPU.
#define CANDLE_GPU_DEVICE_TEST_SUITE(Suite)                                                  \
  class Suite : public ::candle::test_device::DeviceTest {};                                 \
  INSTANTIATE_TEST_SUITE_P(, Suite, ::testing::ValuesIn(::candle::test_device::gpu_kinds()), \
                           ::candle::test_device::kind_suffix)

// One test of a suite declared with CANDLE_DEVICE_TEST_SUITE; the body sees `const Device& dev`.
#define CANDLE_DEVICE_TEST(Suite, Name) TEST_P(Suite, Name)
