#pragma once
// candle::tokenizers: Hugging Face tokenizer.json files (the API of HF's Rust `tokenizers` crate).
//
//   auto tok = candle::tokenizers::Tokenizer::from_file("tokenizer.json");
//   auto enc = tok.encode("Hello world", /*add_special_tokens=*/true);
//   enc.get_ids();      // token ids
//   enc.get_offsets();  // byte offsets [begin, end) into the input text
//   tok.decode(enc.get_ids(), /*skip_special_tokens=*/true);
//
// Input text must be valid UTF-8 (an InvalidArgument error otherwise, as HF's Rust API only takes
// &str). Errors in the file are Parse errors naming the field, or UnsupportedOp naming the type.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace candle::quantized::gguf_file {
class Content;
}

namespace candle::tokenizers {

using Offsets = std::pair<size_t, size_t>;
namespace detail {
struct EncodingAccess;
}

class Encoding {
 public:
  const std::vector<uint32_t>& get_ids() const { return ids_; }
  const std::vector<uint32_t>& get_type_ids() const { return type_ids_; }
  const std::vector<std::string>& get_tokens() const { return tokens_; }
  const std::vector<Offsets>& get_offsets() const { return offsets_; }
  const std::vector<uint32_t>& get_special_tokens_mask() const { return special_tokens_mask_; }
  const std::vector<uint32_t>& get_attention_mask() const { return attention_mask_; }
  size_t len() const { return ids_.size(); }
  bool is_empty() const { return ids_.empty(); }

  void push(uint32_t id, std::string token, Offsets offsets, uint32_t type_id, bool special);
  void reserve(size_t n);

 private:
  std::vector<uint32_t> ids_, type_ids_;
  std::vector<std::string> tokens_;
  std::vector<Offsets> offsets_;
  std::vector<uint32_t> special_tokens_mask_, attention_mask_;
  friend struct detail::EncodingAccess;
};

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

struct TokenizerImpl;

class Tokenizer {
 public:
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_string(std::string_view json);
  // The tokenizer a GGUF file carries (tokenizer.ggml.*, as llama.cpp's converter writes it): "llama"
  // (SentencePiece BPE: scores, byte fallback) and "gpt2" (byte-level BPE: merges, and the
  // pre-tokenizer named by tokenizer.ggml.pre), built as the tokenizer.json of that family would be
  // (include/candle/tokenizers/gguf.h lists the families). Errors name the key: Parse for bad
  // metadata, UnsupportedOp for a model or pre-tokenizer this build does not know.
  static Tokenizer from_gguf(const quantized::gguf_file::Content& content);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  Encoding encode(std::string_view text, bool add_special_tokens) const;
  std::vector<Encoding> encode_batch(const std::vector<std::string>& texts, bool add_special_tokens) const;
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens) const;
  std::vector<std::string> decode_batch(const std::vector<std::vector<uint32_t>>& ids,
                                        bool skip_special_tokens) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(uint32_t id) const;
  size_t get_vocab_size(bool with_added_tokens = true) const;
  const std::vector<AddedToken>& get_added_tokens() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

}  // namespace candle::tokenizers
