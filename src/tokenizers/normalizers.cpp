// Normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend, BertNormalizer, Sequence.
#include <unicode/ubrk.h>
#include <unicode/unorm2.h>
#include <unicode/utext.h>

#include <cstring>

#include "internal.h"

namespace candle::tokenizers::detail {
namespace {

// Each character replaced by fn(cp, its bytes); the replacement keeps the character's original range.
template <class Fn>
NString map_chars(const NString& in, Fn&& fn) {
  NString out;
  out.s.reserve(in.s.size());
  out.align.reserve(in.s.size());
  std::string rep;
  for (size_t i = 0; i < in.s.size();) {
    size_t l = 0;
    const uint32_t cp = utf8_decode(in.s, i, &l);
    rep.clear();
    fn(cp, std::string_view(in.s).substr(i, l), rep);
    if (!rep.empty()) out.append(rep, in.char_span(i, l));
    i += l;
  }
  return out;
}

struct Unicode final : Normalizer {
  NormForm form;
  explicit Unicode(NormForm f) : form(f) {}
  NString normalize(NString in) const override {
    bool ascii = true;
    for (char c : in.s) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return in;
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* nz = form == NormForm::NFC    ? unorm2_getNFCInstance(&err)
                             : form == NormForm::NFD  ? unorm2_getNFDInstance(&err)
                             : form == NormForm::NFKC ? unorm2_getNFKCInstance(&err)
                                                      : unorm2_getNFKDInstance(&err);
    if (U_FAILURE(err)) throw Error(ErrorKind::Internal, "tokenizers: ICU normalizer unavailable");
    // Normalize segment by segment (a segment starts at a character with a boundary before it), so
    // that each output character maps back to the input characters it came from.
    NString out;
    size_t seg = 0;
    auto flush = [&](size_t end) {
      if (end > seg)
        out.append(normalize_unicode(std::string_view(in.s).substr(seg, end - seg), form),
                   in.span_of(seg, end));
      seg = end;
    };
    for (size_t i = 0; i < in.s.size();) {
      size_t l = 0;
      const uint32_t cp = utf8_decode(in.s, i, &l);
      if (i > seg && unorm2_hasBoundaryBefore(nz, static_cast<UChar32>(cp))) flush(i);
      i += l;
    }
    flush(in.s.size());
    return out;
  }
};

struct Lowercase final : Normalizer {
  NString normalize(NString in) const override {
    return map_chars(in, [](uint32_t cp, std::string_view, std::string& rep) { rep = to_lower(cp); });
  }
};

struct Strip final : Normalizer {
  bool left, right;
  Strip(bool l, bool r) : left(l), right(r) {}
  NString normalize(NString in) const override {
    size_t b = 0, e = in.s.size();
    while (left && b < e) {
      size_t l = 0;
      if (!is_whitespace(utf8_decode(in.s, b, &l))) break;
      b += l;
    }
    while (right && e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(in.s[p]) & 0xC0) == 0x80) --p;
      size_t l = 0;
      if (!is_whitespace(utf8_decode(in.s, p, &l))) break;
      e = p;
    }
    return in.slice(b, e);
  }
};

struct Replace final : Normalizer {
  Pattern pattern;
  std::string content;
  NString normalize(NString in) const override {
    const auto matches = pattern.find_all(in.s);
    if (matches.empty()) return in;
    NString out;
    size_t pos = 0;
    for (auto [b, e] : matches) {
      out.s.append(in.s, pos, b - pos);
      out.align.insert(out.align.end(), in.align.begin() + static_cast<ptrdiff_t>(pos),
                       in.align.begin() + static_cast<ptrdiff_t>(b));
      out.append(content, in.span_of(b, e));
      pos = e;
    }
    out.s.append(in.s, pos);
    out.align.insert(out.align.end(), in.align.begin() + static_cast<ptrdiff_t>(pos), in.align.end());
    return out;
  }
};

struct Prepend final : Normalizer {
  std::string prepend;
  NString normalize(NString in) const override {
    if (in.empty()) return in;
    NString out;
    out.append(prepend, Span{in.align[0].b, in.align[0].b});
    out.s += in.s;
    out.align.insert(out.align.end(), in.align.begin(), in.align.end());
    return out;
  }
};

struct Bert final : Normalizer {
  bool clean_text = true, chinese = true, lowercase = true;
  bool strip_accents = true;
  NString normalize(NString in) const override {
    if (clean_text)
      in = map_chars(in, [](uint32_t cp, std::string_view bytes, std::string& rep) {
        if (cp == 0 || cp == 0xFFFD || is_control(cp)) return;
        if (is_whitespace(cp))
          rep.push_back(' ');
        else
          rep.assign(bytes);
      });
    if (chinese)
      in = map_chars(in, [](uint32_t cp, std::string_view bytes, std::string& rep) {
        if (is_cjk(cp)) {
          rep.push_back(' ');
          rep.append(bytes);
          rep.push_back(' ');
        } else {
          rep.assign(bytes);
        }
      });
    if (strip_accents) {
      in = Unicode(NormForm::NFD).normalize(std::move(in));
      in = map_chars(in, [](uint32_t cp, std::string_view bytes, std::string& rep) {
        if (!is_mark_nonspacing(cp)) rep.assign(bytes);
      });
    }
    if (lowercase) in = Lowercase().normalize(std::move(in));
    return in;
  }
};

std::string base64_decode(const std::string& in, const char* where) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    if (c == '\n' || c == '\r') continue;
    const int v = val(c);
    if (v < 0) bad(std::string(where) + ": not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// SentencePiece's precompiled charsmap: a little-endian u32 with the trie's size in bytes, the
// double-array trie (darts-clone units, u32 each), then the NUL-terminated replacement strings.
struct Precompiled final : Normalizer {
  std::vector<uint32_t> units;
  std::string strings;

  // The replacement of the shortest key that prefixes s (what HF's normalizer takes), if any.
  std::optional<std::string_view> transform(std::string_view s) const {
    auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    if (units.empty()) return std::nullopt;
    size_t pos = offset(units[0]);
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c == 0) break;
      pos ^= c;
      if (pos >= units.size()) return std::nullopt;
      const uint32_t u = units[pos];
      if ((u & ((1u << 31) | 0xFF)) != c) return std::nullopt;
      pos ^= offset(u);
      if (pos >= units.size()) return std::nullopt;
      if ((u >> 8) & 1) {
        const size_t v = units[pos] & 0x7FFFFFFFu;
        if (v >= strings.size()) return std::nullopt;
        const size_t end = strings.find('\0', v);
        return std::string_view(strings).substr(v, (end == std::string::npos ? strings.size() : end) - v);
      }
    }
    return std::nullopt;
  }

  NString normalize(NString in) const override {
    if (in.empty()) return in;
    // grapheme clusters through ICU's character break iterator, on the UTF-8 text itself
    UErrorCode err = U_ZERO_ERROR;
    UText* ut = utext_openUTF8(nullptr, in.s.data(), static_cast<int64_t>(in.s.size()), &err);
    UBreakIterator* bi = ubrk_open(UBRK_CHARACTER, "", nullptr, 0, &err);
    if (U_SUCCESS(err)) ubrk_setUText(bi, ut, &err);
    if (U_FAILURE(err)) {
      ubrk_close(bi);
      utext_close(ut);
      throw Error(ErrorKind::Internal, "tokenizers: ICU break iterator unavailable");
    }
    NString out;
    const std::string_view s = in.s;
    for (int32_t b = ubrk_first(bi), e = ubrk_next(bi); e != UBRK_DONE; b = e, e = ubrk_next(bi)) {
      const auto gb = static_cast<size_t>(b), ge = static_cast<size_t>(e);
      if (ge - gb < 6) {
        if (auto rep = transform(s.substr(gb, ge - gb))) {
          out.append(*rep, in.span_of(gb, ge));
          continue;
        }
      }
      for (size_t i = gb; i < ge;) {
        const size_t l = utf8_len(static_cast<unsigned char>(s[i]));
        if (auto rep = transform(s.substr(i, l)))
          out.append(*rep, in.char_span(i, l));
        else
          out.append(s.substr(i, l), in.char_span(i, l));
        i += l;
      }
    }
    ubrk_close(bi);
    utext_close(ut);
    return out;
  }
};

std::unique_ptr<Normalizer> make_precompiled(const json& j) {
  const char* w = "normalizer Precompiled";
  const std::string blob = base64_decode(get_string(j, "precompiled_charsmap", w, {}, true), w);
  auto p = std::make_unique<Precompiled>();
  if (blob.empty()) return p;
  if (blob.size() < 4) bad("normalizer Precompiled: the charsmap is shorter than its header");
  uint32_t trie_bytes = 0;
  for (int k = 3; k >= 0; --k)
    trie_bytes = (trie_bytes << 8) | static_cast<unsigned char>(blob[static_cast<size_t>(k)]);
  if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4)
    bad("normalizer Precompiled: the trie size " + std::to_string(trie_bytes) + " does not fit the charsmap");
  p->units.resize(trie_bytes / 4);
  for (size_t i = 0; i < p->units.size(); ++i) {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k)
      u = (u << 8) | static_cast<unsigned char>(blob[4 + i * 4 + static_cast<size_t>(k)]);
    p->units[i] = u;
  }
  p->strings = blob.substr(4 + trie_bytes);
  if (utf8_first_invalid(p->strings) != std::string::npos)
    bad("normalizer Precompiled: the replacement strings are not UTF-8");
  return p;
}

struct Sequence final : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  NString normalize(NString in) const override {
    for (auto& n : items) in = n->normalize(std::move(in));
    return in;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, "normalizer");
  const char* w = "normalizer";
  if (type == "NFC") return std::make_unique<Unicode>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<Unicode>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<Unicode>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<Unicode>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(get_bool(j, "strip_left", w, true), get_bool(j, "strip_right", w, true));
  if (type == "StripAccents") {
    auto s = std::make_unique<Bert>();
    s->clean_text = s->chinese = s->lowercase = false;
    return s;
  }
  if (type == "Replace") {
    auto r = std::make_unique<Replace>();
    r->pattern = Pattern::from_json(field(j, "pattern", w), "normalizer Replace");
    r->content = get_string(j, "content", w, {}, true);
    return r;
  }
  if (type == "Prepend") {
    auto p = std::make_unique<Prepend>();
    p->prepend = get_string(j, "prepend", w, {}, true);
    return p;
  }
  if (type == "BertNormalizer") {
    auto b = std::make_unique<Bert>();
    b->clean_text = get_bool(j, "clean_text", w, true);
    b->chinese = get_bool(j, "handle_chinese_chars", w, true);
    b->lowercase = get_bool(j, "lowercase", w, true);
    b->strip_accents = get_bool(j, "strip_accents", w, b->lowercase);
    return b;
  }
  if (type == "Precompiled") return make_precompiled(j);
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    const json& items = field(j, "normalizers", w);
    if (!items.is_array()) bad("normalizer Sequence: 'normalizers' is not an array");
    for (const json& it : items)
      if (auto n = make_normalizer(it)) s->items.push_back(std::move(n));
    return s;
  }
  throw Error(ErrorKind::UnsupportedOp,
              "tokenizer.json: unsupported normalizer type '" + excerpt(type) + "'");
}

}  // namespace candle::tokenizers::detail
