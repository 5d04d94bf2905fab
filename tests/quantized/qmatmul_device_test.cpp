// QMatMul on every GPU device present, with the weight's blocks on that device: a device with
// quantized kernels for the type (CUDA: every type; Vulkan: f16, bf16, the legacy, K and IQ4
// types) multiplies there; otherwise the weight is dequantized and multiplied on the device,
// counted as the round-trip "qmatmul_dequantize". CUDA's product equals the CPU's within the
// rounding of the activations (both quantize them to 8 bits for m <= 8); Vulkan's uses f32
// activations, so it equals the exact product of the dequantized weight up to f32 summation.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <span>

#include "candle/candle.h"
#include "candle/quantized/quantized.h"
#include "test_device.h"

using namespace candle;
using namespace candle::quantized;

CANDLE_GPU_DEVICE_TEST_SUITE(QMatMulDevice);

namespace {

// the types whose blocks Vulkan dequantizes and multiplies with its own kernels (ops_quant.cpp)
constexpr GgmlDType kVulkanTypes[] = {GgmlDType::F16,    GgmlDType::BF16,  GgmlDType::Q4_0, GgmlDType::Q4_1,
                                      GgmlDType::Q5_0,   GgmlDType::Q5_1,  GgmlDType::Q8_0, GgmlDType::Q2K,
                                      GgmlDType::Q3K,    GgmlDType::Q4K,   GgmlDType::Q5K,  GgmlDType::Q6K,
                                      GgmlDType::IQ4_NL, GgmlDType::IQ4_XS};

// whether `dev` multiplies weights of type t with quantized kernels (no "qmatmul_dequantize")
bool has_kernels(const Device& dev, GgmlDType t) {
  if (dev.kind() == DeviceKind::Cuda) return true;
  if (dev.kind() == DeviceKind::Vulkan)
    return std::find(std::begin(kVulkanTypes), std::end(kVulkanTypes), t) != std::end(kVulkanTypes);
  return false;
}

std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<float> v = t.to_device(Device::cpu()).to_dtype(DType::F32).flatten_all().to_vec1<float>();
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

}  // namespace

CANDLE_DEVICE_TEST(QMatMulDevice, MultipliesOnTheDevice) {
  struct Case {
    GgmlDType t;
    size_t k;
  };
  std::vector<Case> cases;
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q8_0, GgmlDType::Q6K, GgmlDType::Q5K,
                      GgmlDType::Q3K, GgmlDType::Q2K, GgmlDType::IQ4_XS})
    for (size_t k : {256, 512}) cases.push_back({t, k});
  // k not a multiple of 256 (three blocks of 32)
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q8_0, GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1,
                      GgmlDType::IQ4_NL})
    cases.push_back({t, 96});
  for (const Case& c : cases)
    if (!has_kernels(dev, c.t))
      allow_round_trip(GetParam(), "qmatmul_dequantize");  // no kernels for the type there
  Device cpu = Device::cpu();
  cpu.set_seed(11);
  for (const Case& c : cases) {
    const std::string what = std::string(ggml_dtype_name(c.t)) + " k=" + std::to_string(c.k);
    Tensor w = Tensor::randn(0.f, 1.f, {24, c.k}, cpu);
    QTensor q = QTensor::quantize(w, c.t);
    QTensor qd = QTensor::quantize(w.to_device(dev), c.t);
    const bool kernels = has_kernels(dev, c.t);
    if (kernels) {
      EXPECT_TRUE(qd.device_data().defined()) << what;
    }
    QMatMul mm = QMatMul::from_qtensor(qd);
    // m = 1 and 3: the matrix-vector kernels (decoding); 16: dequantize + GEMM (prefill)
    for (size_t m : {1, 3, 16}) {
      const std::string wm = what + " m=" + std::to_string(m);
      Tensor x = Tensor::randn(0.f, 1.f, {m, c.k}, cpu);
      reset_backend_stats();
      Tensor y = mm.forward(x.to_device(dev));
      EXPECT_EQ(y.device().kind(), dev.kind());
      EXPECT_EQ(backend_stats()["qmatmul_dequantize"], kernels ? 0u : 1u) << wm;
      // the exact product of the dequantized weight, against the 8-bit-activation kernels
      Tensor exact = x.matmul(q.dequantize(cpu).t());
      auto rel = [&](const Tensor& got) {
        return ((got - exact).sqr().mean_all() / exact.sqr().mean_all()).sqrt().to_scalar<float>();
      };
      if (dev.kind() == DeviceKind::Cuda) {
        EXPECT_LT(rel(y.to_device(cpu)), 0.02f) << wm;
      } else {
        // Vulkan (f32 activations and accumulation, the weight's values exactly) and the host
        // dequantize path: the f32 product summed in another order, within 1e-4 relative (1e-3
        // absolute for outputs near zero; the terms are of order 1 and k <= 512)
        test_device::expect_close(y.to_device(cpu), exact, 1e-3, 1e-4, wm);
        EXPECT_LT(rel(y.to_device(cpu)), 1e-5f) << wm;
      }
      EXPECT_LT(rel(QMatMul::from_qtensor(q).forward(x)), 0.02f) << wm;
    }
  }
}

// CUDA's decode row (m = 1, f32: one launch that quantizes x in shared memory, qmatvec1) against the
// CPU's quantized product, which quantizes x the same way and takes the same integer dot products:
// equal up to the order of the f32 sums. The shapes make warps take several rows (9000 rows of 256:
// more than the grid has warps), rows of an odd count of items a lane (k = 11008 = 43 * 256, the
// LLaMA-7B down projection's) and a row too long for the kernel's shared memory (k = 65536: the two
// launches instead).
CANDLE_DEVICE_TEST(QMatMulDevice, DecodeRowEqualsTheCpusQuantizedProduct) {
  if (dev.kind() != DeviceKind::Cuda) GTEST_SKIP() << "CUDA's one-row kernel";
  Device cpu = Device::cpu();
  cpu.set_seed(17);
  struct Case {
    size_t n, k;
  };
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q5K,
                      GgmlDType::Q2K, GgmlDType::IQ4_XS, GgmlDType::Q4_1})
    for (Case c : {Case{9000, 256}, Case{40, 11008}, Case{3, 65536}}) {
      const std::string what =
          std::string(ggml_dtype_name(t)) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
      const QTensor q = QTensor::quantize(Tensor::randn(0.f, 1.f, {c.n, c.k}, cpu), t);
      const Tensor x = Tensor::randn(0.f, 1.f, {1, c.k}, cpu);
      const Tensor want = QMatMul::from_qtensor(q).forward(x);
      const QTensor qd = q.narrow(0, c.n, dev);
      ASSERT_TRUE(qd.device_data().defined()) << what;
      const Tensor got = QMatMul::from_qtensor(qd).forward(x.to_device(dev)).to_device(cpu);
      const float scale = want.abs().max_all().to_scalar<float>();
      const float diff = (got - want).abs().max_all().to_scalar<float>();
      EXPECT_LT(diff, 1e-5f * scale) << what << ": largest difference " << diff << " of " << scale;
    }
}

// f16 / bf16 activations are multiplied as f32 (CUDA converts them to the weight's precision)
CANDLE_DEVICE_TEST(QMatMulDevice, HalfActivations) {
  if (!has_kernels(dev, GgmlDType::Q4_0)) allow_round_trip(GetParam(), "qmatmul_dequantize");
  Device cpu = Device::cpu();
  cpu.set_seed(13);
  Tensor w = Tensor::randn(0.f, 1.f, {16, 256}, cpu);
  QTensor q = QTensor::quantize(w, GgmlDType::Q4_0);
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(w.to_device(dev), GgmlDType::Q4_0));
  for (DType dt : {DType::F16, DType::BF16})
    for (size_t m : {2, 12}) {
      Tensor x = Tensor::randn(0.f, 1.f, {m, 256}, cpu).to_dtype(dt);
      Tensor y = mm.forward(x.to_device(dev));
      EXPECT_EQ(y.dtype(), dt);
      Tensor exact = x.to_dtype(DType::F32).matmul(q.dequantize(cpu).t());
      const std::string what = std::string(dtype_name(dt)) + " m=" + std::to_string(m);
      const Tensor got = y.to_device(cpu).to_dtype(DType::F32);
      if (dev.kind() == DeviceKind::Cuda) {
        EXPECT_LT(((got - exact).sqr().mean_all() / exact.sqr().mean_all()).sqrt().to_scalar<float>(), 0.02f)
            << what;
      } else {
        // f32 products, the output rounded to the half type: 2^-8 relative for bf16
        test_device::expect_close(got, exact, 0.05, 1e-2, what);
      }
    }
}

// QTensor::quantize of a tensor on the device keeps the blocks there for the types the backend
// has kernels for, and QTensor::dequantize there gives the CPU's values bit for bit (f32 and f16).
CANDLE_DEVICE_TEST(QMatMulDevice, DequantizesAsTheCpu) {
  Device cpu = Device::cpu();
  cpu.set_seed(14);
  // a row of zeros (zero scales) and rows of very different magnitudes
  Tensor w = Tensor::cat({Tensor::randn(0.f, 1.f, {5, 512}, cpu), Tensor::zeros({1, 512}, DType::F32, cpu),
                          Tensor::randn(0.f, 1e-3f, {1, 512}, cpu), Tensor::randn(0.f, 300.f, {1, 512}, cpu)},
                         0);
  for (GgmlDType t : kVulkanTypes) {
    if (!has_kernels(dev, t)) continue;
    const std::string what(ggml_dtype_name(t));
    QTensor q = QTensor::quantize(w.to_device(dev), t);
    EXPECT_TRUE(q.device_data().defined()) << what;
    reset_backend_stats();
    Tensor got = q.dequantize(dev);
    EXPECT_EQ(got.device().kind(), dev.kind()) << what;
    EXPECT_EQ(got.dims(), (std::vector<size_t>{8, 512})) << what;
    EXPECT_EQ(bits_of(got), bits_of(q.dequantize(cpu))) << what;
    Tensor got16 = q.dequantize_f16(dev);
    EXPECT_EQ(got16.dtype(), DType::F16) << what;
    EXPECT_EQ(bits_of(got16), bits_of(q.dequantize_f16(cpu))) << what;
  }
}

// The backend's hooks on blocks that start at an odd byte of their storage (a legacy GGML file
// places tensors anywhere), and their errors: a k that is no multiple of the block size, blocks
// shorter than the rows need.
CANDLE_DEVICE_TEST(QMatMulDevice, BlocksAtAnyByteAndBadShapes) {
  if (dev.kind() != DeviceKind::Vulkan) GTEST_SKIP() << "the Vulkan hooks' own checks";
  Device cpu = Device::cpu();
  cpu.set_seed(15);
  Tensor w = Tensor::randn(0.f, 1.f, {8, 256}, cpu);
  Tensor x = Tensor::randn(0.f, 1.f, {2, 256}, cpu);
  for (GgmlDType t : {GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::Q6K, GgmlDType::F16}) {
    const std::string what(ggml_dtype_name(t));
    QTensor q = QTensor::quantize(w, t);
    const std::span<const uint8_t> bytes = q.data();
    for (size_t skip : {1, 3}) {
      std::vector<uint8_t> padded(skip, 0xab);
      padded.insert(padded.end(), bytes.begin(), bytes.end());
      padded.push_back(0xcd);
      Tensor blocks = Tensor::from_slice(std::span<const uint8_t>(padded), Shape{padded.size()}, dev);
      const Layout bl = Layout::contiguous(Shape{bytes.size()}, skip);
      const auto id = static_cast<uint32_t>(t);
      StoragePtr d = blocks.storage()->qdequantize(bl, id, 8 * 256, DType::F32);
      ASSERT_TRUE(d) << what;
      Tensor dt = Tensor::from_storage(d, Layout::contiguous(Shape{8, 256}), DType::F32, dev);
      EXPECT_EQ(bits_of(dt), bits_of(q.dequantize(cpu))) << what;
      Tensor xd = x.to_device(dev);
      StoragePtr y = blocks.storage()->qmatmul(bl, *xd.storage(), xd.layout(), id, 8, 256);
      ASSERT_TRUE(y) << what;
      test_device::expect_close(Tensor::from_storage(y, Layout::contiguous(Shape{2, 8}), DType::F32, dev),
                                x.matmul(q.dequantize(cpu).t()), 1e-3, 1e-4,
                                what + " skip " + std::to_string(skip));
      if (t != GgmlDType::F16) {
        // k = 100: not whole blocks
        Tensor x100 = Tensor::randn(0.f, 1.f, {2, 100}, cpu).to_device(dev);
        EXPECT_THROW(blocks.storage()->qmatmul(bl, *x100.storage(), x100.layout(), id, 8, 100), Error)
            << what;
        EXPECT_THROW(blocks.storage()->qdequantize(bl, id, 100, DType::F32), Error) << what;
      }
      // 9 rows of blocks in a buffer of 8
      EXPECT_THROW(blocks.storage()->qmatmul(bl, *xd.storage(), xd.layout(), id, 9, 256), Error) << what;
      EXPECT_THROW(blocks.storage()->qdequantize(bl, id, 9 * 256, DType::F32), Error) << what;
    }
  }
  // and through QMatMul: a bad input row length is a candle::Error too
  QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(w.to_device(dev), GgmlDType::Q4_0));
  EXPECT_THROW(mm.forward(Tensor::randn(0.f, 1.f, {2, 100}, cpu).to_device(dev)), Error);
}

// QTensor::cat_rows on the device: the stacked blocks multiply as the parts do (their outputs side
// by side, bit for bit: each output row is its own dot products), and dequantize to the parts'
// rows; with the blocks on the device there is no host copy.
CANDLE_DEVICE_TEST(QMatMulDevice, StackedRowsMultiplyAsTheParts) {
  const GgmlDType types[] = {GgmlDType::Q4_0, GgmlDType::Q6K, GgmlDType::F16};
  for (GgmlDType t : types)
    if (!has_kernels(dev, t)) allow_round_trip(GetParam(), "qmatmul_dequantize");
  Device cpu = Device::cpu();
  cpu.set_seed(12);
  for (size_t m : {2, 16}) {
    Tensor x = Tensor::randn(0.f, 1.f, {m, 256}, cpu).to_device(dev);
    for (GgmlDType t : types) {
      const std::string what = std::string(ggml_dtype_name(t)) + " m=" + std::to_string(m);
      const QTensor a = QTensor::quantize(Tensor::randn(0.f, 1.f, {24, 256}, cpu).to_device(dev), t);
      const QTensor b = QTensor::quantize(Tensor::randn(0.f, 1.f, {8, 256}, cpu).to_device(dev), t);
      if (has_kernels(dev, t)) {
        EXPECT_TRUE(a.device_data().defined()) << what;
      }
      const QTensor* parts[] = {&a, &b};
      const QTensor s = QTensor::cat_rows(parts);
      EXPECT_EQ(s.shape(), (Shape{32, 256}));
      EXPECT_EQ(s.storage_size_in_bytes(), a.storage_size_in_bytes() + b.storage_size_in_bytes());
      if (a.device_data().defined()) {
        EXPECT_TRUE(s.data().empty()) << what;
      }
      reset_backend_stats();
      const Tensor want =
          Tensor::cat({QMatMul::from_qtensor(a).forward(x), QMatMul::from_qtensor(b).forward(x)}, 1);
      const Tensor got = QMatMul::from_qtensor(s).forward(x);
      if (has_kernels(dev, t)) {
        EXPECT_EQ(backend_stats()["qmatmul_dequantize"], 0u) << what;
      }
      EXPECT_EQ(got.to_device(cpu).flatten_all().to_vec1<float>(),
                want.to_device(cpu).flatten_all().to_vec1<float>())
          << what;
      if (dev.kind() == DeviceKind::Vulkan) {
        const Tensor wd = Tensor::cat({a.dequantize(cpu), b.dequantize(cpu)}, 0);
        test_device::expect_close(got.to_device(cpu), x.to_device(cpu).matmul(wd.t()), 1e-3, 1e-4, what);
      }
      EXPECT_EQ(s.dequantize(cpu).flatten_all().to_vec1<float>(),
                Tensor::cat({a.dequantize(cpu), b.dequantize(cpu)}, 0).flatten_all().to_vec1<float>())
          << what;
    }
  }
}

// A weight of 1.1 MB (Q8_0 2048 x 512) and its 4 MB of f32 values: with
// CANDLE_VULKAN_MAX_BINDING_MB=1 the kernels run in several dispatches of whole rows / blocks.
CANDLE_DEVICE_TEST(QMatMulDevice, LargeWeight) {
  if (!has_kernels(dev, GgmlDType::Q8_0)) allow_round_trip(GetParam(), "qmatmul_dequantize");
  Device cpu = Device::cpu();
  cpu.set_seed(16);
  Tensor w = Tensor::randn(0.f, 1.f, {2048, 512}, cpu);
  QTensor q = QTensor::quantize(w, GgmlDType::Q8_0);
  QTensor qd = QTensor::quantize(w.to_device(dev), GgmlDType::Q8_0);
  if (dev.kind() == DeviceKind::Vulkan) {
    EXPECT_EQ(bits_of(qd.dequantize(dev)), bits_of(q.dequantize(cpu)));
  }
  QMatMul mm = QMatMul::from_qtensor(qd);
  for (size_t m : {2, 9}) {
    Tensor x = Tensor::randn(0.f, 1.f, {m, 512}, cpu);
    Tensor y = mm.forward(x.to_device(dev)).to_device(cpu);
    Tensor exact = x.matmul(q.dequantize(cpu).t());
    const float rel = ((y - exact).sqr().mean_all() / exact.sqr().mean_all()).sqrt().to_scalar<float>();
    EXPECT_LT(rel, dev.kind() == DeviceKind::Cuda ? 0.02f : 1e-5f) << "m=" << m;
  }
}
