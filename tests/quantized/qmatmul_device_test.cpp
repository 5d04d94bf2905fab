// QMatMul on every GPU device present: without quantized kernels there, the weight is dequantized
// and multiplied on the device, counted as the round-trip "qmatmul_dequantize", and the product
// equals the CPU's within the f32 matmul's rounding (the CPU quantizes the activations to 8 bits).
#include <gtest/gtest.h>

#include "candle/candle.h"
#include "candle/quantized/quantized.h"
#include "test_device.h"

using namespace candle;
using namespace candle::quantized;

CANDLE_GPU_DEVICE_TEST_SUITE(QMatMulDevice);

CANDLE_DEVICE_TEST(QMatMulDevice, DequantizesAndMultipliesCounted) {
  allow_round_trip(GetParam(), "qmatmul_dequantize");  // no quantized kernels on GPUs yet (issue 17)
  Device cpu = Device::cpu();
  cpu.set_seed(11);
  Tensor w = Tensor::randn(0.f, 1.f, {24, 256}, cpu), x = Tensor::randn(0.f, 1.f, {3, 256}, cpu);
  for (GgmlDType t : {GgmlDType::Q4_0, GgmlDType::Q4K, GgmlDType::Q8_0}) {
    QMatMul mm = QMatMul::from_qtensor(QTensor::quantize(w, t));
    reset_backend_stats();
    Tensor y = mm.forward(x.to_device(dev));
    EXPECT_EQ(y.device().kind(), dev.kind());
    EXPECT_EQ(backend_stats()["qmatmul_dequantize"], 1u) << ggml_dtype_name(t);
    // the exact product of the dequantized weight, against the CPU's 8-bit-activation kernel
    Tensor exact = x.matmul(QTensor::quantize(w, t).dequantize(cpu).t());
    test_device::expect_close(y.to_device(cpu), exact, 1e-3, 1e-4, std::string(ggml_dtype_name(t)));
    Tensor y_cpu = mm.forward(x);
    float rel = ((y_cpu - exact).sqr().mean_all() / exact.sqr().mean_all()).sqrt().to_scalar<float>();
    EXPECT_LT(rel, 0.02f) << ggml_dtype_name(t);
  }
}
