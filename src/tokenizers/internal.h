#pragma once
// The pieces of a tokenizer.json pipeline: a normalized string that remembers, for each of its bytes,
// the byte range of the input it came from; the component interfaces; UTF-8, Unicode and PCRE2 helpers.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "candle/error.h"
#include "candle/tokenizers/tokenizer.h"

namespace candle::quantized::gguf_file {
class Content;
}

namespace candle::tokenizers::detail {

using json = nlohmann::json;

// ---- UTF-8 and Unicode ----------------------------------------------------------------------------
// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when it is not valid.
size_t utf8_valid_len(std::string_view s, size_t i);
// The code point at s[i] (s valid UTF-8), and its length in bytes.
uint32_t utf8_decode(std::string_view s, size_t i, size_t* len);
inline size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
void utf8_append(std::string& out, uint32_t cp);
// Bytes to text, each maximal invalid subsequence replaced by U+FFFD (as Rust's from_utf8_lossy).
std::string utf8_lossy(std::string_view bytes);
// Position of the first invalid byte, or npos.
size_t utf8_first_invalid(std::string_view s);
// A short, printable excerpt of untrusted text for error messages.
std::string excerpt(std::string_view s, size_t max = 40);

bool is_whitespace(uint32_t cp);   // Unicode White_Space
bool is_punctuation(uint32_t cp);  // general category P*
bool is_bert_punctuation(uint32_t cp);
bool is_control(uint32_t cp);
bool is_numeric(uint32_t cp);       // general category N*
bool is_alphanumeric(uint32_t cp);  // L*, N*
bool is_mark_nonspacing(uint32_t cp);
bool is_cjk(uint32_t cp);
std::string to_lower(uint32_t cp);
enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormForm form);

// ---- normalized strings ---------------------------------------------------------------------------
struct Span {
  uint32_t b = 0, e = 0;  // a byte range of the original input
};

struct NString {
  std::string s;
  std::vector<Span> align;  // one per byte of s

  static NString original(std::string_view text, size_t offset);
  NString slice(size_t b, size_t e) const;
  Span span_of(size_t b, size_t e) const;  // the original range of s[b, e)
  // The original range of the character at byte i (of length len).
  Span char_span(size_t i, size_t len) const { return Span{align[i].b, align[i + len - 1].e}; }
  void append(std::string_view chars, Span sp) {
    s.append(chars);
    align.insert(align.end(), chars.size(), sp);
  }
  bool empty() const { return s.empty(); }
};

// ---- PCRE2 ----------------------------------------------------------------------------------------
class Regex {
 public:
  explicit Regex(const std::string& pattern);  // UTF + UCP; throws Parse naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Non-overlapping matches [b, e) left to right; an empty match advances one character.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  void* code_ = nullptr;
};

// A Split / Replace pattern: {"String": s} or {"Regex": r}.
struct Pattern {
  std::string literal;
  std::unique_ptr<Regex> regex;
  static Pattern from_json(const json& j, const char* where);
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;
};

// ---- components -----------------------------------------------------------------------------------
struct Normalizer {
  virtual ~Normalizer() = default;
  virtual NString normalize(NString in) const = 0;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
// Pieces of n by the matches [b, e) (sorted, non-overlapping); invert swaps matches and gaps.
std::vector<NString> split_by(const NString& n, const std::vector<std::pair<size_t, size_t>>& matches,
                              SplitBehavior behavior, bool invert = false);

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<NString>& pieces) const = 0;
};

struct Tok {
  uint32_t id;
  size_t b, e;  // byte range in the piece
};

struct Model {
  virtual ~Model() = default;
  virtual void tokenize(std::string_view piece, std::vector<Tok>& out) const = 0;
  virtual std::optional<uint32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(uint32_t id) const = 0;
  virtual size_t vocab_size() const = 0;
};

struct PostProcessor {
  virtual ~PostProcessor() = default;
  virtual void process(Encoding& enc, bool add_special_tokens) const = 0;
};

struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Normalizer> make_normalizer(const json& j);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j);
std::unique_ptr<Model> make_model(const json& j);
std::unique_ptr<PostProcessor> make_post_processor(const json& j, const Model& model);
std::unique_ptr<Decoder> make_decoder(const json& j);

// The models of GGUF vocabularies (ids are positions in `tokens`): byte-level BPE with merges by rank;
// SentencePiece BPE that merges neighbours whose text is a token, highest score first (only tokens
// with mergeable[id] are merge results), byte fallback to <0xXX> tokens and fused unknowns.
std::unique_ptr<Model> make_gguf_bpe(const std::vector<std::string>& tokens,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     bool ignore_merges, const char* where);
std::unique_ptr<Model> make_gguf_spm(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                                     const std::vector<bool>& mergeable, std::optional<uint32_t> unk);

// A tokenizer from a tokenizer.json document; `model` replaces the document's "model" when given.
std::unique_ptr<TokenizerImpl> build_tokenizer(const json& j, std::unique_ptr<Model> model);

// A GGUF file's tokenizer (tokenizer.ggml.*) as the tokenizer.json pipeline of its family
// (normalizer, pre_tokenizer, post_processor, decoder, added_tokens) and its model.
struct GgufPipeline {
  json doc;
  std::unique_ptr<Model> model;
};
GgufPipeline gguf_pipeline(const quantized::gguf_file::Content& content);

// The GPT-2 byte <-> character table of the ByteLevel components.
const std::string& byte_char(uint8_t b);  // UTF-8 of the character standing for byte b
int char_byte(uint32_t cp);               // the byte a character stands for, or -1

// ---- JSON helpers ---------------------------------------------------------------------------------
[[noreturn]] void bad(const std::string& what);
const json& field(const json& j, const char* key, const char* where);
std::string get_string(const json& j, const char* key, const char* where, const std::string& dflt = {},
                       bool required = false);
bool get_bool(const json& j, const char* key, const char* where, bool dflt);
std::optional<std::string> get_opt_string(const json& j, const char* key, const char* where);
uint32_t get_u32(const json& j, const char* where);
std::string type_of(const json& j, const char* where);

}  // namespace candle::tokenizers::detail
