// libFuzzer: legacy GGML / GGMF / GGJT files from memory; every tensor's bytes are read and
// (when small) dequantized. candle::Error is the expected outcome for bad input; anything else
// is a finding.
#include <cstddef>
#include <cstdint>

#include "candle/quantized/ggml_file.h"

static volatile unsigned sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto c = candle::quantized::ggml_file::Content::read_buffer(std::span<const uint8_t>(data, size));
    unsigned sum = 0;
    for (const auto& [name, t] : c.tensors) {
      for (uint8_t b : t.data()) sum += b;
      if (t.data().size() <= 4096) sum += t.dequantize(candle::Device::cpu()).elem_count() != 0;
    }
    for (const auto& [tok, score] : c.vocab.token_score_pairs) sum += static_cast<unsigned>(tok.size());
    sink = sum;
  } catch (const candle::Error&) {
  }
  return 0;
}
