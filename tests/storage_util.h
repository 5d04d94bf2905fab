// Storage-level helpers of the tests that compare a device's kernels with the CPU backend's (the
// differential harness, tests/core/differential_test.cpp, and the Vulkan tests): deterministic
// values, storages on both devices, the harness's layouts and comparisons with stated tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"
#include "test_util.h"
#if CANDLE_TEST_WITH_VULKAN
#include "candle/vulkan.h"
#endif

namespace candle::storage_test {

// Deterministic values in [lo, hi) (an LCG).
inline std::vector<float> values(size_t n, float lo, float hi, uint32_t seed = 1) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return v;
}

// A CPU storage of dtype dt with the values (converted) and its copy on `dev` (`vk`: the device
// under test, whichever it is).
struct Pair {
  std::shared_ptr<CpuStorage> cpu;
  StoragePtr vk;
};
inline Pair make_pair(const Device& dev, DType dt, const std::vector<float>& v) {
  auto f = CpuStorage::alloc(DType::F32, v.size());
  std::copy(v.begin(), v.end(), f->data<float>());
  auto c = dt == DType::F32
               ? f
               : std::static_pointer_cast<CpuStorage>(f->to_dtype(Layout::contiguous(Shape{v.size()}), dt));
  return {c, dev.backend().from_cpu(*c)};
}

// Every element of a storage as f32.
inline std::vector<float> as_f32(const BackendStorage& s) {
  auto c = s.to_cpu();
  auto f = c->dtype() == DType::F32 ? c
                                    : std::static_pointer_cast<CpuStorage>(c->to_dtype(
                                          Layout::contiguous(Shape{c->elem_count()}), DType::F32));
  return std::vector<float>(f->data<float>(), f->data<float>() + f->elem_count());
}

// |got - want| <= atol + rtol |want| everywhere; non-finite references as test_util::element_close.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float atol,
                         float rtol, const std::string& what, bool nonfinite_expected = false) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const bool ok =
        test_util::element_close(got[i], want[i], atol + rtol * std::fabs(want[i]), nonfinite_expected);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i]
                    << (std::isfinite(want[i]) ? "" : " (the reference is not finite)");
    }
  }
}

// Identical bytes, except that for float dtypes any NaN equals any NaN: GPUs need not keep a
// NaN's sign and payload through conversions and comparisons (the NVIDIA driver makes them
// canonical), and candle gives NaN payloads no meaning.
inline void expect_same_bytes(const BackendStorage& got, const BackendStorage& want,
                              const std::string& what) {
  auto g = got.to_cpu(), w = want.to_cpu();
  ASSERT_EQ(g->dtype(), w->dtype()) << what;
  ASSERT_EQ(g->elem_count(), w->elem_count()) << what;
  if (std::memcmp(g->bytes(), w->bytes(), g->nbytes()) == 0) return;
  size_t bad = 0;
  const size_t es = dtype_size(g->dtype());
  for (size_t i = 0; i < g->elem_count(); ++i) {
    if (std::memcmp(g->bytes() + i * es, w->bytes() + i * es, es) == 0) continue;
    bool both_nan = false;
    if (dtype_is_float(g->dtype())) {
      both_nan = dispatch_float(g->dtype(), "expect_same_bytes", [&]<typename T>() {
        return std::isnan(static_cast<double>(static_cast<float>(g->data<T>()[i]))) &&
               std::isnan(static_cast<double>(static_cast<float>(w->data<T>()[i])));
      });
    }
    if (!both_nan && ++bad <= 3) ADD_FAILURE() << what << ": bytes differ at element " << i;
  }
  EXPECT_EQ(bad, 0u) << what << ": bytes differ";
}

// The four layouts of the harness, all of logical shape [r, c], over a storage of
// storage_elems(r, c) elements: contiguous, transposed, narrowed with an offset, broadcast.
struct NamedLayout {
  const char* name;
  Layout l;
};
inline size_t storage_elems(size_t r, size_t c) { return 5 + r * (c + 3) + c; }
inline std::vector<NamedLayout> layouts(size_t r, size_t c) {
  return {{"contiguous", Layout::contiguous(Shape{r, c})},
          {"transposed", Layout(Shape{r, c}, {1, r}, 0)},
          {"narrowed", Layout(Shape{r, c}, {c + 3, 1}, 5)},
          {"broadcast", Layout(Shape{r, c}, {0, 1}, 2)}};
}

// The float dtypes a device's kernels are tested in: f32, and f16 where the device has it.
inline std::vector<DType> float_dtypes(const Device& dev) {
  std::vector<DType> d{DType::F32};
#if CANDLE_TEST_WITH_VULKAN
  if (dev.is_vulkan()) {
    for (const auto& a : vulkan::adapters())
      if (a.name == dev.backend().name() && a.f16) {
        d.push_back(DType::F16);
        break;
      }
    return d;
  }
#endif
  if (!dev.is_cpu()) d.push_back(DType::F16);
  return d;
}

}  // namespace candle::storage_test
