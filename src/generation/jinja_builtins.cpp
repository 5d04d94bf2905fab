// Filters, tests and methods of the Jinja subset, as @huggingface/jinja defines them (string methods
// are JavaScript's: strip() ignores its argument and trims all whitespace, as that renderer does).
// Beyond it, for templates written for Python's Jinja: `default` without parentheses and `round`.
// Case mapping (upper, lower, title, capitalize) is ASCII only.
#include <algorithm>
#include <cmath>

#include "jinja_interp.h"

namespace candle::generation::jinja {

namespace {

bool is_word_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}
// JavaScript's replace(/\b\w/g, upper): an ASCII word character after a non-word one
std::string title_case(std::string s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (is_word_byte(s[i]) && (i == 0 || !is_word_byte(s[i - 1])) && s[i] >= 'a' && s[i] <= 'z')
      s[i] = static_cast<char>(s[i] - 32);
  return s;
}
std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 32);
  return s;
}

Value str_value(std::string s) { return Value::string(std::move(s)); }

bool is_attribute_container(const Value& v) { return v.kind == Kind::Object || v.kind == Kind::Namespace; }

// getAttributeValue: a dotted path through dicts and list indexes
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (is_attribute_container(v)) {
      const Value* f = v.obj->find(part);
      v = f ? *f : Value::undefined();
    } else if (v.kind == Kind::Array) {
      char* end = nullptr;
      const long long idx = std::strtoll(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || static_cast<size_t>(idx) >= v.arr->size())
        return Value::undefined();
      v = (*v.arr)[static_cast<size_t>(idx)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// compareRuntimeValues (sort, dictsort)
int compare_values(const Value& a, const Value& b, bool case_sensitive, const Interp& in, const Node& at) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_null() || b.is_null() || a.is_undefined() || b.is_undefined())
    in.fail(at, std::string("cannot compare a ") + kind_name(a.kind) + " with a " + kind_name(b.kind));
  auto num = [](const Value& v) {
    return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool;
  };
  if (num(a) && num(b)) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind != b.kind || a.kind != Kind::String)
    in.fail(at, std::string("cannot compare a ") + kind_name(a.kind) + " with a " + kind_name(b.kind));
  const std::string x = case_sensitive ? *a.s : ascii_lower(*a.s);
  const std::string y = case_sensitive ? *b.s : ascii_lower(*b.s);
  return x < y ? -1 : x > y ? 1 : 0;
}

bool want_bool(const Value* v, bool dflt, const Interp& in, const Node& at, const char* what) {
  if (!v) return dflt;
  if (v->kind != Kind::Bool) in.fail(at, std::string(what) + " must be a boolean");
  return v->b;
}

std::string indent_text(const std::string& text, int64_t width, bool first, bool blank) {
  const std::string pad(static_cast<size_t>(std::clamp<int64_t>(width, 0, 1024)), ' ');
  std::string out;
  size_t start = 0, line = 0;
  for (;;) {
    const size_t nl = text.find('\n', start);
    const std::string part = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line > 0) out.push_back('\n');
    if ((first || line > 0) && (blank || !part.empty())) out += pad;
    out += part;
    if (out.size() > kMaxStringBytes)
      throw Error(ErrorKind::InvalidArgument, "chat template: indent output too large");
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return out;
}

std::string replace_text(const std::string& s, const std::string& from, const std::string& to,
                         int64_t count) {
  if (count == 0) return s;
  int64_t remaining = count < 0 ? INT64_MAX : count;
  std::string out;
  auto grow = [&](const std::string& piece) {
    out += piece;
    if (out.size() > kMaxStringBytes)
      throw Error(ErrorKind::InvalidArgument, "chat template: replace output too large");
  };
  if (from.empty()) {
    // an empty pattern matches at every code point boundary, both ends included
    const auto off = code_point_offsets(s);
    for (size_t k = 0; k < off.size(); ++k) {
      if (remaining > 0) {
        grow(to);
        --remaining;
      }
      if (k + 1 < off.size()) out.append(s, off[k], off[k + 1] - off[k]);
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    grow(s.substr(pos, hit - pos));
    grow(to);
    pos = hit + from.size();
    --remaining;
  }
  grow(s.substr(pos));
  return out;
}

Value split_text(const std::string& s, const Value* sep_v, const Value* max_v, const Interp& in,
                 const Node& at) {
  int64_t maxsplit = -1;
  if (max_v) {
    if (max_v->kind != Kind::Int) in.fail(at, "split(): maxsplit must be an integer");
    maxsplit = max_v->i;
  }
  Array out;
  if (!sep_v || sep_v->is_null()) {
    const std::string text = js_trim(s, true, false);
    // runs of non-whitespace; past maxsplit the rest of the text is one piece
    size_t i = 0;
    for (;;) {
      while (size_t n = js_space_at(text, i)) i += n;
      if (i >= text.size()) break;
      size_t end = i;
      while (end < text.size() && js_space_at(text, end) == 0) ++end;
      if (maxsplit != -1 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(str_value(text.substr(i)));
        break;
      }
      out.push_back(str_value(text.substr(i, end - i)));
      i = end;
    }
    return Value::array(std::move(out));
  }
  if (sep_v->kind != Kind::String) in.fail(at, "split(): the separator must be a string or none");
  const std::string& sep = *sep_v->s;
  if (sep.empty()) in.fail(at, "split(): empty separator");
  std::vector<std::string> parts;
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) {
      parts.push_back(s.substr(pos));
      break;
    }
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
    if (parts.size() > kMaxArrayItems) in.fail(at, "split(): too many pieces");
  }
  if (maxsplit != -1 && static_cast<int64_t>(parts.size()) > maxsplit) {
    const auto keep = static_cast<size_t>(std::max<int64_t>(maxsplit, 0));
    std::string rest;
    for (size_t k = keep; k < parts.size(); ++k) rest += (k > keep ? sep : "") + parts[k];
    parts.resize(keep);
    parts.push_back(rest);
  }
  for (auto& p : parts) out.push_back(str_value(std::move(p)));
  return Value::array(std::move(out));
}

Value starts_ends(const std::string& s, const Args& a, bool starts, const Interp& in, const Node& at) {
  const char* name = starts ? "startswith" : "endswith";
  if (a.pos.empty()) in.fail(at, std::string(name) + "() requires an argument");
  auto test = [&](const std::string& p) { return starts ? s.starts_with(p) : s.ends_with(p); };
  const Value& p = a.pos[0];
  if (p.kind == Kind::String) return Value::boolean(test(*p.s));
  if (p.kind == Kind::Array) {
    for (const Value& x : *p.arr) {
      if (x.kind != Kind::String) in.fail(at, std::string(name) + "() tuple elements must be strings");
      if (test(*x.s)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  in.fail(at, std::string(name) + "() takes a string or a tuple of strings");
}

Value replace_method(const std::string& s, const Args& a, const Interp& in, const Node& at) {
  if (a.pos.size() < 2) in.fail(at, "replace() requires two arguments");
  if (a.pos[0].kind != Kind::String || a.pos[1].kind != Kind::String)
    in.fail(at, "replace() arguments must be strings");
  int64_t count = -1;
  const Value* c = a.pos.size() > 2 ? &a.pos[2] : a.kwarg("count");
  if (c && !c->is_null()) {
    if (c->kind != Kind::Int) in.fail(at, "replace() count must be an integer");
    count = c->i;
  }
  return str_value(replace_text(s, *a.pos[0].s, *a.pos[1].s, count));
}

Value dictsort(const Value& object, const Args& a, const Interp& in, const Node& at) {
  const bool case_sensitive = want_bool(a.get(0, "case_sensitive"), false, in, at, "case_sensitive");
  const Value* by_v = a.get(1, "by");
  std::string by = "key";
  if (by_v) {
    if (by_v->kind != Kind::String || (*by_v->s != "key" && *by_v->s != "value"))
      in.fail(at, "dictsort(): by must be 'key' or 'value'");
    by = *by_v->s;
  }
  const bool reverse = want_bool(a.get(2, "reverse"), false, in, at, "reverse");
  Array items;
  for (const auto& [k, v] : object.obj->entries) items.push_back(Value::array({str_value(k), v}));
  const size_t idx = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int r = compare_values((*x.arr)[idx], (*y.arr)[idx], case_sensitive, in, at);
    return reverse ? r > 0 : r < 0;
  });
  return Value::array(std::move(items));
}

Value object_items(const Value& o) {
  Array items;
  for (const auto& [k, v] : o.obj->entries) items.push_back(Value::array({str_value(k), v}));
  return Value::array(std::move(items));
}

Value round_value(const Value& v, const Args& a, const Interp& in, const Node& at) {
  if (!v.is_numeric()) in.fail(at, std::string("round of a ") + kind_name(v.kind));
  int64_t precision = 0;
  if (const Value* p = a.get(0, "precision")) {
    if (p->kind != Kind::Int) in.fail(at, "round(): precision must be an integer");
    precision = std::clamp<int64_t>(p->i, -300, 300);
  }
  std::string method = "common";
  if (const Value* m = a.get(1, "method")) {
    if (m->kind != Kind::String) in.fail(at, "round(): method must be a string");
    method = *m->s;
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common")
    r = std::round(x);
  else if (method == "floor")
    r = std::floor(x);
  else if (method == "ceil")
    r = std::ceil(x);
  else
    in.fail(at, "round(): method must be common, floor or ceil");
  return Value::number(r / scale);
}

}  // namespace

Value Interp::member_builtin(const Value& object, const std::string& name, const Node& at) {
  if (object.kind == Kind::String) {
    const Value self = object;
    const std::string& s = *self.s;
    if (name == "length") return Value::integer(static_cast<int64_t>(utf16_length(s)));
    auto method = [&](auto fn) {
      return Value::function([self, fn, this, &at](Args& a, Scope&) {
        step(self.s->size() / 64);
        return fn(*self.s, a, *this, at);
      });
    };
    if (name == "upper")
      return method(
          [](const std::string& x, Args&, const Interp&, const Node&) { return str_value(ascii_upper(x)); });
    if (name == "lower")
      return method(
          [](const std::string& x, Args&, const Interp&, const Node&) { return str_value(ascii_lower(x)); });
    if (name == "strip")
      return method([](const std::string& x, Args&, const Interp&, const Node&) {
        return str_value(js_trim(x, true, true));
      });
    if (name == "lstrip")
      return method([](const std::string& x, Args&, const Interp&, const Node&) {
        return str_value(js_trim(x, true, false));
      });
    if (name == "rstrip")
      return method([](const std::string& x, Args&, const Interp&, const Node&) {
        return str_value(js_trim(x, false, true));
      });
    if (name == "title")
      return method(
          [](const std::string& x, Args&, const Interp&, const Node&) { return str_value(title_case(x)); });
    if (name == "capitalize")
      return method(
          [](const std::string& x, Args&, const Interp&, const Node&) { return str_value(capitalize(x)); });
    if (name == "startswith")
      return method([](const std::string& x, Args& a, const Interp& in, const Node& n) {
        return starts_ends(x, a, true, in, n);
      });
    if (name == "endswith")
      return method([](const std::string& x, Args& a, const Interp& in, const Node& n) {
        return starts_ends(x, a, false, in, n);
      });
    if (name == "split")
      return method([](const std::string& x, Args& a, const Interp& in, const Node& n) {
        return split_text(x, a.get(0, "sep"), a.get(1, "maxsplit"), in, n);
      });
    if (name == "replace")
      return method([](const std::string& x, Args& a, const Interp& in, const Node& n) {
        return replace_method(x, a, in, n);
      });
    return Value::undefined();
  }
  if (object.kind == Kind::Array) {
    if (name == "length") return Value::integer(static_cast<int64_t>(object.arr->size()));
    return Value::undefined();
  }
  if (object.kind == Kind::Object) {
    const Value self = object;
    if (name == "get")
      return Value::function([self, this, &at](Args& a, Scope&) {
        if (a.pos.empty() || a.pos[0].kind != Kind::String) fail(at, "get() takes a string key");
        if (const Value* v = self.obj->find(*a.pos[0].s)) return *v;
        return a.pos.size() > 1 ? a.pos[1] : Value::null();
      });
    if (name == "items") return Value::function([self](Args&, Scope&) { return object_items(self); });
    if (name == "keys")
      return Value::function([self](Args&, Scope&) {
        Array keys;
        for (const auto& e : self.obj->entries) keys.push_back(str_value(e.first));
        return Value::array(std::move(keys));
      });
    if (name == "values")
      return Value::function([self](Args&, Scope&) {
        Array vals;
        for (const auto& e : self.obj->entries) vals.push_back(e.second);
        return Value::array(std::move(vals));
      });
    if (name == "dictsort")
      return Value::function([self, this, &at](Args& a, Scope&) { return dictsort(self, a, *this, at); });
  }
  return Value::undefined();
}

bool Interp::run_test(const std::string& name, const Value& v, const Value* arg, const Node& at) {
  const Kind k = v.kind;
  if (name == "boolean") return k == Kind::Bool;
  if (name == "callable") return k == Kind::Function;
  if (name == "odd" || name == "even") {
    if (k != Kind::Int) fail(at, "cannot test " + name + " on a " + kind_name(k));
    return name == "odd" ? v.i % 2 != 0 : v.i % 2 == 0;
  }
  if (name == "false") return k == Kind::Bool && !v.b;
  if (name == "true") return k == Kind::Bool && v.b;
  if (name == "none") return k == Kind::Null;
  if (name == "string") return k == Kind::String;
  if (name == "number") return k == Kind::Int || k == Kind::Float;
  if (name == "integer") return k == Kind::Int;
  if (name == "float") return k == Kind::Float;
  if (name == "iterable") return k == Kind::Array || k == Kind::String;
  if (name == "mapping") return k == Kind::Object;
  if (name == "sequence") return k == Kind::Array || k == Kind::Object || k == Kind::String;
  if (name == "lower") return k == Kind::String && *v.s == ascii_lower(*v.s);
  if (name == "upper") return k == Kind::String && *v.s == ascii_upper(*v.s);
  if (name == "defined") return k != Kind::Undefined;
  if (name == "undefined") return k == Kind::Undefined;
  if (name == "equalto" || name == "eq") return strict_equal(v, arg ? *arg : Value::undefined());
  fail(at, "unknown test " + short_excerpt(name));
}

Value Interp::apply_filter(const Value& v, const Node& filter, Scope& s) {
  // strings are scanned by every filter; lists by all but the constant-time ones
  const std::string& fname = filter.kind == NodeKind::Ident ? filter.str : filter.a->str;
  const bool constant_time = fname == "length" || fname == "count" || fname == "first" || fname == "last" ||
                             fname == "list" || fname == "safe" || fname == "default" || fname == "d";
  step(1 + (v.is_string() ? v.s->size() / 64 : v.is_array() && !constant_time ? v.arr->size() / 16 : 0));
  if (filter.kind == NodeKind::Ident) {
    const std::string& f = filter.str;
    if (f == "safe") return v;
    if (f == "tojson") return str_value(to_json(v, {}, true));
    if (f == "default") return v.is_undefined() ? str_value("") : v;
    if (f == "round") {
      Args none;
      return round_value(v, none, *this, filter);
    }
    switch (v.kind) {
      case Kind::Array: {
        const Array& a = *v.arr;
        if (f == "list") return v;
        if (f == "first") return a.empty() ? Value::undefined() : a.front();
        if (f == "last") return a.empty() ? Value::undefined() : a.back();
        if (f == "length" || f == "count") return Value::integer(static_cast<int64_t>(a.size()));
        if (f == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
        if (f == "sort") {
          Array out = a;
          std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
            return compare_values(x, y, false, *this, filter) < 0;
          });
          return Value::array(std::move(out));
        }
        if (f == "join") {
          std::string out;
          for (const Value& x : a) {
            if (!x.is_null() && !x.is_undefined()) out += primitive_string(x, *this, filter);
            check_output(out);
          }
          return str_value(std::move(out));
        }
        if (f == "string") return str_value(to_json(v, {}, false));
        if (f == "unique") {
          Array out;
          for (const Value& x : a) {
            bool seen = false;
            for (const Value& y : out) seen = seen || strict_equal(x, y);
            if (!seen) out.push_back(x);
            step(out.size() / 16);
          }
          return Value::array(std::move(out));
        }
        fail(filter, "unknown filter " + short_excerpt(f) + " for a list");
      }
      case Kind::String: {
        const std::string& str = *v.s;
        if (f == "length" || f == "count") return Value::integer(static_cast<int64_t>(utf16_length(str)));
        if (f == "upper") return str_value(ascii_upper(str));
        if (f == "lower") return str_value(ascii_lower(str));
        if (f == "title") return str_value(title_case(str));
        if (f == "capitalize") return str_value(capitalize(str));
        if (f == "trim") return str_value(js_trim(str, true, true));
        if (f == "indent") return str_value(indent_text(str, 4, false, false));
        if (f == "join" || f == "string") return v;
        if (f == "int") {
          char* end = nullptr;
          const long long x = std::strtoll(js_trim(str, true, false).c_str(), &end, 10);
          return Value::integer(x);
        }
        if (f == "float") return Value::number(std::strtod(js_trim(str, true, false).c_str(), nullptr));
        fail(filter, "unknown filter " + short_excerpt(f) + " for a string");
      }
      case Kind::Int:
      case Kind::Float: {
        if (f == "abs") {
          if (v.kind == Kind::Int) {
            if (v.i == INT64_MIN) fail(filter, "integer overflow");
            return Value::integer(v.i < 0 ? -v.i : v.i);
          }
          return Value::number(std::fabs(v.f));
        }
        if (f == "int") {
          if (v.kind == Kind::Int) return v;
          if (!(std::fabs(v.f) < 9.2e18)) fail(filter, "int of a float out of range");
          return Value::integer(static_cast<int64_t>(std::floor(v.f)));
        }
        if (f == "float") return Value::number(v.as_double());
        if (f == "string") return str_value(to_output_string(v));
        fail(filter, "unknown filter " + short_excerpt(f) + " for a number");
      }
      case Kind::Object: {
        if (f == "items") return object_items(v);
        if (f == "length" || f == "count") return Value::integer(static_cast<int64_t>(v.obj->size()));
        const Value b = member_builtin(v, f, filter);
        if (b.kind == Kind::Function) {
          Args none;
          return (*b.fn)(none, s);
        }
        fail(filter, "unknown filter " + short_excerpt(f) + " for a dict");
      }
      case Kind::Bool: {
        if (f == "bool") return v;
        if (f == "int") return Value::integer(v.b ? 1 : 0);
        if (f == "float") return Value::number(v.b ? 1 : 0);
        if (f == "string") return str_value(v.b ? "true" : "false");
        fail(filter, "unknown filter " + short_excerpt(f) + " for a boolean");
      }
      default: fail(filter, "cannot apply the filter " + short_excerpt(f) + " to a " + kind_name(v.kind));
    }
  }
  if (filter.kind != NodeKind::Call || filter.a->kind != NodeKind::Ident) fail(filter, "unknown filter");
  const std::string& f = filter.a->str;
  if (f == "tojson") {
    Args a = eval_args(filter.list, s);
    JsonOptions opt;
    if (const Value* ind = a.kwarg("indent"); ind && !ind->is_null()) {
      if (ind->kind != Kind::Int) fail(filter, "tojson(): indent must be an integer");
      opt.indent = static_cast<int>(std::clamp<int64_t>(ind->i, 0, 64));
    }
    opt.ensure_ascii = want_bool(a.kwarg("ensure_ascii"), false, *this, filter, "ensure_ascii");
    opt.sort_keys = want_bool(a.kwarg("sort_keys"), false, *this, filter, "sort_keys");
    if (const Value* sep = a.kwarg("separators"); sep && !sep->is_null()) {
      if (sep->kind != Kind::Array || sep->arr->size() != 2 || (*sep->arr)[0].kind != Kind::String ||
          (*sep->arr)[1].kind != Kind::String)
        fail(filter, "tojson(): separators must be a tuple of two strings");
      opt.has_separators = true;
      opt.item_sep = *(*sep->arr)[0].s;
      opt.key_sep = *(*sep->arr)[1].s;
    }
    return str_value(to_json(v, opt, true));
  }
  if (f == "join") {
    Args a = eval_args(filter.list, s);
    const Value* sep_v = a.get(0, "separator");
    if (sep_v && sep_v->kind != Kind::String) fail(filter, "join(): the separator must be a string");
    const std::string sep = sep_v ? *sep_v->s : "";
    std::string out;
    if (v.kind == Kind::String) {
      const std::string& str = *v.s;
      const auto off = code_point_offsets(str);
      for (size_t k = 0; k + 1 < off.size(); ++k) {
        if (k) out += sep;
        out.append(str, off[k], off[k + 1] - off[k]);
        if (out.size() > kMaxStringBytes) check_output(out);
      }
    } else if (v.kind == Kind::Array) {
      for (size_t k = 0; k < v.arr->size(); ++k) {
        const Value& x = (*v.arr)[k];
        if (k) out += sep;
        if (!x.is_null() && !x.is_undefined()) out += primitive_string(x, *this, filter);
        if (out.size() > kMaxStringBytes) check_output(out);
      }
    } else {
      fail(filter, std::string("cannot join a ") + kind_name(v.kind));
    }
    return str_value(std::move(out));
  }
  if (f == "int" || f == "float") {
    Args a = eval_args(filter.list, s);
    const Value* d = a.get(0, "default");
    const Value dflt = d ? *d : f == "int" ? Value::integer(0) : Value::number(0);
    if (v.kind == Kind::String) {
      const std::string t = js_trim(*v.s, true, false);
      char* end = nullptr;
      if (f == "int") {
        const long long x = std::strtoll(t.c_str(), &end, 10);
        return end == t.c_str() ? dflt : Value::integer(x);
      }
      const double x = std::strtod(t.c_str(), &end);
      return end == t.c_str() ? dflt : Value::number(x);
    }
    if (v.is_numeric()) return v;
    if (v.kind == Kind::Bool) return f == "int" ? Value::integer(v.b ? 1 : 0) : Value::number(v.b ? 1 : 0);
    fail(filter, "cannot apply " + f + " to a " + kind_name(v.kind));
  }
  if (f == "default" || f == "d") {
    Args a = eval_args(filter.list, s);
    Value dflt = a.pos.empty() ? str_value("") : a.pos[0];
    const bool boolean = want_bool(a.get(1, "boolean"), false, *this, filter, "default(): boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
    return v;
  }
  if (f == "round") {
    Args a = eval_args(filter.list, s);
    return round_value(v, a, *this, filter);
  }
  if (v.kind == Kind::Array) {
    const Array& arr = *v.arr;
    if (f == "sort") {
      Args a = eval_args(filter.list, s);
      const bool reverse = want_bool(a.get(0, "reverse"), false, *this, filter, "reverse");
      const bool case_sensitive =
          want_bool(a.get(1, "case_sensitive"), false, *this, filter, "case_sensitive");
      const Value* attr = a.get(2, "attribute");
      std::string path;
      const bool by_attr = attr && !attr->is_null();
      if (by_attr) {
        if (attr->kind == Kind::String)
          path = *attr->s;
        else if (attr->kind == Kind::Int)
          path = std::to_string(attr->i);
        else
          fail(filter, "sort(): attribute must be a string or an integer");
      }
      Array out = arr;
      std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        const int r = by_attr ? compare_values(attribute_path(x, path), attribute_path(y, path),
                                               case_sensitive, *this, filter)
                              : compare_values(x, y, case_sensitive, *this, filter);
        return reverse ? r > 0 : r < 0;
      });
      return Value::array(std::move(out));
    }
    if (f == "selectattr" || f == "rejectattr") {
      const bool select = f == "selectattr";
      for (const Value& item : arr)
        if (!is_attribute_container(item)) fail(filter, f + " can only be applied to a list of dicts");
      for (const auto& x : filter.list)
        if (x->kind != NodeKind::Str) fail(filter, "the arguments of " + f + " must be strings");
      if (filter.list.empty()) fail(filter, f + " needs an attribute name");
      const std::string& attr = filter.list[0]->str;
      const std::string* test = filter.list.size() > 1 ? &filter.list[1]->str : nullptr;
      Value cmp = filter.list.size() > 2 ? Value::string(filter.list[2]->str) : Value::undefined();
      Array out;
      for (const Value& item : arr) {
        const Value* a = item.obj->find(attr);
        const bool r = a ? (test ? run_test(*test, *a, &cmp, filter) : a->truthy()) : false;
        if (r == select) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (f == "map") {
      Args a = eval_args(filter.list, s);
      const Value* attr = a.kwarg("attribute");
      if (!attr) fail(filter, "map() without attribute= is not supported");
      if (attr->kind != Kind::String) fail(filter, "map(): attribute must be a string");
      const Value* dflt = a.kwarg("default");
      Array out;
      for (const Value& item : arr) {
        if (!is_attribute_container(item)) fail(filter, "map(): the items must be dicts");
        Value x = attribute_path(item, *attr->s);
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
      return Value::array(std::move(out));
    }
    fail(filter, "unknown filter " + short_excerpt(f) + " for a list");
  }
  if (v.kind == Kind::String) {
    if (f == "indent") {
      Args a = eval_args(filter.list, s);
      const Value* w = a.get(0, "width");
      if (w && w->kind != Kind::Int) fail(filter, "indent(): width must be an integer");
      const bool first = a.get(1, "first") ? a.get(1, "first")->truthy() : false;
      const bool blank = a.get(2, "blank") ? a.get(2, "blank")->truthy() : false;
      return str_value(indent_text(*v.s, w ? w->i : 4, first, blank));
    }
    if (f == "replace") {
      Args a = eval_args(filter.list, s);
      return replace_method(*v.s, a, *this, filter);
    }
    fail(filter, "unknown filter " + short_excerpt(f) + " for a string");
  }
  if (v.kind == Kind::Object) {
    const Value b = member_builtin(v, f, filter);
    if (b.kind == Kind::Function) {
      Args a = eval_args(filter.list, s);
      return (*b.fn)(a, s);
    }
    fail(filter, "unknown filter " + short_excerpt(f) + " for a dict");
  }
  fail(filter, "cannot apply the filter " + short_excerpt(f) + " to a " + kind_name(v.kind));
}

}  // namespace candle::generation::jinja
