// libFuzzer: a .npz archive from memory (the zip reader, then every member as .npy).
// candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "candle/candle.h"
#include "candle/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  try {
    auto arrays = candle::npy::read_npz_buffer(bytes, candle::Device::cpu());
    for (const auto& [name, t] : arrays)
      if (t.elem_count() > 0 && t.elem_count() < 4096) (void)t.to_dtype(candle::DType::F32).sum_all();
  } catch (const candle::Error&) {
  }
  return 0;
}
