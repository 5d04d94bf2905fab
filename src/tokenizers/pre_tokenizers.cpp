// Pre-tokenizers: ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, BertPreTokenizer, Digits,
// Punctuation, Sequence.
#include "internal.h"

namespace candle::tokenizers::detail {
namespace {

const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

template <class Fn>
void each_piece(std::vector<NString>& pieces, Fn&& fn) {
  std::vector<NString> out;
  out.reserve(pieces.size());
  for (auto& p : pieces)
    for (auto& q : fn(p)) out.push_back(std::move(q));
  pieces = std::move(out);
}

// Matches of single characters for which pred holds.
template <class Pred>
std::vector<std::pair<size_t, size_t>> char_matches(const std::string& s, Pred&& pred) {
  std::vector<std::pair<size_t, size_t>> m;
  for (size_t i = 0; i < s.size();) {
    size_t l = 0;
    const uint32_t cp = utf8_decode(s, i, &l);
    if (pred(cp)) m.push_back({i, i + l});
    i += l;
  }
  return m;
}

SplitBehavior behavior_of(const std::string& s, const char* where) {
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  bad(std::string(where) + ": unknown behavior '" + excerpt(s) + "'");
}

struct ByteLevel final : PreTokenizer {
  bool add_prefix_space = true, use_regex = true;
  const Regex& regex() const {
    static const Regex r(kGpt2Pattern);
    return r;
  }
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces, [&](NString& p) {
      if (add_prefix_space && !p.empty() && p.s[0] != ' ') {
        NString q;
        q.append(" ", Span{p.align[0].b, p.align[0].b});
        q.s += p.s;
        q.align.insert(q.align.end(), p.align.begin(), p.align.end());
        p = std::move(q);
      }
      std::vector<NString> parts;
      if (use_regex)
        parts = split_by(p, regex().find_all(p.s), SplitBehavior::Isolated);
      else
        parts.push_back(std::move(p));
      for (auto& q : parts) {
        NString m;
        m.s.reserve(q.s.size() * 2);
        m.align.reserve(q.s.size() * 2);
        for (size_t i = 0; i < q.s.size(); ++i) {
          const std::string& c = byte_char(static_cast<uint8_t>(q.s[i]));
          m.s += c;
          m.align.push_back(q.align[i]);
          if (c.size() == 2) m.align.push_back(q.align[i]);
        }
        q = std::move(m);
      }
      return parts;
    });
  }
};

struct Split final : PreTokenizer {
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces, [&](NString& p) { return split_by(p, pattern.find_all(p.s), behavior, invert); });
  }
};

struct Metaspace final : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";
  enum { Always, First, Never } scheme = Always;
  bool split = true;
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces, [&](NString& p) {
      NString q;
      if (!p.empty()) {
        const bool starts = p.s.compare(0, replacement.size(), replacement) == 0 || p.s[0] == ' ';
        if (!starts && (scheme == Always || (scheme == First && p.align[0].b == 0)))
          q.append(replacement, Span{p.align[0].b, p.align[0].b});
      }
      for (size_t i = 0; i < p.s.size(); ++i) {
        if (p.s[i] == ' ')
          q.append(replacement, p.align[i]);
        else
          q.append(std::string_view(p.s).substr(i, 1), p.align[i]);
      }
      std::vector<NString> out;
      if (!split) {
        out.push_back(std::move(q));
        return out;
      }
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t pos = q.s.find(replacement); pos != std::string::npos; pos = q.s.find(replacement, pos + 1))
        m.push_back({pos, pos + replacement.size()});
      return split_by(q, m, SplitBehavior::MergedWithNext);
    });
  }
};

struct Whitespace final : PreTokenizer {
  void pre_tokenize(std::vector<NString>& pieces) const override {
    static const Regex r("\\w+|[^\\w\\s]+");
    each_piece(pieces,
               [&](NString& p) { return split_by(p, r.find_all(p.s), SplitBehavior::Removed, true); });
  }
};

struct WhitespaceSplit final : PreTokenizer {
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces, [&](NString& p) {
      return split_by(p, char_matches(p.s, is_whitespace), SplitBehavior::Removed);
    });
  }
};

struct BertPre final : PreTokenizer {
  void pre_tokenize(std::vector<NString>& pieces) const override {
    WhitespaceSplit().pre_tokenize(pieces);
    each_piece(pieces, [&](NString& p) {
      return split_by(p, char_matches(p.s, is_bert_punctuation), SplitBehavior::Isolated);
    });
  }
};

struct Punctuation final : PreTokenizer {
  SplitBehavior behavior = SplitBehavior::Isolated;
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces,
               [&](NString& p) { return split_by(p, char_matches(p.s, is_bert_punctuation), behavior); });
  }
};

struct Digits final : PreTokenizer {
  bool individual = false;
  void pre_tokenize(std::vector<NString>& pieces) const override {
    each_piece(pieces, [&](NString& p) {
      return split_by(p, char_matches(p.s, is_numeric),
                      individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
    });
  }
};

struct Sequence final : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  void pre_tokenize(std::vector<NString>& pieces) const override {
    for (auto& p : items) p->pre_tokenize(pieces);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "pre_tokenizer");
  const char* w = "pre_tokenizer";
  if (type == "ByteLevel") {
    auto b = std::make_unique<ByteLevel>();
    b->add_prefix_space = get_bool(j, "add_prefix_space", w, true);
    b->use_regex = get_bool(j, "use_regex", w, true);
    return b;
  }
  if (type == "Split") {
    auto s = std::make_unique<Split>();
    s->pattern = Pattern::from_json(field(j, "pattern", w), "pre_tokenizer Split");
    s->behavior = behavior_of(get_string(j, "behavior", w, {}, true), "pre_tokenizer Split");
    s->invert = get_bool(j, "invert", w, false);
    return s;
  }
  if (type == "Metaspace") {
    auto m = std::make_unique<Metaspace>();
    m->replacement = get_string(j, "replacement", w, m->replacement);
    if (m->replacement.empty() || utf8_valid_len(m->replacement, 0) != m->replacement.size())
      bad("pre_tokenizer Metaspace: 'replacement' is not one character");
    m->split = get_bool(j, "split", w, true);
    if (j.contains("prepend_scheme")) {
      const std::string s = get_string(j, "prepend_scheme", w, "always");
      if (s == "always")
        m->scheme = Metaspace::Always;
      else if (s == "first")
        m->scheme = Metaspace::First;
      else if (s == "never")
        m->scheme = Metaspace::Never;
      else
        bad("pre_tokenizer Metaspace: unknown prepend_scheme '" + excerpt(s) + "'");
    } else {
      m->scheme = get_bool(j, "add_prefix_space", w, true) ? Metaspace::Always : Metaspace::Never;
    }
    return m;
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Punctuation") {
    auto p = std::make_unique<Punctuation>();
    p->behavior = behavior_of(get_string(j, "behavior", w, "Isolated"), "pre_tokenizer Punctuation");
    return p;
  }
  if (type == "Digits") {
    auto d = std::make_unique<Digits>();
    d->individual = get_bool(j, "individual_digits", w, false);
    return d;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    const json& items = field(j, "pretokenizers", w);
    if (!items.is_array()) bad("pre_tokenizer Sequence: 'pretokenizers' is not an array");
    for (const json& it : items)
      if (auto p = make_pre_tokenizer(it)) s->items.push_back(std::move(p));
    return s;
  }
  throw Error(ErrorKind::UnsupportedOp,
              "tokenizer.json: unsupported pre_tokenizer type '" + excerpt(type) + "'");
}

}  // namespace candle::tokenizers::detail
