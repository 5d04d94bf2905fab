// GGML quantized tensors on CUDA (src/cuda/ops_quant.cpp): for every quantized type, weights
// quantized on the CPU and put on cuda:0 from the same bytes dequantize there to the CPU's values
// exactly, and QMatMul::forward on cuda:0 (decode m <= 8: 8-bit activations and dp4a; prefill m > 8:
// f16 dequantization and cuBLAS) matches the exact (f64) product of the dequantized weight, as the
// CPU's QMatMul does, with no CPU fallback. Skipped where cuda:0 does not open.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "candle/cuda.h"
#include "candle/nn/attention.h"
#include "candle/nn/ops.h"
#include "candle/quantized/quantized.h"
#include "cuda_device.h"
#include "test_device.h"

namespace candle {
namespace {

using quantized::GgmlDType;
using quantized::QMatMul;
using quantized::QTensor;

#define NEED_CUDA() NEED_CUDA_DEVICE()

constexpr GgmlDType kTypes[] = {GgmlDType::Q4_0,   GgmlDType::Q4_1,  GgmlDType::Q5_0, GgmlDType::Q5_1,
                                GgmlDType::Q8_0,   GgmlDType::Q8_1,  GgmlDType::Q2K,  GgmlDType::Q3K,
                                GgmlDType::Q4K,    GgmlDType::Q5K,   GgmlDType::Q6K,  GgmlDType::Q8K,
                                GgmlDType::IQ4_NL, GgmlDType::IQ4_XS};

std::string name(GgmlDType t) { return std::string(quantized::ggml_dtype_name(t)); }

// The k values each type is tested with: 512 for all, 256 (a single super-block) for the
// 256-blocks, and for the benchmark types 4352 (17 super-blocks: rows whose items do not divide
// evenly among a warp's lanes).
std::vector<size_t> ks_of(GgmlDType t) {
  std::vector<size_t> ks = {512};
  if (quantized::ggml_block_size(t) == 256) ks.insert(ks.begin(), 256);
  // rows of 136 items (q4_0): the decode kernel's 4 warps a row, for every type whose blocks it
  // reads with Span's aligned 8-byte loads too (Q5_0, IQ4_NL, Q8_1 beside Q4_0, Q8_0, Q6_K)
  if (t == GgmlDType::Q4_0 || t == GgmlDType::Q8_0 || t == GgmlDType::Q4K || t == GgmlDType::Q6K ||
      t == GgmlDType::Q5_0 || t == GgmlDType::IQ4_NL || t == GgmlDType::Q8_1)
    ks.push_back(4352);
  if (t == GgmlDType::Q4_0) ks.push_back(2048);  // 64 items: 2 warps a row
  return ks;
}

// n = 70: not a multiple of the kernels' rows per thread block (4)
constexpr size_t kN = 70;

// A QTensor of `t` quantized on the CPU, and the same bytes on `dev`.
std::pair<QTensor, QTensor> weights(GgmlDType t, size_t n, size_t k, const Device& dev, uint64_t seed) {
  Device cpu = Device::cpu();
  cpu.set_seed(seed);
  Tensor w = Tensor::randn(0.f, 1.f, {n, k}, cpu);
  QTensor q = QTensor::quantize(w, t);
  auto bytes = std::make_shared<std::vector<uint8_t>>(q.data().begin(), q.data().end());
  QTensor on_dev =
      QTensor::from_bytes(bytes, std::span<const uint8_t>(bytes->data(), bytes->size()), q.shape(), t, dev);
  return {q, on_dev};
}

void reset_counters() {
  reset_backend_stats();
  cuda::reset_stats();
}

void expect_no_fallbacks(const std::string& what) {
  for (const auto& [op, n] : backend_stats())
    if (n) ADD_FAILURE() << what << ": " << op << " took " << n << " CPU fallback(s)";
  auto s = cuda::stats();
  for (const auto& [op, n] : s.round_trips)
    if (n) ADD_FAILURE() << what << ": cuda round-trip " << op << " x" << n;
}

// |got - want| <= tol * sum_i |w_ji| |x_i| for every output, want the f64 product of the
// dequantized weight wd (n, k) with x (m, k) as given (f16 x: its f16 values).
void expect_product(const Tensor& got, const Tensor& x, const Tensor& wd, double tol,
                    const std::string& what) {
  const size_t m = x.dims()[0], k = x.dims()[1], n = wd.dims()[0];
  ASSERT_EQ(got.dims(), (std::vector<size_t>{m, n})) << what;
  auto xv = x.to_device(Device::cpu()).to_dtype(DType::F64).flatten_to_vec<double>();
  auto wv = wd.to_device(Device::cpu()).to_dtype(DType::F64).flatten_to_vec<double>();
  auto gv = got.to_device(Device::cpu()).to_dtype(DType::F64).flatten_to_vec<double>();
  size_t bad = 0;
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double exact = 0, scale = 0;
      for (size_t l = 0; l < k; ++l) {
        exact += wv[j * k + l] * xv[i * k + l];
        scale += std::fabs(wv[j * k + l] * xv[i * k + l]);
      }
      const double err = std::fabs(gv[i * n + j] - exact);
      if (!(err <= tol * scale) && ++bad <= 3)
        ADD_FAILURE() << what << ": y[" << i << "][" << j << "] = " << gv[i * n + j] << ", exact " << exact
                      << ", error " << err / scale << " of sum|w x|";
    }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(CudaQuantized, DequantizeGivesTheCpuValuesExactly) {
  NEED_CUDA();
  for (GgmlDType t : kTypes)
    for (size_t k : ks_of(t)) {
      auto [cpu_q, dev_q] = weights(t, kN, k, dev, 7);
      const std::string what = name(t) + " k " + std::to_string(k);
      EXPECT_EQ(dev_q.device_data().device().kind(), DeviceKind::Cuda) << what;
      reset_counters();
      Tensor f32 = dev_q.dequantize(dev), f16 = dev_q.dequantize_f16(dev);
      EXPECT_EQ(f32.device().kind(), DeviceKind::Cuda) << what;
      EXPECT_EQ(f32.dtype(), DType::F32) << what;
      EXPECT_EQ(f16.dtype(), DType::F16) << what;
      EXPECT_EQ(f32.to_device(Device::cpu()).flatten_to_vec<float>(),
                cpu_q.dequantize(Device::cpu()).flatten_to_vec<float>())
          << what;
      EXPECT_EQ(f16.to_device(Device::cpu()).to_dtype(DType::F32).flatten_to_vec<float>(),
                cpu_q.dequantize_f16(Device::cpu()).to_dtype(DType::F32).flatten_to_vec<float>())
          << what;
      expect_no_fallbacks(what);
    }
}

TEST(CudaQuantized, FloatTypesDequantizeOnTheDevice) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  cpu.set_seed(3);
  Tensor w = Tensor::randn(0.f, 1.f, {5, 37}, cpu);
  for (GgmlDType t : {GgmlDType::F32, GgmlDType::F16, GgmlDType::BF16}) {
    QTensor q = QTensor::quantize(w, t);
    auto bytes = std::make_shared<std::vector<uint8_t>>(q.data().begin(), q.data().end());
    QTensor d =
        QTensor::from_bytes(bytes, std::span<const uint8_t>(bytes->data(), bytes->size()), q.shape(), t, dev);
    EXPECT_EQ(d.dequantize(dev).to_device(cpu).flatten_to_vec<float>(),
              q.dequantize(cpu).flatten_to_vec<float>())
        << name(t);
  }
}

// f16 / bf16 weights on the GPU stay in their type (QMatMul keeps the QTensor: half the bytes of the
// f32 copy the CPU uses). Decode rows (m = 1; k a multiple of 8): the matrix-vector kernel, x in
// f32, within 1e-5 of sum|w x| (plus the output's rounding to x's type); prefill (m = 40) and a k
// of 100: cuBLAS on the weight's bytes, x rounded to the weight's type, within 2^-10 (f16) / 2^-7
// (bf16). k = 4352: four warps a row.
TEST(CudaQuantized, HalfWeightsMultiplyInTheirOwnType) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  for (GgmlDType t : {GgmlDType::F16, GgmlDType::BF16})
    for (size_t k : {size_t(96), size_t(100), size_t(4352)}) {
      auto [cpu_q, dev_q] = weights(t, kN, k, dev, 21);
      QMatMul cpu_mm = QMatMul::from_qtensor(cpu_q), dev_mm = QMatMul::from_qtensor(dev_q);
      EXPECT_EQ(dev_mm.dtype(), t) << name(t);
      EXPECT_EQ(cpu_mm.dtype(), t) << name(t);  // the CPU reads the half weights in place too
      Tensor wd = cpu_q.dequantize(cpu);
      for (size_t m : {size_t(1), size_t(40)})
        for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
          const std::string what = name(t) + " k " + std::to_string(k) + " m " + std::to_string(m) + " " +
                                   std::string(dtype_name(dt));
          cpu.set_seed(200 + m);
          Tensor x = Tensor::randn(0.f, 1.f, {m, k}, cpu).to_dtype(dt);
          reset_counters();
          Tensor y = dev_mm.forward(x.to_device(dev));
          dev.synchronize();
          expect_no_fallbacks(what);
          EXPECT_EQ(y.dtype(), dt) << what;
          const double in_type = m == 1 && k % 8 == 0 ? 1e-5 : (t == GgmlDType::F16 ? 1e-3 : 8e-3);
          expect_product(y, x, wd, in_type + (dt == DType::F32 ? 0.0 : 4e-3), what);
        }
    }
}

// Decode (m = 1, 3, 8) and prefill (m = 33), f32 and f16 x, with a leading batch dim for m = 3.
TEST(CudaQuantized, QMatMulMatchesTheExactProduct) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  for (GgmlDType t : kTypes)
    for (size_t k : ks_of(t)) {
      auto [cpu_q, dev_q] = weights(t, kN, k, dev, 11);
      QMatMul cpu_mm = QMatMul::from_qtensor(cpu_q), dev_mm = QMatMul::from_qtensor(dev_q);
      Tensor wd = cpu_q.dequantize(cpu);
      for (size_t m : {size_t(1), size_t(3), size_t(8), size_t(33)})
        for (DType dt : {DType::F32, DType::F16}) {
          const std::string what = name(t) + " k " + std::to_string(k) + " m " + std::to_string(m) + " " +
                                   std::string(dtype_name(dt));
          cpu.set_seed(100 + m);
          Tensor x = Tensor::randn(0.f, 1.f, {m, k}, cpu).to_dtype(dt);
          Tensor xd = x.to_device(dev);
          if (m == 3) xd = xd.reshape({1, 3, k});
          reset_counters();
          Tensor y = dev_mm.forward(xd);
          dev.synchronize();
          expect_no_fallbacks(what);
          EXPECT_EQ(y.device().kind(), DeviceKind::Cuda) << what;
          EXPECT_EQ(y.dtype(), dt) << what;
          if (m == 3) {
            EXPECT_EQ(y.dims(), (std::vector<size_t>{1, 3, kN})) << what;
            y = y.reshape({3, kN});
          }
          // decode: 8-bit activations (an error of at most amax / 254 per element of each block of
          // 32, about 1% of sum|w x| for normal x if every error had the same sign; they cancel, and
          // 5e-3 is several times what an emulation of the kernels on the CPU gives); prefill: f16
          // operands (2 * 2^-11), plus f16 output rounding (2^-11) for f16 x
          const double tol = m <= 8 ? 5e-3 : (dt == DType::F16 ? 2e-3 : 1.5e-3);
          expect_product(y, x, wd, tol, "cuda " + what);
          // the CPU has no Q8_1 / Q8_K weight kernels (activation types in ggml)
          if (t != GgmlDType::Q8_1 && t != GgmlDType::Q8K)
            expect_product(cpu_mm.forward(x), x, wd, 1e-2, "cpu " + what);
        }
    }
}

TEST(CudaQuantized, QMatMulTakesBf16AndEmptyInputs) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  auto [cpu_q, dev_q] = weights(GgmlDType::Q4K, kN, 256, dev, 5);
  QMatMul mm = QMatMul::from_qtensor(dev_q);
  cpu.set_seed(9);
  Tensor x = Tensor::randn(0.f, 1.f, {2, 256}, cpu).to_dtype(DType::BF16);
  reset_counters();
  Tensor y = mm.forward(x.to_device(dev));
  expect_no_fallbacks("bf16");
  EXPECT_EQ(y.dtype(), DType::BF16);
  expect_product(y, x, cpu_q.dequantize(cpu), 5e-3 + 4e-3, "bf16");  // plus bf16 output rounding (2^-8)
  Tensor e = mm.forward(Tensor::zeros({0, 256}, DType::F32, dev));
  EXPECT_EQ(e.dims(), (std::vector<size_t>{0, kN}));
}

TEST(CudaQuantized, QuantizingADeviceTensorKeepsItOnTheDevice) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  cpu.set_seed(21);
  Tensor w = Tensor::randn(0.f, 1.f, {8, 64}, cpu);
  QTensor q = QTensor::quantize(w.to_device(dev), GgmlDType::Q8_0);
  EXPECT_EQ(q.device().kind(), DeviceKind::Cuda);
  EXPECT_EQ(q.dequantize(dev).to_device(cpu).flatten_to_vec<float>(),
            QTensor::quantize(w, GgmlDType::Q8_0).dequantize(cpu).flatten_to_vec<float>());
}

TEST(CudaQuantized, AnInputOnAnotherDeviceIsAClearError) {
  NEED_CUDA();
  auto [cpu_q, dev_q] = weights(GgmlDType::Q4_0, 8, 64, dev, 1);
  Tensor x = Tensor::zeros({1, 64}, DType::F32, Device::cpu());
  try {
    QMatMul::from_qtensor(dev_q).forward(x);
    FAIL() << "a cpu input with a cuda weight multiplied";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DeviceMismatch);
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  try {
    QMatMul::from_qtensor(cpu_q).forward(x.to_device(dev));
    FAIL() << "a cuda input with a cpu weight multiplied";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DeviceMismatch);
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  // the wrong last dim names both sizes
  try {
    QMatMul::from_qtensor(dev_q).forward(Tensor::zeros({1, 32}, DType::F32, dev));
    FAIL() << "k mismatch accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShapeMismatch);
  }
}

}  // namespace
}  // namespace candle

namespace candle {
namespace {

// The activations of a decode step quantized by the ops that make them (rms_norm, add_rms_norm and
// silu_mul write, in the same launch, the quantized forms that quantized matmuls took of their
// earlier outputs): QMatMul::forward on such an output skips its quantization launch and gives, bit for bit,
// the product of a copy of the same values (which it quantizes itself), for blocks of 32 (Q4_0) and
// of 256 (Q4_K, Q6_K), rows a warp takes (d 96, 256) and a block takes (4352), f32 / f16 / bf16, 1-8
// rows. A write into the output in place (slice_set, zero_set) drops the quantized form.
TEST(CudaQuantized, ActivationsQuantizedByTheirProducerGiveTheSameProduct) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q6K})
    for (size_t d : {size_t(96), size_t(256), size_t(4352)}) {
      if (d % quantized::ggml_block_size(t) != 0) continue;
      auto [cpu_q, dev_q] = weights(t, kN, d, dev, 3);
      const QMatMul mm = QMatMul::from_qtensor(dev_q);
      for (DType dt : {DType::F32, DType::F16, DType::BF16})
        for (size_t m : {size_t(1), size_t(3), size_t(8)}) {
          const std::string what = name(t) + " d " + std::to_string(d) + " " + std::string(dtype_name(dt)) +
                                   " m " + std::to_string(m);
          cpu.set_seed(7 + m);
          auto on_dev = [&](const Tensor& v) { return v.to_dtype(dt).to_device(dev); };
          const Tensor x = on_dev(Tensor::randn(0.f, 2.f, {m, d}, cpu));
          const Tensor r = on_dev(Tensor::randn(0.f, 1.f, {m, d}, cpu));
          const Tensor alpha = on_dev(Tensor::randn(1.f, 0.5f, {d}, cpu));
          // each op learns the form of this weight from a first product of its output
          (void)mm.forward(nn::ops::add_rms_norm(x, r, alpha, 1e-5f).second);
          (void)mm.forward(nn::ops::rms_norm(x, alpha, 1e-5f));
          (void)mm.forward(nn::ops::silu_mul(x, r));
          // the launches of a product of `v`, and its values against those of a copy of v
          auto check = [&](const Tensor& v, uint64_t launches, const std::string& op) {
            const uint64_t before = cuda::stats().launches;
            const Tensor y = mm.forward(v);
            EXPECT_EQ(cuda::stats().launches - before, launches) << what << " " << op;
            const Tensor want = mm.forward(v.copy());
            EXPECT_EQ(y.to_device(cpu).to_dtype(DType::F32).flatten_to_vec<float>(),
                      want.to_device(cpu).to_dtype(DType::F32).flatten_to_vec<float>())
                << what << " " << op;
          };
          const uint64_t cast = dt == DType::F32 ? 1 : 2;  // qmatvec, and the output's cast
          const auto [sum, normed] = nn::ops::add_rms_norm(x, r, alpha, 1e-5f);
          check(normed, cast, "add_rms_norm");
          check(sum, cast + 1, "add_rms_norm's sum (not quantized)");
          check(nn::ops::rms_norm(x, alpha, 1e-5f), cast, "rms_norm");
          check(nn::ops::silu_mul(x, r), cast, "silu_mul");
          // written in place: quantized again by the product
          const Tensor h = nn::ops::silu_mul(x, r);
          h.slice_set(r.narrow(0, 0, 1), 0, 0);
          check(h, cast + 1, "silu_mul, then slice_set");
          const auto [s2, n2] = nn::ops::add_rms_norm(x, r, alpha, 1e-5f);
          n2.zero_set();
          check(n2, cast + 1, "add_rms_norm, then zero_set");
          EXPECT_EQ(mm.forward(n2).to_device(cpu).to_dtype(DType::F32).flatten_to_vec<float>(),
                    std::vector<float>(m * kN, 0.0f))
              << what;
        }
    }
}

// The same for a decode step's attention output (the decode kernel quantizes each kv head's rows,
// [b, 1, h dv] for the output projection): blocks of 32 always, units of 256 where a kv head's rows
// make whole units (GQA 8 x 64 and 2 x 128: yes; 4 heads of 64 without GQA: no, so a Q4_K weight
// quantizes for itself), one and two batch rows, keys in one split and in several.
TEST(CudaQuantized, AttentionOutputsQuantizedByTheDecodeKernelGiveTheSameProduct) {
  NEED_CUDA();
  Device cpu = Device::cpu();
  struct Shape4 {
    size_t b, h, hkv, d, tk;
  };
  for (const Shape4 sh : {Shape4{1, 8, 1, 64, 40}, Shape4{2, 4, 4, 64, 700}, Shape4{1, 4, 2, 128, 2047}})
    for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4K}) {
      const size_t k = sh.h * sh.d;
      auto [cpu_q, dev_q] = weights(t, kN, k, dev, 5);
      const QMatMul mm = QMatMul::from_qtensor(dev_q);
      const bool fused = t == GgmlDType::Q4_0 || (sh.h / sh.hkv * sh.d) % 256 == 0;
      for (DType dt : {DType::F32, DType::BF16}) {
        const std::string what = name(t) + " b " + std::to_string(sh.b) + " h " + std::to_string(sh.h) + "/" +
                                 std::to_string(sh.hkv) + " d " + std::to_string(sh.d) + " keys " +
                                 std::to_string(sh.tk) + " " + std::string(dtype_name(dt));
        cpu.set_seed(sh.tk);
        auto on_dev = [&](const Tensor& v) { return v.to_dtype(dt).to_device(dev); };
        const Tensor q = on_dev(Tensor::randn(0.f, 1.f, {sh.b, sh.h, 1, sh.d}, cpu));
        const Tensor kk = on_dev(Tensor::randn(0.f, 1.f, {sh.b, sh.hkv, sh.tk, sh.d}, cpu));
        const Tensor v = on_dev(Tensor::randn(0.f, 1.f, {sh.b, sh.hkv, sh.tk, sh.d}, cpu));
        auto attention = [&] {
          const Tensor y =
              nn::ops::scaled_dot_product_attention(q, kk, v, 0.125, true, std::nullopt, std::nullopt);
          return y.transpose(1, 2).reshape({sh.b, 1, k});
        };
        (void)mm.forward(attention());  // the kernel learns the form of this weight
        const Tensor x = attention();
        const uint64_t cast = dt == DType::F32 ? 1 : 2;  // qmatvec, and the output's cast
        const uint64_t before = cuda::stats().launches;
        const Tensor got = mm.forward(x);
        EXPECT_EQ(cuda::stats().launches - before, cast + (fused ? 0 : 1)) << what;
        EXPECT_EQ(got.to_device(cpu).to_dtype(DType::F32).flatten_to_vec<float>(),
                  mm.forward(x.copy()).to_device(cpu).to_dtype(DType::F32).flatten_to_vec<float>())
            << what;
      }
    }
}
}  // namespace
}  // namespace candle
