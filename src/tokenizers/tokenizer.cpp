// Tokenizer: loads tokenizer.json, splits out added tokens, then normalizer -> pre-tokenizer -> model ->
// post-processor; decode runs the decoder chain over the tokens of the ids.
#include <algorithm>
#include <exception>
#include <fstream>
#include <sstream>
#include <thread>

#include "candle/io/json_limits.h"
#include "candle/utils.h"
#include "internal.h"

namespace candle::tokenizers {

using namespace detail;

void Encoding::push(uint32_t id, std::string token, Offsets offsets, uint32_t type_id, bool special) {
  ids_.push_back(id);
  tokens_.push_back(std::move(token));
  offsets_.push_back(offsets);
  type_ids_.push_back(type_id);
  special_tokens_mask_.push_back(special ? 1 : 0);
  attention_mask_.push_back(1);
}

void Encoding::reserve(size_t n) {
  ids_.reserve(n);
  tokens_.reserve(n);
  offsets_.reserve(n);
  type_ids_.reserve(n);
  special_tokens_mask_.reserve(n);
  attention_mask_.reserve(n);
}

namespace {

// Added tokens matched leftmost-longest through a byte trie.
struct AddedMatcher {
  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> next;
    int32_t token = -1;
  };
  std::vector<Node> nodes{1};
  std::array<bool, 256> first{};
  bool any = false;

  void add(const std::string& s, int32_t idx) {
    if (s.empty()) return;
    uint32_t n = 0;
    for (unsigned char c : s) {
      auto& nx = nodes[n].next;
      auto it = std::find_if(nx.begin(), nx.end(), [c](auto& p) { return p.first == c; });
      if (it == nx.end()) {
        nodes.push_back(Node{});
        nodes[n].next.push_back({c, static_cast<uint32_t>(nodes.size() - 1)});
        n = static_cast<uint32_t>(nodes.size() - 1);
      } else {
        n = it->second;
      }
    }
    nodes[n].token = idx;
    first[static_cast<unsigned char>(s[0])] = true;
    any = true;
  }
  // The longest token starting at s[i]: (token index, length) or (-1, 0).
  std::pair<int32_t, size_t> longest(std::string_view s, size_t i) const {
    uint32_t n = 0;
    std::pair<int32_t, size_t> best{-1, 0};
    for (size_t k = i; k < s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s[k]);
      const auto& nx = nodes[n].next;
      auto it = std::find_if(nx.begin(), nx.end(), [c](auto& p) { return p.first == c; });
      if (it == nx.end()) break;
      n = it->second;
      if (nodes[n].token >= 0) best = {nodes[n].token, k + 1 - i};
    }
    return best;
  }
};

bool is_word_char(uint32_t cp) { return cp == '_' || is_alphanumeric(cp); }

uint32_t char_before(std::string_view s, size_t i) {
  size_t p = i - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  size_t l = 0;
  return utf8_decode(s, p, &l);
}

}  // namespace

struct Split {
  NString n;
  int32_t added = -1;  // index into added tokens, or -1 for text
};

struct TokenizerImpl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, uint32_t> added_by_content;
  std::unordered_map<uint32_t, size_t> added_by_id;
  AddedMatcher raw_matcher, normalized_matcher;

  // Splits n around the added tokens of m (with their single_word / lstrip / rstrip rules).
  void split_added(const NString& n, const AddedMatcher& m, std::vector<Split>& out) const {
    if (!m.any) {
      out.push_back(Split{n, -1});
      return;
    }
    const std::string_view s = n.s;
    size_t text_start = 0;
    for (size_t i = 0; i < s.size();) {
      if (!m.first[static_cast<unsigned char>(s[i])]) {
        ++i;
        continue;
      }
      auto [idx, len] = m.longest(s, i);
      if (idx < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[static_cast<size_t>(idx)];
      size_t b = i, e = i + len;
      if (t.single_word) {
        size_t l = 0;
        const bool left_ok = b == 0 || !is_word_char(char_before(s, b));
        const bool right_ok = e == s.size() || !is_word_char(utf8_decode(s, e, &l));
        if (!left_ok || !right_ok) {
          ++i;
          continue;
        }
      }
      if (t.lstrip)
        while (b > text_start && is_whitespace(char_before(s, b))) {
          size_t p = b - 1;
          while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
          b = p;
        }
      if (t.rstrip)
        while (e < s.size()) {
          size_t l = 0;
          if (!is_whitespace(utf8_decode(s, e, &l))) break;
          e += l;
        }
      if (b > text_start) out.push_back(Split{n.slice(text_start, b), -1});
      out.push_back(Split{n.slice(b, e), idx});
      text_start = i = e;
    }
    if (text_start < s.size()) out.push_back(Split{n.slice(text_start, s.size()), -1});
  }

  Encoding encode(std::string_view text, bool add_special_tokens) const {
    if (text.size() >= 0xFFFFFFFFu)
      throw Error(ErrorKind::InvalidArgument, "tokenizers: input text of 4 GiB or more");
    if (const size_t bad_at = utf8_first_invalid(text); bad_at != std::string_view::npos)
      throw Error(ErrorKind::InvalidArgument,
                  "tokenizers: input text is not valid UTF-8 (at byte " + std::to_string(bad_at) + ")");
    std::vector<Split> raw, splits;
    split_added(NString::original(text, 0), raw_matcher, raw);
    for (Split& sp : raw) {
      if (sp.added >= 0) {
        splits.push_back(std::move(sp));
        continue;
      }
      NString n = normalizer ? normalizer->normalize(std::move(sp.n)) : std::move(sp.n);
      split_added(n, normalized_matcher, splits);
    }
    Encoding enc;
    enc.reserve(text.size() / 3 + 4);
    std::vector<NString> pieces;
    std::vector<Tok> toks;
    for (Split& sp : splits) {
      if (sp.added >= 0) {
        const AddedToken& t = added[static_cast<size_t>(sp.added)];
        const Span o = sp.n.span_of(0, sp.n.s.size());
        enc.push(t.id, t.content, {o.b, o.e}, 0, false);
        continue;
      }
      pieces.clear();
      pieces.push_back(std::move(sp.n));
      if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
      for (const NString& p : pieces) {
        toks.clear();
        model->tokenize(p.s, toks);
        for (const Tok& t : toks) {
          const std::string* name = model->id_to_token(t.id);
          const Span o = p.span_of(t.b, t.e);
          enc.push(t.id, name ? *name : std::string(), {o.b, o.e}, 0, false);
        }
      }
    }
    if (post_processor) post_processor->process(enc, add_special_tokens);
    return enc;
  }

  std::string decode(std::span<const uint32_t> ids, bool skip_special) const {
    std::vector<std::string> toks;
    toks.reserve(ids.size());
    for (uint32_t id : ids) {
      auto it = added_by_id.find(id);
      if (it != added_by_id.end()) {
        if (skip_special && added[it->second].special) continue;
        toks.push_back(added[it->second].content);
      } else if (const std::string* t = model->id_to_token(id)) {
        toks.push_back(*t);
      }
    }
    if (!decoder) {
      std::string out;
      for (size_t i = 0; i < toks.size(); ++i) out += (i ? " " : "") + toks[i];
      return out;
    }
    decoder->decode_chain(toks);
    std::string out;
    for (auto& t : toks) out += t;
    return out;
  }
};

std::unique_ptr<TokenizerImpl> detail::build_tokenizer(const json& j, std::unique_ptr<Model> model) {
  if (!j.is_object()) bad("the top level is not an object");
  auto impl = std::make_unique<TokenizerImpl>();
  auto opt = [&](const char* k) -> const json& {
    static const json null_json;
    auto it = j.find(k);
    return it == j.end() ? null_json : *it;
  };
  impl->model = model ? std::move(model) : make_model(field(j, "model", "tokenizer.json"));
  impl->normalizer = make_normalizer(opt("normalizer"));
  impl->pre_tokenizer = make_pre_tokenizer(opt("pre_tokenizer"));
  impl->post_processor = make_post_processor(opt("post_processor"), *impl->model);
  impl->decoder = make_decoder(opt("decoder"));
  const json& added = opt("added_tokens");
  if (!added.is_null() && !added.is_array()) bad("'added_tokens' is not an array");
  if (added.is_array()) {
    for (const json& a : added) {
      const char* w = "added_tokens entry";
      AddedToken t;
      t.content = get_string(a, "content", w, {}, true);
      t.id = get_u32(field(a, "id", w), "added_tokens id");
      t.special = get_bool(a, "special", w, false);
      t.single_word = get_bool(a, "single_word", w, false);
      t.lstrip = get_bool(a, "lstrip", w, false);
      t.rstrip = get_bool(a, "rstrip", w, false);
      t.normalized = get_bool(a, "normalized", w, !t.special);
      if (t.content.empty()) bad("an added token is empty");
      const auto idx = static_cast<int32_t>(impl->added.size());
      impl->added_by_content[t.content] = t.id;
      impl->added_by_id[t.id] = impl->added.size();
      // Normalized tokens are found in the normalized text; with no normalizer that is the raw text.
      if (t.normalized && impl->normalizer)
        impl->normalized_matcher.add(t.content, idx);
      else
        impl->raw_matcher.add(t.content, idx);
      impl->added.push_back(std::move(t));
    }
  }
  return impl;
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "tokenizers: cannot open '" + excerpt(path, 200) + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(ErrorKind::Io, "tokenizers: cannot read '" + excerpt(path, 200) + "'");
  return with_context("loading " + excerpt(path, 200), [&] { return from_string(ss.str()); });
}

Tokenizer Tokenizer::from_string(std::string_view text) {
  io::check_json_depth(text, 64, "tokenizer.json");
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Parse, std::string("tokenizer.json: not valid JSON: ") + excerpt(e.what(), 200));
  }
  return Tokenizer(build_tokenizer(j, nullptr));
}

Tokenizer Tokenizer::from_gguf(const quantized::gguf_file::Content& content) {
  GgufPipeline p = gguf_pipeline(content);
  return Tokenizer(build_tokenizer(p.doc, std::move(p.model)));
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

// Texts spread over candle::get_num_threads() threads (HF's encode_batch runs in parallel too), in
// contiguous runs, each text encoded as encode() does it: the same encodings for any thread count.
// The first error, in text order, is rethrown once every thread is done.
std::vector<Encoding> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                              bool add_special_tokens) const {
  std::vector<Encoding> out(texts.size());
  constexpr size_t kMinTextsPerThread = 8;
  const size_t threads =
      std::min(get_num_threads(), (texts.size() + kMinTextsPerThread - 1) / kMinTextsPerThread);
  if (threads <= 1) {
    for (size_t i = 0; i < texts.size(); ++i) out[i] = impl_->encode(texts[i], add_special_tokens);
    return out;
  }
  std::vector<std::exception_ptr> errors(threads);
  auto run = [&](size_t t) {
    const size_t b = texts.size() * t / threads, e = texts.size() * (t + 1) / threads;
    try {
      for (size_t i = b; i < e; ++i) out[i] = impl_->encode(texts[i], add_special_tokens);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> pool;
    pool.reserve(threads - 1);
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

std::vector<std::string> Tokenizer::decode_batch(const std::vector<std::vector<uint32_t>>& ids,
                                                 bool skip_special_tokens) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const auto& v : ids) out.push_back(impl_->decode(v, skip_special_tokens));
  return out;
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  auto it = impl_->added_by_id.find(id);
  if (it != impl_->added_by_id.end()) return impl_->added[it->second].content;
  if (const std::string* t = impl_->model->id_to_token(id)) return *t;
  return std::nullopt;
}

size_t Tokenizer::get_vocab_size(bool with_added_tokens) const {
  size_t n = impl_->model->vocab_size();
  if (with_added_tokens)
    for (const auto& t : impl_->added)
      if (!impl_->model->id_to_token(t.id)) ++n;
  return n;
}

const std::vector<AddedToken>& Tokenizer::get_added_tokens() const { return impl_->added; }

}  // namespace candle::tokenizers
