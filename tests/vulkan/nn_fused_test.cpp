// candle::nn's fused ops on Vulkan (softmax_last_dim, rms_norm, layer_norm, rope / rope_i /
// rope_thd): the backend hook's kernels (src/vulkan/ops_nn.cpp) against the fused CPU kernels,
// with the dispatch count showing that the fused kernel ran (one dispatch for a dense input,
// one more for a strided input that is densified first) and no CPU round-trip.
//
// Tolerances: f32 |got - want| <= 1e-5 + 1e-5 |want| (both compute in f32; sums in a different
// order); f16 2e-3 + 2e-3 |want| (f32 compute, one rounding at the store: at most about one
// f16 ulp apart, 2^-10 relative).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "candle/nn/ops.h"
#include "candle/nn/rotary_emb.h"
#include "candle/var.h"
#include "vk_util.h"

namespace candle {
namespace {

using namespace vk_test;

struct Tol {
  float atol, rtol;
};
Tol tol_for(DType dt) { return dt == DType::F16 ? Tol{2e-3f, 2e-3f} : Tol{1e-5f, 1e-5f}; }

// A CPU tensor of values in [lo, hi) as dtype dt.
Tensor cpu_tensor(const Shape& shape, DType dt, float lo, float hi, uint32_t seed) {
  return Tensor::from_vec(values(shape.elem_count(), lo, hi, seed), shape, Device::cpu()).to_dtype(dt);
}

std::vector<float> to_f32(const Tensor& t) {
  return t.to_device(Device::cpu()).to_dtype(DType::F32).flatten_to_vec<float>();
}

// Runs f on the device and counts the dispatches and round-trips it records.
struct Counted {
  Tensor y;
  size_t dispatches;
  size_t round_trips;
};
Counted counted(const Device& dev, const std::function<Tensor()>& f) {
  dev.synchronize();
  vulkan::reset_stats();
  reset_backend_stats();
  Tensor y = f();
  dev.synchronize();
  auto s = vulkan::stats();
  size_t rt = 0;
  for (const auto& [op, c] : s.round_trips) rt += c;
  return {y, s.dispatches, rt + backend_stats().size()};
}

// f on the Vulkan copies of the inputs against f on the CPU ones; expects `dispatches`.
void check(const Device& dev, const std::vector<Tensor>& cpu_in,
           const std::function<Tensor(const std::vector<Tensor>&)>& f, size_t dispatches,
           const std::string& what) {
  std::vector<Tensor> vk_in;
  for (const auto& t : cpu_in) vk_in.push_back(t.to_device(dev));
  Tensor want = f(cpu_in);
  Counted got = counted(dev, [&] { return f(vk_in); });
  EXPECT_EQ(got.y.shape(), want.shape()) << what;
  EXPECT_EQ(got.y.dtype(), want.dtype()) << what;
  EXPECT_TRUE(got.y.is_contiguous()) << what;
  EXPECT_EQ(got.dispatches, dispatches) << what;
  EXPECT_EQ(got.round_trips, 0u) << what;
  Tol t = tol_for(want.dtype());
  expect_close(to_f32(got.y), to_f32(want), t.atol, t.rtol, what);
}

// rows x d: long rows (1000 and 4097 > the 256-thread work-group), short rows, many rows, 3-D
const std::vector<Shape> kRowShapes = {Shape{7, 1000}, Shape{3, 4097}, Shape{1000, 3}, Shape{2, 5, 64},
                                       Shape{1, 1}};

std::string name(const Shape& s, DType dt) { return s.to_string() + " " + std::string(dtype_name(dt)); }

TEST(VulkanNnFused, SoftmaxLastDimMatchesTheCpuInOneDispatch) {
  VK_DEVICE_OR_SKIP(dev);
  for (DType dt : float_dtypes(dev))
    for (const auto& s : kRowShapes)
      check(
          dev, {cpu_tensor(s, dt, -8.0f, 8.0f, 1)},
          [](const auto& in) { return nn::ops::softmax_last_dim(in[0]); }, 1, "softmax " + name(s, dt));
}

TEST(VulkanNnFused, SoftmaxIsStableForLargeInputs) {
  VK_DEVICE_OR_SKIP(dev);
  // exp(100) overflows f32 without the max subtraction
  auto x = cpu_tensor({4, 300}, DType::F32, 90.0f, 100.0f, 2);
  check(
      dev, {x}, [](const auto& in) { return nn::ops::softmax_last_dim(in[0]); }, 1, "softmax large");
}

TEST(VulkanNnFused, RmsNormMatchesTheCpuInOneDispatch) {
  VK_DEVICE_OR_SKIP(dev);
  for (DType dt : float_dtypes(dev))
    for (const auto& s : kRowShapes) {
      size_t d = s.dims().back();
      check(
          dev, {cpu_tensor(s, dt, -3.0f, 3.0f, 3), cpu_tensor({d}, dt, 0.5f, 1.5f, 4)},
          [](const auto& in) { return nn::ops::rms_norm(in[0], in[1], 1e-5f); }, 1,
          "rms_norm " + name(s, dt));
    }
}

TEST(VulkanNnFused, LayerNormMatchesTheCpuInOneDispatch) {
  VK_DEVICE_OR_SKIP(dev);
  for (DType dt : float_dtypes(dev))
    for (const auto& s : kRowShapes) {
      size_t d = s.dims().back();
      // an offset mean: the variance is taken about the row mean
      check(
          dev,
          {cpu_tensor(s, dt, 1.0f, 4.0f, 5), cpu_tensor({d}, dt, 0.5f, 1.5f, 6),
           cpu_tensor({d}, dt, -1.0f, 1.0f, 7)},
          [](const auto& in) { return nn::ops::layer_norm(in[0], in[1], in[2], 1e-5f); }, 1,
          "layer_norm " + name(s, dt));
    }
}

TEST(VulkanNnFused, NormsAddEpsInsideTheRoot) {
  VK_DEVICE_OR_SKIP(dev);
  // constant rows: layer_norm's variance is 0, so y = beta exactly unless eps is misplaced;
  // rms rows of 0.01: sqrt(1e-4 + 0.1) differs from sqrt(1e-4) + 0.1 and sqrt(1e-4) alone
  auto ones = Tensor::ones({3, 10}, DType::F32, Device::cpu());
  auto alpha = cpu_tensor({10}, DType::F32, 0.5f, 1.5f, 8),
       beta = cpu_tensor({10}, DType::F32, -1.0f, 1.0f, 9);
  check(
      dev, {ones, alpha, beta}, [](const auto& in) { return nn::ops::layer_norm(in[0], in[1], in[2], 0.1f); },
      1, "layer_norm constant rows");
  check(
      dev, {ones * 0.01, alpha}, [](const auto& in) { return nn::ops::rms_norm(in[0], in[1], 0.1f); }, 1,
      "rms_norm eps");
}

TEST(VulkanNnFused, RowOpsReadNarrowedRowsInPlace) {
  VK_DEVICE_OR_SKIP(dev);
  // [6, 40] narrowed to columns [3, 33): rows 40 apart, read in place (one dispatch)
  for (DType dt : float_dtypes(dev)) {
    auto x = cpu_tensor({6, 40}, dt, -2.0f, 2.0f, 10);
    auto a = cpu_tensor({30}, dt, 0.5f, 1.5f, 11), b = cpu_tensor({30}, dt, -1.0f, 1.0f, 12);
    std::string w = std::string(dtype_name(dt));
    check(
        dev, {x}, [](const auto& in) { return nn::ops::softmax_last_dim(in[0].narrow(1, 3, 30)); }, 1,
        "softmax narrowed " + w);
    check(
        dev, {x, a}, [](const auto& in) { return nn::ops::rms_norm(in[0].narrow(1, 3, 30), in[1], 1e-5f); },
        1, "rms_norm narrowed " + w);
    check(
        dev, {x, a, b},
        [](const auto& in) { return nn::ops::layer_norm(in[0].narrow(1, 3, 30), in[1], in[2], 1e-5f); }, 1,
        "layer_norm narrowed " + w);
  }
}

TEST(VulkanNnFused, RowOpsDensifyTransposedInputs) {
  VK_DEVICE_OR_SKIP(dev);
  // [300, 9].t() = [9, 300] with a strided last dim: one copy, then the kernel
  for (DType dt : float_dtypes(dev)) {
    auto x = cpu_tensor({300, 9}, dt, -2.0f, 2.0f, 13);
    auto a = cpu_tensor({300}, dt, 0.5f, 1.5f, 14), b = cpu_tensor({300}, dt, -1.0f, 1.0f, 15);
    std::string w = std::string(dtype_name(dt));
    check(
        dev, {x}, [](const auto& in) { return nn::ops::softmax_last_dim(in[0].t()); }, 2,
        "softmax transposed " + w);
    check(
        dev, {x, a}, [](const auto& in) { return nn::ops::rms_norm(in[0].t(), in[1], 1e-5f); }, 2,
        "rms_norm transposed " + w);
    check(
        dev, {x, a, b}, [](const auto& in) { return nn::ops::layer_norm(in[0].t(), in[1], in[2], 1e-5f); }, 2,
        "layer_norm transposed " + w);
  }
}

TEST(VulkanNnFused, NormsReadStridedAlphaAndBeta) {
  VK_DEVICE_OR_SKIP(dev);
  // alpha/beta: every other element of a [2d] vector (stride 2, offset 1), read in place
  auto x = cpu_tensor({5, 50}, DType::F32, -2.0f, 2.0f, 16);
  auto ab = cpu_tensor({50, 2}, DType::F32, 0.5f, 1.5f, 17);
  check(
      dev, {x, ab},
      [](const auto& in) {
        auto a = in[1].narrow(1, 1, 1).squeeze(1), b = in[1].narrow(1, 0, 1).squeeze(1);
        return nn::ops::layer_norm(in[0], a, b, 1e-5f);
      },
      1, "layer_norm strided alpha/beta");
}

using RopeFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
struct RopeCase {
  const char* name;
  RopeFn f;
  bool thd;
};
const RopeCase kRopes[] = {{"rope", &nn::rotary_emb::rope, false},
                           {"rope_i", &nn::rotary_emb::rope_i, false},
                           {"rope_thd", &nn::rotary_emb::rope_thd, true}};

TEST(VulkanNnFused, RopeMatchesTheCpuInOneDispatch) {
  VK_DEVICE_OR_SKIP(dev);
  const size_t b = 2, h = 3, t = 5, d = 16, t_max = 8;  // t < t_max: the first t rows of cos/sin
  for (DType dt : float_dtypes(dev))
    for (const auto& rc : kRopes)
      for (bool batched : {false, true}) {
        Shape xs = rc.thd ? Shape{b, t, h, d} : Shape{b, h, t, d};
        Shape cs = batched ? Shape{b, t_max, d / 2} : Shape{t_max, d / 2};
        std::string w = std::string(rc.name) + (batched ? " 3-D cos/sin " : " 2-D cos/sin ") +
                        std::string(dtype_name(dt));
        RopeFn f = rc.f;
        check(
            dev,
            {cpu_tensor(xs, dt, -2.0f, 2.0f, 18), cpu_tensor(cs, dt, -1.0f, 1.0f, 19),
             cpu_tensor(cs, dt, -1.0f, 1.0f, 20)},
            [f](const auto& in) { return f(in[0], in[1], in[2]); }, 1, w);
      }
}

TEST(VulkanNnFused, RopeReadsStridedInputsInPlace) {
  VK_DEVICE_OR_SKIP(dev);
  // xs transposed ([b, t, h, d] -> [b, h, t, d] and back for thd), cos/sin narrowed columns of
  // a wider table: all read through their strides, one dispatch
  const size_t b = 2, h = 3, t = 6, d = 8;
  for (DType dt : float_dtypes(dev))
    for (const auto& rc : kRopes) {
      RopeFn f = rc.f;
      check(
          dev,
          {cpu_tensor({b, t, h, d}, dt, -2.0f, 2.0f, 21), cpu_tensor({t + 2, d}, dt, -1.0f, 1.0f, 22),
           cpu_tensor({t + 2, d}, dt, -1.0f, 1.0f, 23)},
          [f](const auto& in) {
            return f(in[0].transpose(1, 2), in[1].narrow(1, 1, d / 2), in[2].narrow(1, 3, d / 2));
          },
          1, std::string(rc.name) + " strided " + std::string(dtype_name(dt)));
    }
}

TEST(VulkanNnFused, TrackedInputsComposeAndMatch) {
  VK_DEVICE_OR_SKIP(dev);
  // a Var input is tracked: the hook is skipped (gradients flow through tensor ops); the
  // composed result still matches the CPU's fused one
  auto x = cpu_tensor({4, 2, 3, 8}, DType::F32, -2.0f, 2.0f, 24);
  auto a = cpu_tensor({8}, DType::F32, 0.5f, 1.5f, 25), c = cpu_tensor({3, 4}, DType::F32, -1.0f, 1.0f, 26);
  auto xv = Var::from_tensor(x.to_device(dev));
  auto av = a.to_device(dev), cv = c.to_device(dev);
  Tol t = tol_for(DType::F32);
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f;
  };
  const Op ops[] = {
      {"softmax", [](const Tensor& x, const Tensor&, const Tensor&) { return nn::ops::softmax_last_dim(x); }},
      {"rms_norm",
       [](const Tensor& x, const Tensor& a, const Tensor&) { return nn::ops::rms_norm(x, a, 1e-5f); }},
      {"layer_norm",
       [](const Tensor& x, const Tensor& a, const Tensor&) { return nn::ops::layer_norm(x, a, a, 1e-5f); }},
      {"rope",
       [](const Tensor& x, const Tensor&, const Tensor& c) { return nn::rotary_emb::rope(x, c, c); }}};
  for (const auto& op : ops) {
    Counted got = counted(dev, [&] { return op.f(xv.as_tensor(), av, cv); });
    EXPECT_TRUE(got.y.track_op()) << op.name;
    EXPECT_GT(got.dispatches, 1u) << op.name << ": composed ops expected";
    expect_close(to_f32(got.y), to_f32(op.f(x, a, c)), t.atol, t.rtol, std::string(op.name) + " tracked");
  }
}

TEST(VulkanNnFused, MixedDtypesCastAlphaThenFuse) {
  VK_DEVICE_OR_SKIP(dev);
  // xs f32 with an f16 alpha: nn casts alpha to xs' dtype (one dispatch), then the hook's kernel
  auto x = cpu_tensor({3, 20}, DType::F32, -2.0f, 2.0f, 27);
  auto a = cpu_tensor({20}, DType::F32, 0.5f, 1.5f, 28);
  auto a16 = a.to_dtype(DType::F16);
  Counted got = counted(dev, [&] { return nn::ops::rms_norm(x.to_device(dev), a16.to_device(dev), 1e-5f); });
  EXPECT_EQ(got.dispatches, 2u);
  EXPECT_EQ(got.round_trips, 0u);
  Tol t = tol_for(DType::F32);
  expect_close(to_f32(got.y), to_f32(nn::ops::rms_norm(x, a16.to_dtype(DType::F32), 1e-5f)), t.atol, t.rtol,
               "rms_norm f32 x f16 alpha");
}

TEST(VulkanNnFused, ADtypeWithoutKernelsComposesOnTheDevice) {
  VK_DEVICE_OR_SKIP(dev);
  // the hooks have no f64 kernels (nullptr): the custom op's forward composes tensor ops, and
  // the result is the CPU's fused one to rounding, on the Vulkan device
  auto x = cpu_tensor({4, 2, 3, 8}, DType::F64, -2.0f, 2.0f, 29);
  auto a = cpu_tensor({8}, DType::F64, 0.5f, 1.5f, 30), c = cpu_tensor({3, 4}, DType::F64, -1.0f, 1.0f, 31);
  auto xv = x.to_device(dev), av = a.to_device(dev), cv = c.to_device(dev);
  const float tol = 1e-6f;
  auto check_f64 = [&](const Tensor& got, const Tensor& want, const char* what) {
    EXPECT_TRUE(got.device().is_vulkan()) << what;
    EXPECT_EQ(got.dtype(), DType::F64) << what;
    EXPECT_EQ(got.shape(), want.shape()) << what;
    expect_close(to_f32(got), to_f32(want), tol, tol, what);
  };
  check_f64(nn::ops::softmax_last_dim(xv), nn::ops::softmax_last_dim(x), "softmax f64");
  check_f64(nn::ops::rms_norm(xv, av, 1e-5f), nn::ops::rms_norm(x, a, 1e-5f), "rms_norm f64");
  check_f64(nn::ops::layer_norm(xv, av, av, 1e-5f), nn::ops::layer_norm(x, a, a, 1e-5f), "layer_norm f64");
  check_f64(nn::rotary_emb::rope(xv, cv, cv), nn::rotary_emb::rope(x, c, c), "rope f64");
  check_f64(nn::rotary_emb::rope_i(xv, cv, cv), nn::rotary_emb::rope_i(x, c, c), "rope_i f64");
}

}  // namespace
}  // namespace candle
