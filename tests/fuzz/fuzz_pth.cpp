// libFuzzer: a whole PyTorch checkpoint from memory (zip or legacy format): open it, list its
// tensors and load each (the strided copies, widening and zero-copy views included).
// candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "candle/candle.h"
#include "candle/io/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    auto pth = candle::pickle::PthTensors::from_buffer(bytes);
    for (const auto& info : pth.tensor_infos()) {
      try {
        candle::Tensor t = pth.load(info.name);
        if (t.elem_count() > 0 && t.elem_count() < 4096) (void)t.to_dtype(candle::DType::F32).sum_all();
      } catch (const candle::Error&) {
      }
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
