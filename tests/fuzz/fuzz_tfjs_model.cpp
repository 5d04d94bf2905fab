// libFuzzer: the TF.js layers-model converter from memory (src/models/tfjs_layers.cpp).
//
// Input: model.json's text, a NUL byte, then the shard files, each as its path, '\n', a
// 4-byte little-endian length and that many bytes (clamped to what is left).
// candle::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "candle/candle.h"
#include "candle/models/tfjs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  std::string_view model_json(p, nul ? static_cast<size_t>(nul - p) : size);
  std::map<std::string, std::vector<char>> shards;
  for (const char* q = nul ? nul + 1 : end; q < end;) {
    const char* nl = static_cast<const char*>(std::memchr(q, '\n', static_cast<size_t>(end - q)));
    if (!nl || end - nl < 5) break;
    std::string name(q, nl);
    uint32_t len = 0;
    std::memcpy(&len, nl + 1, 4);
    const char* b = nl + 5;
    size_t n = std::min<size_t>(len, static_cast<size_t>(end - b));
    shards[name].assign(b, b + n);
    q = b + n;
  }
  try {
    auto m = candle::models::tfjs::convert_layers_model_json(model_json, shards);
    (void)m;
  } catch (const candle::Error&) {
  }
  return 0;
}
