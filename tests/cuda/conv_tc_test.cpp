// The backend's own conv2d / conv1d kernels on CUDA (cuDNN switched off with
// cuda::set_cudnn_enabled(false)) against the CPU in f32 on the same values: the tensor-core kernel
// (kernels/cuda/conv2d_tc.cu) for f16 / bf16 and for f32 with TF32 on, the exact CUDA-core kernel
// (conv2d.cu) for f32 otherwise and for problems thinner than one MMA step. Skipped where cuda:0
// does not open.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "candle/cuda.h"
#include "cuda_device.h"
#include "test_device.h"

namespace candle {
namespace {

#define NEED_GPU() NEED_CUDA_DEVICE()

// The test's scope runs the backend's own convolution kernels (cuDNN off) with TF32 as asked;
// both switches are restored after.
class OwnKernels {
 public:
  explicit OwnKernels(bool tf32) : cudnn_(cuda::cudnn_enabled()), tf32_(cuda::gemm_reduced_precision_f32()) {
    cuda::set_cudnn_enabled(false);
    cuda::set_gemm_reduced_precision_f32(tf32);
  }
  ~OwnKernels() {
    cuda::set_cudnn_enabled(cudnn_);
    cuda::set_gemm_reduced_precision_f32(tf32_);
  }
  OwnKernels(const OwnKernels&) = delete;
  OwnKernels& operator=(const OwnKernels&) = delete;

 private:
  bool cudnn_, tf32_;
};

struct Case {
  size_t b, ci, co, h, w, k, pad, stride, dil, groups;
};

std::string describe(const Case& c) {
  return "b" + std::to_string(c.b) + " " + std::to_string(c.ci) + "->" + std::to_string(c.co) + " " +
         std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.k) + " p" +
         std::to_string(c.pad) + " s" + std::to_string(c.stride) + " d" + std::to_string(c.dil) + " g" +
         std::to_string(c.groups);
}

// Tails in every direction: c_out 17 / 34 (groups 2) / 130 against 64- and 128-row tiles, K = 27
// and 45 (one and two 32-deep slices, not a multiple of 8: scalar weight loads), 200 / 360 / 576
// (many slices with a tail, 16-byte weight loads), 16 (1x1), images of 7x9 .. 40x40 against
// 128-pixel tiles; 1x1 with c_in 3 (K = 3) takes the CUDA-core kernel.
const std::vector<Case>& cases() {
  static const std::vector<Case> v = {
      {2, 3, 17, 7, 9, 3, 1, 1, 1, 1},     {2, 3, 64, 33, 31, 3, 1, 2, 1, 1},
      {1, 16, 130, 33, 31, 1, 0, 1, 1, 1}, {2, 8, 64, 33, 31, 5, 2, 1, 2, 1},
      {2, 6, 34, 17, 13, 3, 1, 1, 1, 2},   {1, 5, 32, 12, 12, 3, 1, 1, 1, 1},
      {1, 40, 48, 20, 24, 3, 1, 1, 1, 1},  {1, 64, 64, 40, 40, 3, 1, 1, 1, 1},
      {2, 3, 17, 7, 9, 1, 0, 1, 1, 1},     {2, 32, 130, 9, 11, 3, 2, 2, 1, 1},
  };
  return v;
}

enum class Input { Contiguous, Narrowed, Permuted };

// The values rounded to dt (what the device computes with), back in f32 on the CPU.
Tensor rounded(const Tensor& t, DType dt) { return t.to_dtype(dt).to_dtype(DType::F32); }

// x [b, ci, h, w] as a contiguous tensor, narrowed from a wider image along w, or a channels-last
// tensor permuted to NCHW (channel stride 1): the CPU's f32 view of values rounded to dt and the
// same view of the device's dt copy.
std::pair<Tensor, Tensor> make_input(const Device& dev, DType dt, const Case& c, Input kind) {
  const Device cpu = Device::cpu();
  switch (kind) {
    case Input::Narrowed: {
      Tensor big = rounded(Tensor::randn(0.0, 1.0, {c.b, c.ci, c.h, c.w + 5}, DType::F32, cpu), dt);
      return {big.narrow(3, 2, c.w), big.to_dtype(dt).to_device(dev).narrow(3, 2, c.w)};
    }
    case Input::Permuted: {
      Tensor nhwc = rounded(Tensor::randn(0.0, 1.0, {c.b, c.h, c.w, c.ci}, DType::F32, cpu), dt);
      return {nhwc.permute({0, 3, 1, 2}), nhwc.to_dtype(dt).to_device(dev).permute({0, 3, 1, 2})};
    }
    default: {
      Tensor x = rounded(Tensor::randn(0.0, 1.0, {c.b, c.ci, c.h, c.w}, DType::F32, cpu), dt);
      return {x, x.to_dtype(dt).to_device(dev)};
    }
  }
}

double rms(const Tensor& t) { return std::sqrt(t.to_dtype(DType::F64).sqr().mean_all().to_scalar<double>()); }

struct ConvRun {
  Tensor got;   // the device's result, on the CPU in f32
  Tensor want;  // the CPU's f32 result on the same (rounded) values
};

// conv2d (fused with bias + activation when `act` is set) of a case on the device in dt, and
// the CPU's f32 reference; no CPU round-trip allowed on the device.
ConvRun conv_case(const Device& dev, DType dt, const Case& c, Input kind, std::optional<UnaryOp> act,
                  uint64_t seed) {
  Device::cpu().set_seed(seed);
  auto [x, xd] = make_input(dev, dt, c, kind);
  Tensor w = Tensor::randn(0.0, 0.3, {c.co, c.ci / c.groups, c.k, c.k}, DType::F32, Device::cpu());
  Tensor bias = Tensor::randn(0.0, 0.5, {c.co}, DType::F32, Device::cpu());
  w = rounded(w, dt);
  bias = rounded(bias, dt);
  Tensor wd = w.to_dtype(dt).to_device(dev), bd = bias.to_dtype(dt).to_device(dev);
  reset_backend_stats();
  cuda::reset_stats();
  Tensor y = act ? xd.conv2d_fused(wd, bd, c.pad, c.stride, c.dil, c.groups, act)
                 : xd.conv2d(wd, c.pad, c.stride, c.dil, c.groups);
  Tensor got = y.to_device(Device::cpu()).to_dtype(DType::F32);
  const auto st = cuda::stats();
  EXPECT_TRUE(st.round_trips.empty()) << describe(c) << ": CPU round-trip of "
                                      << (st.round_trips.empty() ? "" : st.round_trips.begin()->first);
  test_device::expect_no_round_trips(dev, describe(c));
  Tensor want = act ? x.conv2d_fused(w, bias, c.pad, c.stride, c.dil, c.groups, act)
                    : x.conv2d(w, c.pad, c.stride, c.dil, c.groups);
  EXPECT_EQ(y.dtype(), dt);
  return {got, want};
}

// f16 / bf16: products exact in the f32 accumulator, one rounding of the result to the storage
// type (half an ulp: 2^-11 relative for f16, 2^-8 for bf16), so rtol = two half-ulps; the atol
// (a small fraction of the output's rms) only covers the accumulators' different order of sums.
void check_half(DType dt, double rtol) {
  NEED_GPU();
  OwnKernels own(false);
  uint64_t seed = 10;
  for (const Case& c : cases()) {
    for (Input kind : {Input::Contiguous, Input::Narrowed, Input::Permuted}) {
      for (bool fused : {false, true}) {
        const std::optional<UnaryOp> act =
            fused ? std::optional<UnaryOp>(c.co % 2 ? UnaryOp::Silu : UnaryOp::Relu) : std::nullopt;
        ConvRun r = conv_case(dev, dt, c, kind, act, ++seed);
        const std::string what = std::string(dtype_name(dt)) + " " + describe(c) + " input " +
                                 std::to_string(static_cast<int>(kind)) + (fused ? " bias+act" : "");
        test_device::expect_close(r.got, r.want, 1e-4 * rms(r.want), rtol, what);
      }
    }
  }
}

TEST(CudaConvTc, F16MatchesTheCpu) { check_half(DType::F16, 1e-3); }

TEST(CudaConvTc, Bf16MatchesTheCpu) { check_half(DType::BF16, 8e-3); }

// TF32 keeps 10 of f32's 23 mantissa bits: each operand is off by up to 2^-11 relative, so a sum of
// K products is off by about 2^-11 of the output's rms (5e-4); allowed: 5e-3 of the rms plus 1e-3
// relative. Off again, f32 is the exact FMA kernel: only the order of the f32 sums differs from
// the CPU (1e-5 relative, 1e-5 of the rms).
TEST(CudaConvTc, F32UsesTf32OnlyWhenAskedFor) {
  NEED_GPU();
  uint64_t seed = 500;
  for (const Case& c : cases()) {
    for (Input kind : {Input::Contiguous, Input::Permuted}) {
      ++seed;
      Tensor tf32_got;
      {
        OwnKernels own(true);
        ConvRun r = conv_case(dev, DType::F32, c, kind, UnaryOp::Relu, seed);
        test_device::expect_close(r.got, r.want, 5e-3 * rms(r.want), 1e-3, "tf32 " + describe(c));
        tf32_got = r.got;
      }
      OwnKernels own(false);
      ConvRun r = conv_case(dev, DType::F32, c, kind, UnaryOp::Relu, seed);
      // exact f32 products here; the CPU reference takes its 3x3 f32 convolutions through Winograd
      // transforms, whose rounding grows with the K products of an output (seen: 1.2e-4 on 4.2 at
      // K 360, 8e-5 on 0.85 at K 576)
      const double k_len = static_cast<double>(c.ci / c.groups * c.k * c.k);
      test_device::expect_close(r.got, r.want, 1e-6 * k_len * rms(r.want), 1e-5, "f32 " + describe(c));
      // the tensor-core cases (K and c_out per group of 16 and more) rounded their operands
      if (c.ci / c.groups * c.k * c.k >= 16 && c.co / c.groups >= 16) {
        const double diff = (tf32_got - r.got).abs().max_all().to_scalar<float>();
        EXPECT_GT(diff, 0.0) << describe(c) << ": TF32 gave the exact f32 result";
      }
    }
  }
}

// conv1d takes the same kernels (as a 1 x l image).
TEST(CudaConvTc, Conv1dF16MatchesTheCpu) {
  NEED_GPU();
  OwnKernels own(false);
  Device::cpu().set_seed(7);
  for (size_t groups : {1, 2}) {
    Tensor x = rounded(Tensor::randn(0.0, 1.0, {2, 16, 77}, DType::F32, Device::cpu()), DType::F16);
    Tensor w = rounded(Tensor::randn(0.0, 0.3, {48, 16 / groups, 5}, DType::F32, Device::cpu()), DType::F16);
    reset_backend_stats();
    Tensor got = x.to_dtype(DType::F16)
                     .to_device(dev)
                     .conv1d(w.to_dtype(DType::F16).to_device(dev), 2, 2, 1, groups)
                     .to_device(Device::cpu())
                     .to_dtype(DType::F32);
    test_device::expect_no_round_trips(dev, "conv1d");
    Tensor want = x.conv1d(w, 2, 2, 1, groups);
    test_device::expect_close(got, want, 1e-4 * rms(want), 1e-3, "conv1d g" + std::to_string(groups));
  }
}

// The switch itself: off, cuDNN is not used (the own kernels answer); the state reads back.
TEST(CudaConvTc, CudnnSwitchReadsBack) {
  const bool was = cuda::cudnn_enabled();
  cuda::set_cudnn_enabled(false);
  EXPECT_FALSE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(true);
  EXPECT_TRUE(cuda::cudnn_enabled());
  cuda::set_cudnn_enabled(was);
}

}  // namespace
}  // namespace candle
