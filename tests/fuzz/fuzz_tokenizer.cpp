// tokenizer.json files and input text. The first byte picks what the rest is: even, a tokenizer.json
// (loaded, then used on a fixed text); odd, a text for a fixed tokenizer that has every kind of
// component (NFKC, Split regex, ByteLevel, BPE with byte fallback, added tokens, templates).
#include <cstddef>
#include <cstdint>
#include <string>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"

namespace {

using candle::tokenizers::Tokenizer;

const char* kFixed = R"({
  "added_tokens": [{"id": 9, "content": "<s>", "special": true, "normalized": false},
                   {"id": 10, "content": "ab", "special": false, "single_word": true, "lstrip": true, "rstrip": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                 {"type": "Replace", "pattern": {"Regex": "\\s{3,}"}, "content": "  "}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
    {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [9], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true,
    "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "\u0120": 4, "\u0120a": 5, "c": 6, "<s>": 9, "<0x41>": 11},
    "merges": ["a b", "\u0120 a"]}
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      const Tokenizer t = Tokenizer::from_string(rest);
      const auto e = t.encode("Hello  world, 123 \xC3\xA9 <s> ab\n", true);
      (void)t.decode(e.get_ids(), false);
      (void)t.decode(e.get_ids(), true);
    } else {
      static const Tokenizer t = Tokenizer::from_string(kFixed);
      const auto e = t.encode(rest, true);
      (void)t.decode(e.get_ids(), false);
    }
  } catch (const candle::Error&) {
  }
  return 0;
}
