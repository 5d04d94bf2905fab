// Post-processors (TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence) and
// decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, WordPiece, Sequence).
#include <map>

#include "internal.h"

namespace candle::tokenizers::detail {

struct EncodingAccess {
  static std::vector<Offsets>& offsets(Encoding& e) { return e.offsets_; }
  static std::vector<uint32_t>& type_ids(Encoding& e) { return e.type_ids_; }
};

namespace {

// Offsets that leave out the spaces ('Ġ' or whitespace) a token starts or ends with.
void trim_offsets(Encoding& enc, bool add_prefix_space) {
  auto& offs = EncodingAccess::offsets(enc);
  const auto& toks = enc.get_tokens();
  const auto& special = enc.get_special_tokens_mask();
  for (size_t i = 0; i < toks.size(); ++i) {
    if (special[i]) continue;
    const std::string& t = toks[i];
    std::vector<uint32_t> cps;
    for (size_t k = 0; k < t.size();) {
      size_t l = 0;
      cps.push_back(utf8_valid_len(t, k) ? utf8_decode(t, k, &l) : (l = 1, 0u));
      k += l;
    }
    auto space = [](uint32_t c) { return c == 0x120 || is_whitespace(c); };
    size_t lead = 0, trail = 0;
    while (lead < cps.size() && space(cps[lead])) ++lead;
    while (trail < cps.size() && space(cps[cps.size() - 1 - trail])) ++trail;
    auto& [b, e] = offs[i];
    if (lead > 0) {
      if ((i == 0 || b == 0) && add_prefix_space && lead == 1) lead = 0;
      b = std::min(b + lead, e);
    }
    if (trail > 0 && e >= trail) e = std::max(e - trail, b);
  }
}

struct ByteLevelPost final : PostProcessor {
  bool trim = true, add_prefix_space = true;
  void process(Encoding& enc, bool) const override {
    if (trim) trim_offsets(enc, add_prefix_space);
  }
};

struct Piece {
  bool special;
  std::string id;  // the special token's name, or "A" / "B"
  uint32_t type_id;
};

struct SpecialTok {
  std::vector<uint32_t> ids;
  std::vector<std::string> tokens;
};

Encoding apply_template(const Encoding& enc, const std::vector<Piece>& tpl,
                        const std::map<std::string, SpecialTok>& specials) {
  Encoding out;
  for (const Piece& p : tpl) {
    if (p.special) {
      const SpecialTok& s = specials.at(p.id);
      for (size_t k = 0; k < s.ids.size(); ++k) out.push(s.ids[k], s.tokens[k], {0, 0}, p.type_id, true);
    } else if (p.id == "A") {
      for (size_t k = 0; k < enc.len(); ++k)
        out.push(enc.get_ids()[k], enc.get_tokens()[k], enc.get_offsets()[k], p.type_id,
                 enc.get_special_tokens_mask()[k] != 0);
    }
  }
  return out;
}

struct Template final : PostProcessor {
  std::vector<Piece> single;
  std::map<std::string, SpecialTok> specials;
  void process(Encoding& enc, bool add_special_tokens) const override {
    if (add_special_tokens) enc = apply_template(enc, single, specials);
  }
};

struct BertLike final : PostProcessor {
  std::vector<Piece> single;
  std::map<std::string, SpecialTok> specials;
  bool trim = false, add_prefix_space = false;
  void process(Encoding& enc, bool add_special_tokens) const override {
    if (trim) trim_offsets(enc, add_prefix_space);
    if (add_special_tokens) enc = apply_template(enc, single, specials);
  }
};

struct SequencePost final : PostProcessor {
  std::vector<std::unique_ptr<PostProcessor>> items;
  void process(Encoding& enc, bool add_special_tokens) const override {
    for (auto& p : items) p->process(enc, add_special_tokens);
  }
};

// ---- decoders -------------------------------------------------------------------------------------
struct ByteLevelDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::string bytes;
    for (const std::string& t : toks) {
      const size_t start = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size() && ok;) {
        size_t l = 0;
        const int b = utf8_valid_len(t, i) ? char_byte(utf8_decode(t, i, &l)) : -1;
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
        i += l;
      }
      if (!ok) {
        bytes.resize(start);
        bytes += t;
      }
    }
    toks.assign(1, utf8_lossy(bytes));
  }
};

struct MetaspaceDec final : Decoder {
  std::string replacement = "\xE2\x96\x81";
  bool prepend = true;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (size_t i = 0; i < toks.size(); ++i) {
      std::string out;
      const std::string& t = toks[i];
      for (size_t pos = 0; pos < t.size();) {
        if (t.compare(pos, replacement.size(), replacement) == 0) {
          if (!(i == 0 && prepend)) out.push_back(' ');
          pos += replacement.size();
        } else {
          out.push_back(t[pos++]);
        }
      }
      toks[i] = std::move(out);
    }
  }
};

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct ByteFallbackDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&]() {
      if (pending.empty()) return;
      if (utf8_first_invalid(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : toks) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hexval(t[3]) >= 0 &&
          hexval(t[4]) >= 0) {
        pending.push_back(static_cast<char>(hexval(t[3]) * 16 + hexval(t[4])));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    toks = std::move(out);
  }
};

struct FuseDec final : Decoder {
  void decode_chain(std::vector<std::string>& toks) const override {
    std::string all;
    for (auto& t : toks) all += t;
    toks.clear();
    toks.push_back(std::move(all));
  }
};

struct StripDec final : Decoder {
  std::string content;
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (std::string& t : toks) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start && b + content.size() <= e && t.compare(b, content.size(), content) == 0;
           ++k)
        b += content.size();
      for (size_t k = 0;
           k < stop && e >= b + content.size() && t.compare(e - content.size(), content.size(), content) == 0;
           ++k)
        e -= content.size();
      t = t.substr(b, e - b);
    }
  }
};

struct ReplaceDec final : Decoder {
  Pattern pattern;
  std::string content;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (std::string& t : toks) {
      const auto m = pattern.find_all(t);
      if (m.empty()) continue;
      std::string out;
      size_t pos = 0;
      for (auto [b, e] : m) {
        out.append(t, pos, b - pos);
        out += content;
        pos = e;
      }
      out.append(t, pos);
      t = std::move(out);
    }
  }
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

std::string prefixed_with_space(const std::string& t) {
  std::string out;
  out.reserve(t.size() + 1);
  out.push_back(' ');
  out.append(t);
  return out;
}

struct WordPieceDec final : Decoder {
  std::string prefix = "##";
  bool cleanup = true;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (size_t i = 0; i < toks.size(); ++i) {
      std::string& t = toks[i];
      if (i > 0) {
        if (t.compare(0, prefix.size(), prefix) == 0)
          t.erase(0, prefix.size());
        else
          t = prefixed_with_space(t);
      }
      if (cleanup) {
        replace_all(t, " .", ".");
        replace_all(t, " ?", "?");
        replace_all(t, " !", "!");
        replace_all(t, " ,", ",");
        replace_all(t, " ' ", "'");
        replace_all(t, " n't", "n't");
        replace_all(t, " 'm", "'m");
        replace_all(t, " do not", " don't");
        replace_all(t, " 's", "'s");
        replace_all(t, " 've", "'ve");
        replace_all(t, " 're", "'re");
      }
    }
  }
};

struct SequenceDec final : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  void decode_chain(std::vector<std::string>& toks) const override {
    for (auto& d : items) d->decode_chain(toks);
  }
};

std::pair<std::string, uint32_t> tok_pair(const json& j, const char* where) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_string()) bad(std::string(where) + " is not [token, id]");
  return {j[0].get<std::string>(), get_u32(j[1], where)};
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const Model& model) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "post_processor");
  const char* w = "post_processor";
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPost>();
    p->trim = get_bool(j, "trim_offsets", w, true);
    p->add_prefix_space = get_bool(j, "add_prefix_space", w, true);
    return p;
  }
  if (type == "TemplateProcessing") {
    auto p = std::make_unique<Template>();
    const json& sp = field(j, "special_tokens", w);
    if (!sp.is_object()) bad("post_processor TemplateProcessing: 'special_tokens' is not an object");
    for (auto it = sp.begin(); it != sp.end(); ++it) {
      SpecialTok s;
      const json& ids = field(it.value(), "ids", "post_processor special token");
      const json& toks = field(it.value(), "tokens", "post_processor special token");
      if (!ids.is_array() || !toks.is_array() || ids.size() != toks.size())
        bad("post_processor TemplateProcessing: special token '" + excerpt(it.key()) +
            "' has ids and tokens that differ");
      for (size_t k = 0; k < ids.size(); ++k) {
        s.ids.push_back(get_u32(ids[k], "post_processor special token id"));
        if (!toks[k].is_string()) bad("post_processor TemplateProcessing: a special token is not a string");
        s.tokens.push_back(toks[k].get<std::string>());
      }
      p->specials.emplace(it.key(), std::move(s));
    }
    const json& single = field(j, "single", w);
    if (!single.is_array()) bad("post_processor TemplateProcessing: 'single' is not an array");
    for (const json& e : single) {
      Piece piece{};
      if (e.is_object() && e.contains("SpecialToken")) {
        piece.special = true;
        piece.id = get_string(e["SpecialToken"], "id", "TemplateProcessing SpecialToken", {}, true);
        if (!p->specials.count(piece.id))
          bad("post_processor TemplateProcessing: special token '" + excerpt(piece.id) +
              "' is not in special_tokens");
        if (e["SpecialToken"].contains("type_id"))
          piece.type_id = get_u32(e["SpecialToken"]["type_id"], "type_id");
      } else if (e.is_object() && e.contains("Sequence")) {
        piece.id = get_string(e["Sequence"], "id", "TemplateProcessing Sequence", {}, true);
        if (piece.id != "A" && piece.id != "B")
          bad("post_processor TemplateProcessing: sequence id is neither A nor B");
        if (e["Sequence"].contains("type_id")) piece.type_id = get_u32(e["Sequence"]["type_id"], "type_id");
      } else {
        bad("post_processor TemplateProcessing: a template piece is neither SpecialToken nor Sequence");
      }
      p->single.push_back(std::move(piece));
    }
    return p;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto p = std::make_unique<BertLike>();
    auto [sep, sep_id] = tok_pair(field(j, "sep", w), "post_processor sep");
    auto [cls, cls_id] = tok_pair(field(j, "cls", w), "post_processor cls");
    p->specials["cls"] = SpecialTok{{cls_id}, {cls}};
    p->specials["sep"] = SpecialTok{{sep_id}, {sep}};
    p->single = {Piece{true, "cls", 0}, Piece{false, "A", 0}, Piece{true, "sep", 0}};
    if (type == "RobertaProcessing") {
      p->trim = get_bool(j, "trim_offsets", w, true);
      p->add_prefix_space = get_bool(j, "add_prefix_space", w, true);
    }
    (void)model;
    return p;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<SequencePost>();
    const json& items = field(j, "processors", w);
    if (!items.is_array()) bad("post_processor Sequence: 'processors' is not an array");
    for (const json& it : items)
      if (auto p = make_post_processor(it, model)) s->items.push_back(std::move(p));
    return s;
  }
  throw Error(ErrorKind::UnsupportedOp,
              "tokenizer.json: unsupported post_processor type '" + excerpt(type) + "'");
}

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "decoder");
  const char* w = "decoder";
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDec>();
    d->replacement = get_string(j, "replacement", w, d->replacement);
    if (j.contains("prepend_scheme"))
      d->prepend = get_string(j, "prepend_scheme", w, "always") != "never";
    else
      d->prepend = get_bool(j, "add_prefix_space", w, true);
    return d;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDec>();
    d->content = get_string(j, "content", w, " ");
    if (j.contains("start")) d->start = get_u32(j["start"], "decoder Strip start");
    if (j.contains("stop")) d->stop = get_u32(j["stop"], "decoder Strip stop");
    return d;
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDec>();
    d->pattern = Pattern::from_json(field(j, "pattern", w), "decoder Replace");
    d->content = get_string(j, "content", w, {}, true);
    return d;
  }
  if (type == "WordPiece") {
    auto d = std::make_unique<WordPieceDec>();
    d->prefix = get_string(j, "prefix", w, "##");
    d->cleanup = get_bool(j, "cleanup", w, true);
    return d;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<SequenceDec>();
    const json& items = field(j, "decoders", w);
    if (!items.is_array()) bad("decoder Sequence: 'decoders' is not an array");
    for (const json& it : items)
      if (auto d = make_decoder(it)) s->items.push_back(std::move(d));
    return s;
  }
  throw Error(ErrorKind::UnsupportedOp, "tokenizer.json: unsupported decoder type '" + excerpt(type) + "'");
}

}  // namespace candle::tokenizers::detail
