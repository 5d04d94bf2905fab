// libFuzzer: GGUF from memory. Every tensor is made from its bytes, read and (when small)
// dequantized; an accepted file is written back (v3) and read again, and that second write
// must give the same bytes (the writer and the reader agree on everything the reader accepts).
// candle::Error is the expected outcome for bad input; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "candle/quantized/gguf_file.h"

using namespace candle::quantized;

namespace {

std::string write_back(const gguf_file::Content& c) {
  gguf_file::MetadataList md(c.metadata.begin(), c.metadata.end());
  gguf_file::TensorList ts;
  for (const auto& [name, info] : c.tensor_infos) ts.emplace_back(name, c.tensor(name));
  std::ostringstream os;
  gguf_file::write(os, md, ts);
  return os.str();
}

}  // namespace

static volatile unsigned sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string first;
  try {
    auto c = gguf_file::Content::read_buffer(std::span<const uint8_t>(data, size));
    unsigned sum = 0;
    for (const auto& [name, info] : c.tensor_infos) {
      QTensor t = c.tensor(name);
      for (uint8_t b : t.data()) sum += b;  // every byte the reader promised is readable
      if (t.data().size() <= 4096) sum += t.dequantize(candle::Device::cpu()).elem_count() != 0;
    }
    sink = sum;
    first = write_back(c);
  } catch (const candle::Error&) {
    return 0;
  }
  // what the reader accepted, the writer writes, and that reads back to the same bytes
  auto again = gguf_file::Content::read_buffer(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(first.data()), first.size()));
  if (write_back(again) != first) std::abort();
  return 0;
}
