// QMatMul on every GPU device present, with the weight's blocks on that device: a device with
// quantized kernels (CUDA) multiplies there; the others dequantize the weight and multiply on the
// device, counted as the round-trip "qmatmul_dequantize". Either way the product equals the CPU's
// within the rounding of the activations (the CPU quantizes them to 8 bits, CUDA too for m <= 8).
#include <gtest/gtest.h>

#include "candle/candle.h"
#include "candle/quantized/quantized.h"
#include "test_device.h"

using namespace candle;
using namespace candle::quantized;

CANDLE_GPU_DEVICE_TEST_SUITE(QMatMulDevice);

CANDLE_DEVICE_TEST(QMatMulDevice, MultipliesOnTheDevice) {
  const bool kernels = dev.kind() == DeviceKind::Cuda;
  if (!kernels)
    allow_round_trip(GetParam(), "qmatmul_dequantize");  // no quantized kernels there yet (issue 17)
  Device cpu = Device::cpu();
  cpu.set_seed(11);
  Tensor w = Tensor::randn(0.f, 1.f, {24, 256}, cpu), x = Tensor::randn(0.f, 1.f, {3, 256}, cpu);
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q8_0}) {
    QTensor q = QTensor::quantize(w, t);
    QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(w.to_device(dev), t));
    reset_backend_stats();
    Tensor y = mm.forward(x.to_device(dev));
    EXPECT_EQ(y.device().kind(), dev.kind());
    EXPECT_EQ(backend_stats()["qmatmul_dequantize"], kernels ? 0u : 1u) << ggml_dtype_name(t);
    // the exact product of the dequantized weight, against the 8-bit-activation kernels
    Tensor exact = x.matmul(q.dequantize(cpu).t());
    auto rel = [&](const Tensor& got) {
      return ((got - exact).sqr().mean_all() / exact.sqr().mean_all()).sqrt().to_scalar<float>();
    };
    if (kernels)
      EXPECT_LT(rel(y.to_device(cpu)), 0.02f) << ggml_dtype_name(t);
    else
      test_device::expect_close(y.to_device(cpu), exact, 1e-3, 1e-4, std::string(ggml_dtype_name(t)));
    EXPECT_LT(rel(QMatMul::from_qtensor(q).forward(x)), 0.02f) << ggml_dtype_name(t);
  }
}

// QTensor::cat_rows on the device: the stacked blocks multiply as the parts do (their outputs side
// by side, bit for bit: each output row is its own dot products), and dequantize to the parts'
// rows; with the blocks on the device there is no host copy.
CANDLE_DEVICE_TEST(QMatMulDevice, StackedRowsMultiplyAsTheParts) {
  if (dev.kind() != DeviceKind::Cuda) allow_round_trip(GetParam(), "qmatmul_dequantize");
  Device cpu = Device::cpu();
  cpu.set_seed(12);
  Tensor x = Tensor::randn(0.f, 1.f, {2, 256}, cpu).to_device(dev);
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q6K, GgmlDType::F16}) {
    const QTensor a = QTensor::quantize(Tensor::randn(0.f, 1.f, {24, 256}, cpu).to_device(dev), t);
    const QTensor b = QTensor::quantize(Tensor::randn(0.f, 1.f, {8, 256}, cpu).to_device(dev), t);
    const QTensor* parts[] = {&a, &b};
    const QTensor s = QTensor::cat_rows(parts);
    EXPECT_EQ(s.shape(), (Shape{32, 256}));
    EXPECT_EQ(s.storage_size_in_bytes(), a.storage_size_in_bytes() + b.storage_size_in_bytes());
    if (a.device_data().defined()) {
      EXPECT_TRUE(s.data().empty()) << ggml_dtype_name(t);
    }
    const Tensor want =
        Tensor::cat({QMatMul::from_qtensor(a).forward(x), QMatMul::from_qtensor(b).forward(x)}, 1);
    EXPECT_EQ(QMatMul::from_qtensor(s).forward(x).to_device(cpu).flatten_all().to_vec1<float>(),
              want.to_device(cpu).flatten_all().to_vec1<float>())
        << ggml_dtype_name(t);
    EXPECT_EQ(s.dequantize(cpu).flatten_all().to_vec1<float>(),
              Tensor::cat({a.dequantize(cpu), b.dequantize(cpu)}, 0).flatten_all().to_vec1<float>())
        << ggml_dtype_name(t);
  }
}
