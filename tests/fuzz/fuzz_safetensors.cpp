// libFuzzer: safetensors from memory (header, then every tensor made from its bytes).
// candle::Error is the expected outcome for bad input; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "candle/candle.h"
#include "candle/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                               reinterpret_cast<const std::byte*>(data) + size);
  try {
    auto tensors = candle::safetensors::load_buffer(bytes, candle::Device::cpu());
    for (const auto& [name, t] : tensors) {
      // touch the data: the widest read the loader promised is safe
      if (t.elem_count() > 0 && t.elem_count() < 4096)
        (void)t.flatten_all().to_dtype(candle::DType::F32).sum_all();
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
