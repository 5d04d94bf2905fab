#pragma once
// Streaming text out of a generation loop: TokenOutputStream turns token ids into printable text
// as they come (what candle's examples use), StopStrings cuts the text at a stop string.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "candle/tokenizers/tokenizer.h"

namespace candle::generation {

// Decodes a growing list of ids into newly completed text. It decodes a window that starts one
// printed chunk back (so a SentencePiece leading space or a WordPiece join is decoded in context)
// and prints the part past the previous chunk once the text does not end in an incomplete UTF-8
// sequence (U+FFFD from byte-level or byte-fallback pieces). Special tokens are skipped, so the
// concatenation of everything returned equals tokenizer.decode(ids, true).
class TokenOutputStream {
 public:
  explicit TokenOutputStream(const tokenizers::Tokenizer& tokenizer) : tok_(&tokenizer) {}

  // The text `id` completes, if any.
  std::optional<std::string> next_token(uint32_t id);
  // What is still held back (at the end of generation).
  std::optional<std::string> decode_rest() const;
  // All ids so far, decoded.
  std::string decode_all() const;
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  void clear();

 private:
  std::string decode(size_t begin, size_t end) const;
  const tokenizers::Tokenizer* tok_;
  std::vector<uint32_t> tokens_;
  size_t prev_index_ = 0, current_index_ = 0;
};

// Watches generated text for stop strings. feed() returns the text that is safe to print: text
// that could be the start of a stop string is held back until the next chunks decide; the stop
// string itself and anything after it are never returned.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  struct Chunk {
    std::string text;      // safe to print now
    bool stopped = false;  // a stop string was hit (`which` says which)
    size_t which = 0;
  };
  Chunk feed(std::string_view text);
  // The held-back text, when generation ends without a stop.
  std::string flush();
  bool stopped() const { return stopped_; }
  void clear();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace candle::generation
