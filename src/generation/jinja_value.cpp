// The values of the Jinja interpreter: constructors, truthiness, printing (JavaScript's rules, as
// @huggingface/jinja prints), JSON in (nlohmann) and out (JSON.stringify's format, tojson's options).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "jinja.h"

namespace candle::generation::jinja {

Value Value::null() {
  Value v;
  v.kind = Kind::Null;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
uint64_t& work_counter() {
  thread_local uint64_t bytes = 0;
  return bytes;
}

Value Value::string(std::string x) {
  work_counter() += x.size();
  if (x.size() > kMaxStringBytes)
    throw Error(ErrorKind::InvalidArgument,
                "chat template: a string grew past " + std::to_string(kMaxStringBytes >> 20) + " MiB");
  Value v;
  v.kind = Kind::String;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::array(Array x) {
  work_counter() += 4 * x.size();
  if (x.size() > kMaxArrayItems)
    throw Error(ErrorKind::InvalidArgument,
                "chat template: a list grew past " + std::to_string(kMaxArrayItems) + " items");
  Value v;
  v.kind = Kind::Array;
  v.arr = std::make_shared<Array>(std::move(x));
  return v;
}
namespace {
struct ReleaseQueue {
  bool draining = false;
  std::vector<std::shared_ptr<Array>> arrays;
  std::vector<std::shared_ptr<Object>> objects;
};
thread_local ReleaseQueue release_queue;
}  // namespace

void Value::release_containers() noexcept {
  ReleaseQueue& q = release_queue;
  if (arr) q.arrays.push_back(std::move(arr));
  if (obj) q.objects.push_back(std::move(obj));
  if (q.draining) return;  // an outer destructor's loop frees it
  q.draining = true;
  while (!q.arrays.empty() || !q.objects.empty()) {
    // Popped first and freed after: freeing one queues its children's lists and objects.
    if (!q.arrays.empty()) {
      const std::shared_ptr<Array> last = std::move(q.arrays.back());
      q.arrays.pop_back();
    } else {
      const std::shared_ptr<Object> last = std::move(q.objects.back());
      q.objects.pop_back();
    }
  }
  q.draining = false;
}

Value Value::object() {
  Value v;
  v.kind = Kind::Object;
  v.obj = std::make_shared<Object>();
  return v;
}
Value Value::ns() {
  Value v;
  v.kind = Kind::Namespace;
  v.obj = std::make_shared<Object>();
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::Null: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0 && !std::isnan(f);
    case Kind::String: return !s->empty();
    case Kind::Array: return !arr->empty();
    case Kind::Object: return obj->size() > 0;
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

// Small objects (messages, loop) are searched in order; the hash index is built past 16 entries.
size_t Object::position(const std::string& key) const {
  if (index.empty()) {
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first == key) return i;
    return entries.size();
  }
  auto it = index.find(key);
  return it == index.end() ? entries.size() : it->second;
}

const Value* Object::find(const std::string& key) const {
  const size_t i = position(key);
  return i < entries.size() ? &entries[i].second : nullptr;
}

void Object::set(const std::string& key, Value v) {
  const size_t i = position(key);
  if (i < entries.size()) {
    entries[i].second = std::move(v);
    return;
  }
  entries.emplace_back(key, std::move(v));
  if (!index.empty()) {
    index.emplace(key, entries.size() - 1);
  } else if (entries.size() > 16) {
    for (size_t k = 0; k < entries.size(); ++k) index.emplace(entries[k].first, k);
  }
}

const Value* Args::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* Args::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  return kwarg(name);
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Undefined: return "undefined";
    case Kind::Null: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Array: return "list";
    case Kind::Object: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string js_number_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  // shortest round-trip digits and exponent, then JavaScript's Number::toString layout
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e + 1));  // value = d.ddd * 10^exp10
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // position of the decimal point
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return neg ? "-" + out : out;
}

std::string to_output_string(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null: return "";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: {
      if (v.f == 0 && std::signbit(v.f)) return "-0.0";
      if (std::isfinite(v.f) && v.f == std::floor(v.f) && std::fabs(v.f) < 1e21) {
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.1f", v.f);
        return buf;
      }
      return js_number_string(v.f);
    }
    case Kind::String: return *v.s;
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: return to_json(v, {}, false);
    case Kind::Function: return "[function]";
  }
  return "";
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    auto u16 = [&](uint32_t unit) {
      out += "\\u";
      for (int sh = 12; sh >= 0; sh -= 4) out.push_back(hex[(unit >> sh) & 0xF]);
    };
    if (c < 0x20) {
      u16(c);
    } else if (c < 0x7F || !ensure_ascii) {
      out.push_back(static_cast<char>(c));
    } else if (c == 0x7F) {
      u16(c);
    } else {
      // one UTF-8 sequence (the values hold valid UTF-8), escaped as UTF-16 units
      const size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (size_t k = 1; k < n && i + k < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      i += n - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        u16(0xD800 + (cp >> 10));
        u16(0xDC00 + (cp & 0x3FF));
      } else {
        u16(cp);
      }
    }
  }
  out.push_back('"');
}

void json_value(std::string& out, const Value& v, const JsonOptions& opt, bool undef_null, int depth) {
  if (depth > kMaxEvalDepth)
    throw Error(ErrorKind::InvalidArgument, "chat template: tojson of a value nested too deeply");
  if (out.size() > kMaxStringBytes)
    throw Error(ErrorKind::InvalidArgument, "chat template: tojson output grew too large");
  std::string item_sep = opt.has_separators ? opt.item_sep : opt.indent ? "," : ", ";
  std::string key_sep = opt.has_separators ? opt.key_sep : ": ";
  switch (v.kind) {
    case Kind::Null: out += "null"; return;
    case Kind::Undefined: out += undef_null ? "null" : "undefined"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float: out += std::isfinite(v.f) ? js_number_string(v.f) : "null"; return;
    case Kind::String: json_string(out, *v.s, opt.ensure_ascii); return;
    case Kind::Function:
      throw Error(ErrorKind::InvalidArgument, "chat template: cannot convert a function to JSON");
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: break;
  }
  const std::string pad = opt.indent > 0 ? std::string(static_cast<size_t>(opt.indent), ' ') : "";
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += pad;
  const std::string child = base + pad;
  if (v.kind == Kind::Array) {
    const Array& a = *v.arr;
    out.push_back('[');
    if (opt.indent && !a.empty()) out += child;
    for (size_t k = 0; k < a.size(); ++k) {
      if (k) {
        out += item_sep;
        if (opt.indent) out += child;
      }
      json_value(out, a[k], opt, undef_null, depth + 1);
    }
    if (opt.indent && !a.empty()) out += base;
    out.push_back(']');
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.obj->entries) entries.push_back(&e);
  if (opt.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
  out.push_back('{');
  for (size_t k = 0; k < entries.size(); ++k) {
    if (k) out += item_sep;
    if (opt.indent) out += child;
    json_string(out, entries[k]->first, opt.ensure_ascii);
    out += key_sep;
    json_value(out, entries[k]->second, opt, undef_null, depth + 1);
  }
  if (opt.indent && !entries.empty()) out += base;
  out.push_back('}');
}

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNodeDepth) throw Error(ErrorKind::Parse, "chat template context: JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::null();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    // JavaScript reads every JSON number as a double: integers past 2^53 round as they do there
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const double d = j.is_number_unsigned() ? static_cast<double>(j.get<uint64_t>())
                                              : static_cast<double>(j.get<int64_t>());
      if (std::fabs(d) <= 9007199254740992.0)
        return Value::integer(j.is_number_unsigned() ? static_cast<int64_t>(j.get<uint64_t>())
                                                     : j.get<int64_t>());
      if (std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
      return Value::number(d);
    }
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
        return Value::integer(static_cast<int64_t>(d));
      return Value::number(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& x : j) a.push_back(from_json(x, depth + 1));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value o = Value::object();
      for (const auto& [k, x] : j.items()) o.obj->set(k, from_json(x, depth + 1));
      return o;
    }
    default: throw Error(ErrorKind::Parse, "chat template context: unsupported JSON value");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null, int depth) {
  std::string out;
  json_value(out, v, opt, undefined_as_null, depth);
  return out;
}

Value from_json_text(std::string_view text) {
  nlohmann::ordered_json j;
  try {
    // the depth callback refuses deep nesting before the recursive conversion sees it
    j = nlohmann::ordered_json::parse(
        text.begin(), text.end(),
        [](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
          if (depth > kMaxNodeDepth)
            throw Error(ErrorKind::Parse, "chat template context: JSON nested too deeply");
          return true;
        });
  } catch (const nlohmann::ordered_json::exception& e) {
    throw Error(ErrorKind::Parse,
                std::string("chat template context: invalid JSON: ") + short_excerpt(e.what(), 120));
  }
  return from_json(j, 0);
}

bool js_is_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {
// the code point at s[i] and its byte length (s is valid UTF-8; a stray byte counts as one)
uint32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if ((c >= 0x80 && c < 0xC0) || i + n > s.size()) {
    *len = 1;
    return 0xFFFD;  // a stray byte
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = n;
  return cp;
}
}  // namespace

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t n;
  const uint32_t cp = decode_at(s, i, &n);
  return js_is_space(cp) ? n : 0;
}

std::string js_trim(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t n;
      const uint32_t cp = decode_at(s, b, &n);
      if (!js_is_space(cp)) break;
      b += n;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && e - start < 4) --start;
      size_t n;
      const uint32_t cp = decode_at(s, start, &n);
      if (start + n != e || !js_is_space(cp)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

size_t utf16_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const uint32_t cp = decode_at(s, i, &len);
    n += cp >= 0x10000 ? 2 : 1;
    i += len;
  }
  return n;
}

std::vector<uint32_t> code_point_offsets(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    decode_at(s, i, &len);
    out.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  out.push_back(static_cast<uint32_t>(s.size()));
  return out;
}

std::string short_excerpt(std::string_view s, size_t max) {
  std::string out = "'";
  size_t i = 0;
  for (; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  // do not cut a UTF-8 sequence
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && i < max + 3)
    out.push_back(s[i++]);
  out += i < s.size() ? "...'" : "'";
  return out;
}

}  // namespace candle::generation::jinja
