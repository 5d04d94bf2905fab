// libFuzzer: a .npy file from memory. candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "candle/candle.h"
#include "candle/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  try {
    candle::Tensor t = candle::npy::read_npy_buffer(bytes, candle::Device::cpu());
    if (t.elem_count() > 0 && t.elem_count() < 4096) (void)t.to_dtype(candle::DType::F32).sum_all();
  } catch (const candle::Error&) {
  }
  return 0;
}
