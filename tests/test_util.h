// Helpers shared by the test suites: strided views built without the shape ops, and
// element-wise comparisons with a stated tolerance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "candle/backend/cpu_storage.h"
#include "candle/candle.h"

namespace candle::test_util {

// The message of the candle::Error that fn throws ("" when it throws none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One element of a comparison with tolerance `tol`: a NaN or an infinity in `want` fails unless
// nonfinite_expected (then got must be NaN / the same infinity), so that a device and a reference
// that both give NaN where a number is expected do not pass.
inline bool element_close(double got, double want, double tol, bool nonfinite_expected) {
  if (!std::isfinite(want) && !nonfinite_expected) return false;
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol;
}

// A tensor sharing t's storage with another layout (no checks beyond the storage size).
inline Tensor view(const Tensor& t, const Layout& l) {
  return Tensor::from_storage(t.storage(), l, t.dtype(), t.device());
}

// The same values as `t` (contiguous, rank 2) but stored transposed: a non-contiguous view.
inline Tensor transposed_copy_view(const Tensor& t) {
  // store t^T contiguously, then view it transposed back
  auto dims = t.dims();
  std::vector<float> src = t.to_dtype(DType::F32).flatten_to_vec<float>();
  std::vector<float> tt(src.size());
  for (size_t i = 0; i < dims[0]; ++i)
    for (size_t j = 0; j < dims[1]; ++j) tt[j * dims[0] + i] = src[i * dims[1] + j];
  Tensor stored = Tensor::from_vec(tt, {dims[1], dims[0]}, t.device()).to_dtype(t.dtype());
  return view(stored, stored.layout().transpose(0, 1));
}

// The same values as `t` (contiguous) placed at an offset inside a larger storage,
// viewed through a narrow of the first dim: exercises non-zero start offsets.
inline Tensor offset_view(const Tensor& t, size_t pad_rows = 2) {
  auto dims = t.dims();
  std::vector<size_t> big = dims;
  big[0] += 2 * pad_rows;
  Tensor storage = Tensor::zeros(Shape(big), t.dtype(), t.device());
  size_t row = t.elem_count() / (dims[0] ? dims[0] : 1);
  t.storage()->copy_strided_src(*storage.storage(), pad_rows * row, t.layout());
  return view(storage, storage.layout().narrow(0, pad_rows, dims[0]));
}

inline void expect_near_vec(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
    }
  }
}

// The bytes of t's elements in row-major order (for bit-exactness checks).
inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  auto s = c.storage()->to_cpu();
  const size_t es = dtype_size(c.dtype());
  const auto* p = reinterpret_cast<const uint8_t*>(s->bytes()) + c.layout().start_offset() * es;
  return std::vector<uint8_t>(p, p + c.elem_count() * es);
}

// fn() gives the same bytes at 1, 2 and 3 threads (then restores the default count).
template <typename Fn>
void expect_same_bytes_at_1_2_3_threads(Fn&& fn, const std::string& what) {
  set_num_threads(1);
  const auto one = bytes_of(fn());
  set_num_threads(2);
  const auto two = bytes_of(fn());
  set_num_threads(3);
  const auto three = bytes_of(fn());
  set_num_threads(0);
  EXPECT_TRUE(one == two) << what << ": 1 vs 2 threads";
  EXPECT_TRUE(one == three) << what << ": 1 vs 3 threads";
}

// Two images' (or any tensors') largest absolute difference and how many elements differ at all.
struct ImageDiff {
  float worst = 0;
  size_t differ = 0, total = 0;
};
inline ImageDiff image_diff(const Tensor& got, const Tensor& want) {
  auto g = got.to_device(Device::cpu()).to_dtype(DType::F32).flatten_to_vec<float>();
  auto w = want.to_device(Device::cpu()).to_dtype(DType::F32).flatten_to_vec<float>();
  ImageDiff d;
  d.total = g.size();
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    const float e = std::fabs(g[i] - w[i]);
    d.worst = std::max(d.worst, e);
    d.differ += e != 0;
  }
  return d;
}

}  // namespace candle::test_util
