// UTF-8, Unicode properties and normalization (ICU), PCRE2, normalized strings and JSON helpers.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <array>

#include "internal.h"

namespace candle::tokenizers::detail {

// ---- UTF-8 ----------------------------------------------------------------------------------------
size_t utf8_valid_len(std::string_view s, size_t i) {
  const size_t n = s.size() - i;
  const auto c0 = static_cast<unsigned char>(s[i]);
  if (c0 < 0x80) return 1;
  auto cont = [&](size_t k) { return k < n && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  if (c0 >= 0xC2 && c0 <= 0xDF) return cont(1) ? 2 : 0;
  if (c0 >= 0xE0 && c0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c0 == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c0 == 0xED && c1 >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c0 >= 0xF0 && c0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c0 == 0xF0 && c1 < 0x90) return 0;
    if (c0 == 0xF4 && c1 >= 0x90) return 0;
    return 4;
  }
  return 0;
}

uint32_t utf8_decode(std::string_view s, size_t i, size_t* len) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  const size_t l = utf8_len(c0);
  *len = l;
  if (l == 1) return c0;
  uint32_t cp = c0 & (0x7F >> l);
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The length of the maximal prefix of a valid sequence at s[i] (at least 1), for lossy decoding.
static size_t utf8_invalid_prefix(std::string_view s, size_t i) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    need = 1;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    need = 2;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    need = 3;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if (c < lo || c > hi) break;
    lo = 0x80, hi = 0xBF;
  }
  return k;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t l = utf8_valid_len(bytes, i);
    if (l) {
      out.append(bytes.substr(i, l));
      i += l;
    } else {
      out.append("\xEF\xBF\xBD");
      i += utf8_invalid_prefix(bytes, i);
    }
  }
  return out;
}

size_t utf8_first_invalid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t l = utf8_valid_len(s, i);
    if (!l) return i;
    i += l;
  }
  return std::string_view::npos;
}

std::string excerpt(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// ---- Unicode properties (ICU) ---------------------------------------------------------------------
bool is_whitespace(uint32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE); }
bool is_punctuation(uint32_t cp) { return u_ispunct(static_cast<UChar32>(cp)); }
bool is_bert_punctuation(uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  return is_punctuation(cp);
}
bool is_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const auto t = u_charType(static_cast<UChar32>(cp));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE ||
         t == U_UNASSIGNED;
}
bool is_numeric(uint32_t cp) {
  const auto t = u_charType(static_cast<UChar32>(cp));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}
bool is_alphanumeric(uint32_t cp) { return u_isalpha(static_cast<UChar32>(cp)) || is_numeric(cp); }
bool is_mark_nonspacing(uint32_t cp) { return u_charType(static_cast<UChar32>(cp)) == U_NON_SPACING_MARK; }
bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::string to_lower(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return out;
  }
  UChar src[2], dst[8];
  int32_t n = 0;
  U16_APPEND_UNSAFE(src, n, static_cast<UChar32>(cp));
  UErrorCode err = U_ZERO_ERROR;
  const int32_t m = u_strToLower(dst, 8, src, n, "", &err);
  if (U_FAILURE(err)) {
    utf8_append(out, cp);
    return out;
  }
  for (int32_t i = 0; i < m;) {
    UChar32 c;
    U16_NEXT(dst, i, m, c);
    utf8_append(out, static_cast<uint32_t>(c));
  }
  return out;
}

std::string normalize_unicode(std::string_view s, NormForm form) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* nz = form == NormForm::NFC    ? unorm2_getNFCInstance(&err)
                           : form == NormForm::NFD  ? unorm2_getNFDInstance(&err)
                           : form == NormForm::NFKC ? unorm2_getNFKCInstance(&err)
                                                    : unorm2_getNFKDInstance(&err);
  if (U_FAILURE(err)) throw Error(ErrorKind::Internal, "tokenizers: ICU normalizer unavailable");
  std::u16string src(s.size(), u'\0');
  int32_t n16 = 0;
  err = U_ZERO_ERROR;
  u_strFromUTF8(reinterpret_cast<UChar*>(src.data()), static_cast<int32_t>(src.size()), &n16, s.data(),
                static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) throw Error(ErrorKind::Internal, "tokenizers: ICU UTF-8 conversion failed");
  std::u16string dst(static_cast<size_t>(n16) * 4 + 16, u'\0');
  err = U_ZERO_ERROR;
  int32_t m = unorm2_normalize(nz, reinterpret_cast<const UChar*>(src.data()), n16,
                               reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    dst.assign(static_cast<size_t>(m), u'\0');
    err = U_ZERO_ERROR;
    m = unorm2_normalize(nz, reinterpret_cast<const UChar*>(src.data()), n16,
                         reinterpret_cast<UChar*>(dst.data()), m, &err);
  }
  if (U_FAILURE(err)) throw Error(ErrorKind::Internal, "tokenizers: ICU normalization failed");
  std::string out;
  for (int32_t i = 0; i < m;) {
    UChar32 c;
    U16_NEXT(dst.data(), i, m, c);
    utf8_append(out, static_cast<uint32_t>(c));
  }
  return out;
}

// ---- normalized strings ---------------------------------------------------------------------------
NString NString::original(std::string_view text, size_t offset) {
  NString n;
  n.s.assign(text);
  n.align.resize(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t l = utf8_len(static_cast<unsigned char>(text[i]));
    const Span sp{static_cast<uint32_t>(offset + i), static_cast<uint32_t>(offset + i + l)};
    for (size_t k = 0; k < l && i + k < text.size(); ++k) n.align[i + k] = sp;
    i += l;
  }
  return n;
}

NString NString::slice(size_t b, size_t e) const {
  NString n;
  n.s.assign(s, b, e - b);
  n.align.assign(align.begin() + static_cast<ptrdiff_t>(b), align.begin() + static_cast<ptrdiff_t>(e));
  return n;
}

Span NString::span_of(size_t b, size_t e) const {
  if (b >= e) {
    if (b < align.size()) return Span{align[b].b, align[b].b};
    return align.empty() ? Span{} : Span{align.back().e, align.back().e};
  }
  return Span{align[b].b, align[e - 1].e};
}

std::vector<NString> split_by(const NString& n, const std::vector<std::pair<size_t, size_t>>& matches,
                              SplitBehavior behavior, bool invert) {
  // (range, is_match) covering n
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> parts;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) parts.push_back({{pos, b}, invert});
    parts.push_back({{b, e}, !invert});
    pos = e;
  }
  if (pos < n.s.size()) parts.push_back({{pos, n.s.size()}, invert});
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (auto& [r, m] : parts)
        if (!m) ranges.push_back(r);
      break;
    case SplitBehavior::Isolated:
      for (auto& [r, m] : parts) ranges.push_back(r);
      break;
    case SplitBehavior::Contiguous: {
      bool prev_match = false;
      for (auto& [r, m] : parts) {
        if (m && prev_match && !ranges.empty())
          ranges.back().second = r.second;
        else
          ranges.push_back(r);
        prev_match = m;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool prev_match = false;
      for (auto& [r, m] : parts) {
        if (m && !prev_match && !ranges.empty())
          ranges.back().second = r.second;
        else
          ranges.push_back(r);
        prev_match = m;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (auto& [r, m] : parts) {
        if (!m && prev_match && !ranges.empty())
          ranges.back().second = r.second;
        else
          ranges.push_back(r);
        prev_match = m;
      }
      break;
    }
  }
  std::vector<NString> out;
  out.reserve(ranges.size());
  for (auto [b, e] : ranges)
    if (e > b) out.push_back(n.slice(b, e));
  return out;
}

// ---- PCRE2 ----------------------------------------------------------------------------------------
namespace {
struct MatchState {
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(size_t{32} << 10, size_t{8} << 20, nullptr);
    if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
    if (ctx) pcre2_set_match_limit(ctx, 50'000'000);
    data = pcre2_match_data_create(64, nullptr);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(ctx);
  }
};
MatchState& match_state() {
  thread_local MatchState st;
  return st;
}
}  // namespace

Regex::Regex(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(ErrorKind::Parse, "tokenizers: bad regex '" + excerpt(pattern, 80) + "' at " +
                                      std::to_string(off) + ": " + reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto& st = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  size_t pos = 0;
  while (pos <= s.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                               PCRE2_NO_UTF_CHECK, st.data, st.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(ErrorKind::InvalidArgument,
                  std::string("tokenizers: regex match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.push_back({b, e});
      pos = e;
    } else {
      if (b >= s.size()) break;
      pos = b + utf8_len(static_cast<unsigned char>(s[b]));
    }
  }
  return out;
}

Pattern Pattern::from_json(const json& j, const char* where) {
  Pattern p;
  if (!j.is_object()) bad(std::string(where) + ": pattern is not an object");
  if (j.contains("String")) {
    p.literal = get_string(j, "String", where, {}, true);
  } else if (j.contains("Regex")) {
    p.regex = std::make_unique<Regex>(get_string(j, "Regex", where, {}, true));
  } else {
    bad(std::string(where) + ": pattern needs String or Regex");
  }
  return p;
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view s) const {
  if (regex) return regex->find_all(s);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal.empty()) return out;
  for (size_t pos = s.find(literal); pos != std::string_view::npos;
       pos = s.find(literal, pos + literal.size()))
    out.push_back({pos, pos + literal.size()});
  return out;
}

// ---- GPT-2 byte table -----------------------------------------------------------------------------
namespace {
struct ByteTable {
  std::array<std::string, 256> chars;
  std::array<int16_t, 324> bytes{};
  ByteTable() {
    bytes.fill(-1);
    uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : extra++;
      utf8_append(chars[static_cast<size_t>(b)], cp);
      bytes[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}
}  // namespace

const std::string& byte_char(uint8_t b) { return byte_table().chars[b]; }
int char_byte(uint32_t cp) { return cp < 324 ? byte_table().bytes[cp] : -1; }

// ---- JSON helpers ---------------------------------------------------------------------------------
void bad(const std::string& what) { throw Error(ErrorKind::Parse, "tokenizer.json: " + what); }

const json& field(const json& j, const char* key, const char* where) {
  if (!j.is_object()) bad(std::string(where) + " is not an object");
  auto it = j.find(key);
  if (it == j.end()) bad(std::string(where) + ": missing field '" + key + "'");
  return *it;
}

std::string get_string(const json& j, const char* key, const char* where, const std::string& dflt,
                       bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) bad(std::string(where) + ": missing field '" + key + "'");
    return dflt;
  }
  if (!it->is_string()) bad(std::string(where) + ": field '" + key + "' is not a string");
  return it->get<std::string>();
}

std::optional<std::string> get_opt_string(const json& j, const char* key, const char* where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad(std::string(where) + ": field '" + key + "' is not a string");
  return it->get<std::string>();
}

bool get_bool(const json& j, const char* key, const char* where, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) bad(std::string(where) + ": field '" + key + "' is not a boolean");
  return it->get<bool>();
}

uint32_t get_u32(const json& j, const char* where) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
    bad(std::string(where) + " is not a non-negative integer");
  const uint64_t v = j.get<uint64_t>();
  if (v > 0x7FFFFFFF) bad(std::string(where) + " is out of range");
  return static_cast<uint32_t>(v);
}

std::string type_of(const json& j, const char* where) {
  if (!j.is_object()) bad(std::string(where) + " is not an object");
  return get_string(j, "type", where, {}, true);
}

}  // namespace candle::tokenizers::detail
