// libFuzzer: the tokenizer of a GGUF file (Tokenizer::from_gguf on the tokenizer.ggml.* metadata of a
// fuzzed file); an accepted tokenizer encodes and decodes a fixed text. candle::Error is the expected
// outcome for bad input; anything else is a finding. Seeds: tools/make-gguf-tokenizer-seeds.py.
#include <cstddef>
#include <cstdint>

#include "candle/error.h"
#include "candle/quantized/gguf_file.h"
#include "candle/tokenizers/tokenizer.h"

using namespace candle;

static volatile size_t sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto c = quantized::gguf_file::Content::read_buffer(std::span<const uint8_t>(data, size));
    const auto tok = tokenizers::Tokenizer::from_gguf(c);
    for (bool special : {true, false}) {
      const auto e = tok.encode("Hello  world, 123 \xC3\xA9 <s> ab\n\t<|end|> \xE2\x96\x81x", special);
      sink = sink + tok.decode(e.get_ids(), false).size() + tok.decode(e.get_ids(), true).size();
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
