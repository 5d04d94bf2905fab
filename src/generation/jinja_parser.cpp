// The lexer and parser of the Jinja subset: the token rules and grammar of @huggingface/jinja
// (preprocessing with trim_blocks and lstrip_blocks, `-` whitespace control, `{% generation %}`
// markers dropped), written as a bounded recursive descent.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "jinja.h"

namespace candle::generation::jinja {

namespace {

[[noreturn]] void parse_error(const Program& prog, size_t pos, const std::string& msg) {
  throw Error(ErrorKind::Parse, "chat template: " + msg + " at " + prog.where(pos));
}

size_t space_len(std::string_view s, size_t i) { return js_space_at(s, i); }

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// preprocess(): one final newline dropped; lstrip_blocks removes spaces and tabs that start a line
// before `{%`, `{#` or `{-`; trim_blocks removes the newline after `%}`, `#}` or `-}`; the
// `{% generation %}` / `{% endgeneration %}` markers go, with their surrounding whitespace unless
// the marker has a `-` on that side. `origin` maps each output byte back to the input.
std::string preprocess(std::string_view in, std::vector<uint32_t>& origin) {
  std::string t(in);
  if (!t.empty() && t.back() == '\n') t.pop_back();
  std::string a;
  std::vector<uint32_t> a_org;
  a.reserve(t.size());
  bool line_start = true;
  for (size_t i = 0; i < t.size();) {
    if (line_start) {
      size_t j = i;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
      if (j + 1 < t.size() && t[j] == '{' && (t[j + 1] == '#' || t[j + 1] == '%' || t[j + 1] == '-')) i = j;
      line_start = false;
      continue;
    }
    const char c = t[i];
    a.push_back(c);
    a_org.push_back(static_cast<uint32_t>(i++));
    if (c == '\n' || c == '\r') line_start = true;
    // U+2028 and U+2029 also end a line for JavaScript's multiline ^
    if ((c == '\xA8' || c == '\xA9') && a.size() >= 3 && a[a.size() - 3] == '\xE2' &&
        a[a.size() - 2] == '\x80')
      line_start = true;
  }
  std::string b;
  std::vector<uint32_t> b_org;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    b.push_back(a[i]);
    b_org.push_back(a_org[i]);
    if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') && i + 1 < a.size() &&
        a[i + 1] == '\n')
      ++i;  // drop the newline
  }
  std::string out;
  out.reserve(b.size());
  origin.clear();
  auto copy = [&](size_t from, size_t to) {
    out.append(b, from, to - from);
    origin.insert(origin.end(), b_org.begin() + static_cast<std::ptrdiff_t>(from),
                  b_org.begin() + static_cast<std::ptrdiff_t>(to));
  };
  size_t i = 0;
  while (i < b.size()) {
    size_t p = b.find("{%", i);
    if (p == std::string::npos) {
      copy(i, b.size());
      break;
    }
    size_t q = p + 2;
    bool lstrip = false, rstrip = false;
    if (q < b.size() && b[q] == '-') lstrip = true, ++q;
    while (size_t n = space_len(b, q)) q += n;
    if (b.compare(q, 3, "end") == 0 && b.compare(q + 3, 10, "generation") == 0) q += 3;
    bool marker = b.compare(q, 10, "generation") == 0;
    if (marker) {
      q += 10;
      while (size_t n = space_len(b, q)) q += n;
      if (q < b.size() && b[q] == '-') rstrip = true, ++q;
      marker = b.compare(q, 2, "%}") == 0;
    }
    if (!marker) {
      copy(i, p + 2);
      i = p + 2;
      continue;
    }
    q += 2;
    // whitespace before the marker stays unless `{%-`
    size_t keep_to = p;
    if (lstrip) keep_to = i + js_trim(std::string_view(b).substr(i, p - i), false, true).size();
    copy(i, keep_to);
    size_t after = q;
    while (size_t n = space_len(b, after)) after += n;
    if (!rstrip) copy(q, after);
    i = after;
  }
  origin.push_back(static_cast<uint32_t>(in.size()));
  return out;
}

enum class Tok : uint8_t {
  Text,
  Num,
  Str,
  Ident,
  Equals,
  LParen,
  RParen,
  OpenStmt,
  CloseStmt,
  OpenExpr,
  CloseExpr,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Dot,
  Colon,
  Pipe,
  Add,
  Mul,
  Pow,
  Cmp,
  Unary,
  Comment,
};

struct Token {
  Tok type;
  std::string value;
  size_t pos;
};

class Lexer {
 public:
  explicit Lexer(const Program& prog) : prog_(prog), s_(prog.source) {}

  std::vector<Token> run() {
    while (p_ < s_.size()) {
      const bool text_mode =
          toks_.empty() || last() == Tok::CloseStmt || last() == Tok::CloseExpr || last() == Tok::Comment;
      if (text_mode) {
        size_t start = p_;
        while (p_ < s_.size() && !(s_[p_] == '{' && p_ + 1 < s_.size() &&
                                   (s_[p_ + 1] == '%' || s_[p_ + 1] == '{' || s_[p_ + 1] == '#')))
          ++p_;
        if (p_ > start) {
          push(Tok::Text, s_.substr(start, p_ - start), start);
          continue;
        }
      }
      if (starts("{#")) {
        size_t start = p_;
        p_ += 2;
        const bool strip_before = p_ < s_.size() && s_[p_] == '-';
        if (strip_before) ++p_;
        size_t end = s_.find("#}", p_);
        if (end == std::string::npos) parse_error(prog_, start, "missing end of comment tag");
        std::string comment = s_.substr(p_, end - p_);
        const bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) strip_trailing();
        push(Tok::Comment, std::move(comment), start);
        p_ = end + 2;
        if (strip_after) skip_space();
        continue;
      }
      if (starts("{%-")) {
        strip_trailing();
        push(Tok::OpenStmt, "{%", p_);
        p_ += 3;
        continue;
      }
      if (starts("{{-")) {
        strip_trailing();
        push(Tok::OpenExpr, "{{", p_);
        brace_depth_ = 0;
        p_ += 3;
        continue;
      }
      while (size_t n = space_len(s_, p_)) p_ += n;
      if (p_ >= s_.size()) break;
      if (starts("-%}")) {
        push(Tok::CloseStmt, "%}", p_);
        p_ += 3;
        skip_space();
        continue;
      }
      if (starts("-}}")) {
        push(Tok::CloseExpr, "}}", p_);
        p_ += 3;
        skip_space();
        continue;
      }
      const char c = s_[p_];
      if (c == '-' || c == '+') {
        if (toks_.empty() || last() == Tok::Text)
          parse_error(prog_, p_, std::string("unexpected character '") + c + "'");
        const Tok lt = last();
        if (lt != Tok::Ident && lt != Tok::Num && lt != Tok::Str && lt != Tok::RParen &&
            lt != Tok::RBracket) {
          size_t start = p_++;
          std::string num = digits();
          if (!num.empty() && p_ + 1 < s_.size() && s_[p_] == '.' && is_digit(s_[p_ + 1])) {
            ++p_;
            num += "." + digits();
          }
          if (num.empty())
            push(Tok::Unary, std::string(1, c), start);
          else
            push(Tok::Num, std::string(1, c) + num, start);
          continue;
        }
      }
      if (symbol()) continue;
      if (c == '\'' || c == '"') {
        push(Tok::Str, string_literal(c), p_);
        continue;
      }
      if (is_digit(c)) {
        size_t start = p_;
        std::string num = digits();
        if ((toks_.empty() || last() != Tok::Dot) && p_ + 1 < s_.size() && s_[p_] == '.' &&
            is_digit(s_[p_ + 1])) {
          ++p_;
          num += "." + digits();
        }
        push(Tok::Num, std::move(num), start);
        continue;
      }
      if (is_word(c)) {
        size_t start = p_;
        while (p_ < s_.size() && is_word(s_[p_])) ++p_;
        push(Tok::Ident, s_.substr(start, p_ - start), start);
        continue;
      }
      parse_error(prog_, p_, "unexpected character " + short_excerpt(s_.substr(p_, 4), 4));
    }
    return std::move(toks_);
  }

 private:
  Tok last() const { return toks_.back().type; }
  bool starts(const char* lit) const { return s_.compare(p_, std::strlen(lit), lit) == 0; }
  void push(Tok t, std::string v, size_t pos) { toks_.push_back({t, std::move(v), pos}); }
  void skip_space() {
    while (size_t n = space_len(s_, p_)) p_ += n;
  }
  void strip_trailing() {
    if (!toks_.empty() && last() == Tok::Text) {
      toks_.back().value = js_trim(toks_.back().value, false, true);
      if (toks_.back().value.empty()) toks_.pop_back();
    }
  }
  std::string digits() {
    size_t start = p_;
    while (p_ < s_.size() && is_digit(s_[p_])) ++p_;
    return s_.substr(start, p_ - start);
  }

  bool symbol() {
    static const std::pair<const char*, Tok> table[] = {
        {"{%", Tok::OpenStmt}, {"%}", Tok::CloseStmt}, {"{{", Tok::OpenExpr}, {"}}", Tok::CloseExpr},
        {"(", Tok::LParen},    {")", Tok::RParen},     {"{", Tok::LBrace},    {"}", Tok::RBrace},
        {"[", Tok::LBracket},  {"]", Tok::RBracket},   {",", Tok::Comma},     {".", Tok::Dot},
        {":", Tok::Colon},     {"|", Tok::Pipe},       {"<=", Tok::Cmp},      {">=", Tok::Cmp},
        {"==", Tok::Cmp},      {"!=", Tok::Cmp},       {"<", Tok::Cmp},       {">", Tok::Cmp},
        {"+", Tok::Add},       {"-", Tok::Add},        {"~", Tok::Add},       {"**", Tok::Pow},
        {"*", Tok::Mul},       {"//", Tok::Mul},       {"/", Tok::Mul},       {"%", Tok::Mul},
        {"=", Tok::Equals},
    };
    for (const auto& [seq, type] : table) {
      if (type == Tok::CloseExpr && brace_depth_ > 0) continue;
      if (!starts(seq)) continue;
      push(type, seq, p_);
      if (type == Tok::OpenExpr) brace_depth_ = 0;
      if (type == Tok::LBrace) ++brace_depth_;
      if (type == Tok::RBrace) --brace_depth_;
      p_ += std::strlen(seq);
      return true;
    }
    return false;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  std::string string_literal(char quote) {
    const size_t start = p_++;
    std::string out;
    for (;;) {
      if (p_ >= s_.size()) parse_error(prog_, start, "unterminated string literal");
      const char c = s_[p_];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++p_;
        continue;
      }
      if (++p_ >= s_.size()) parse_error(prog_, start, "unterminated string literal");
      const char e = s_[p_++];
      if (e == 'x' || e == 'u') {
        const size_t n = e == 'x' ? 2 : 4;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = p_ + k < s_.size() ? hex_value(s_[p_ + k]) : -1;
          if (h < 0) parse_error(prog_, p_ - 2, "invalid hexadecimal escape sequence");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        p_ += n;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone UTF-16 surrogate has no UTF-8 form
        append_utf8(out, cp);
        continue;
      }
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        default:
          parse_error(prog_, p_ - 2, "unexpected escaped character " + short_excerpt(std::string(1, e), 4));
      }
    }
    ++p_;  // closing quote
    return out;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  const Program& prog_;
  const std::string& s_;
  size_t p_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> toks_;
};

// ---- parser ----------------------------------------------------------------------------------------
class Parser {
 public:
  Parser(const Program& prog, std::vector<Token> toks) : prog_(prog), s_(prog.source), t_(std::move(toks)) {}

  NodePtr program() {
    auto root = node(NodeKind::Program, 0);
    while (i_ < t_.size()) root->list.push_back(any());
    return finish(std::move(root));
  }

 private:
  // ---- helpers
  [[noreturn]] void fail(const std::string& msg) const {
    parse_error(prog_, i_ < t_.size() ? t_[i_].pos : s_.size(), msg);
  }
  NodePtr node(NodeKind k, size_t pos) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->pos = pos;
    return n;
  }
  // Sets the subtree height from the children and refuses trees deeper than kMaxNodeDepth.
  NodePtr finish(NodePtr n) {
    int d = 0;
    for (const Node* c : {n->a.get(), n->b.get(), n->c.get()})
      if (c) d = std::max(d, c->depth);
    for (const auto& c : n->list) d = std::max(d, c->depth);
    for (const auto& c : n->list2) d = std::max(d, c->depth);
    n->depth = d + 1;
    if (n->depth > kMaxNodeDepth) parse_error(prog_, n->pos, "template nested too deeply");
    return n;
  }
  size_t pos() const { return i_ < t_.size() ? t_[i_].pos : s_.size(); }
  bool is(Tok t) const { return i_ < t_.size() && t_[i_].type == t; }
  bool is2(Tok a, Tok b) const { return i_ + 1 < t_.size() && t_[i_].type == a && t_[i_ + 1].type == b; }
  bool is_ident(std::string_view name, size_t k = 0) const {
    return i_ + k < t_.size() && t_[i_ + k].type == Tok::Ident && t_[i_ + k].value == name;
  }
  bool is_stmt(std::initializer_list<std::string_view> names) const {
    if (!(i_ + 1 < t_.size() && t_[i_].type == Tok::OpenStmt && t_[i_ + 1].type == Tok::Ident)) return false;
    return std::find(names.begin(), names.end(), t_[i_ + 1].value) != names.end();
  }
  const Token& expect(Tok t, const char* what) {
    if (!is(t)) fail(std::string("expected ") + what);
    return t_[i_++];
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) fail(std::string("expected '") + name + "'");
    ++i_;
  }
  const Token& next(const char* what) {
    if (i_ >= t_.size()) fail(std::string("unexpected end of template, expected ") + what);
    return t_[i_++];
  }
  // guards the recursion itself (the tree height check comes after a subtree is built)
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.recursion_ > kMaxNodeDepth) p.fail("template nested too deeply");
    }
    ~DepthGuard() { --p.recursion_; }
  };
  // statements until one of `names` opens a statement
  void body_until(std::vector<NodePtr>& out, std::initializer_list<std::string_view> names) {
    while (!is_stmt(names)) {
      if (i_ >= t_.size()) fail("unexpected end of template (an unclosed block)");
      out.push_back(any());
    }
  }

  // ---- statements
  NodePtr any() {
    DepthGuard g(*this);
    const Token& tk = t_[i_];
    switch (tk.type) {
      case Tok::Comment: {
        auto n = node(NodeKind::Comment, tk.pos);
        ++i_;
        return finish(std::move(n));
      }
      case Tok::Text: {
        auto n = node(NodeKind::Text, tk.pos);
        n->str = tk.value;
        ++i_;
        return finish(std::move(n));
      }
      case Tok::OpenStmt: return statement();
      case Tok::OpenExpr: {
        auto n = node(NodeKind::Output, tk.pos);
        ++i_;
        n->a = expression();
        expect(Tok::CloseExpr, "'}}'");
        return finish(std::move(n));
      }
      default: fail("unexpected token " + short_excerpt(tk.value));
    }
  }

  NodePtr statement() {
    const size_t start = pos();
    expect(Tok::OpenStmt, "'{%'");
    if (!is(Tok::Ident)) fail("expected a statement name");
    const std::string name = t_[i_++].value;
    if (name == "set") return set_stmt(start);
    if (name == "if") {
      auto n = if_stmt(start);
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endif");
      expect(Tok::CloseStmt, "'%}'");
      return n;
    }
    if (name == "for") {
      auto n = for_stmt(start);
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endfor");
      expect(Tok::CloseStmt, "'%}'");
      return n;
    }
    if (name == "macro") {
      auto n = node(NodeKind::Macro, start);
      auto nm = primary();
      if (nm->kind != NodeKind::Ident) fail("expected a macro name");
      n->str = nm->str;
      n->list = args(true);
      expect(Tok::CloseStmt, "'%}'");
      body_until(n->list2, {"endmacro"});
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endmacro");
      expect(Tok::CloseStmt, "'%}'");
      return finish(std::move(n));
    }
    if (name == "call") {
      auto n = node(NodeKind::CallBlock, start);
      if (is(Tok::LParen)) {
        n->list = args(true);
        n->flag = true;
      }
      auto callee = primary();
      if (callee->kind != NodeKind::Ident) fail("expected a macro name after 'call'");
      auto call = node(NodeKind::Call, callee->pos);
      call->a = std::move(callee);
      call->list = args(false);
      n->a = finish(std::move(call));
      expect(Tok::CloseStmt, "'%}'");
      body_until(n->list2, {"endcall"});
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endcall");
      expect(Tok::CloseStmt, "'%}'");
      return finish(std::move(n));
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStmt, "'%}'");
      return finish(node(name == "break" ? NodeKind::Break : NodeKind::Continue, start));
    }
    if (name == "filter") {
      auto n = node(NodeKind::FilterBlock, start);
      auto f = primary();
      if (f->kind != NodeKind::Ident) fail("expected a filter name");
      if (is(Tok::LParen)) f = call_expr(std::move(f));
      n->a = std::move(f);
      expect(Tok::CloseStmt, "'%}'");
      body_until(n->list2, {"endfilter"});
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endfilter");
      expect(Tok::CloseStmt, "'%}'");
      return finish(std::move(n));
    }
    i_ -= 1;
    fail("unknown statement " + short_excerpt(name));
  }

  NodePtr set_stmt(size_t start) {
    auto n = node(NodeKind::Set, start);
    n->a = sequence(false);
    if (is(Tok::Equals)) {
      ++i_;
      n->b = sequence(false);
    } else {
      expect(Tok::CloseStmt, "'%}' or '='");
      body_until(n->list2, {"endset"});
      expect(Tok::OpenStmt, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::CloseStmt, "'%}'");
    return finish(std::move(n));
  }

  NodePtr if_stmt(size_t start) {
    DepthGuard g(*this);
    auto n = node(NodeKind::If, start);
    n->a = expression();
    expect(Tok::CloseStmt, "'%}'");
    body_until(n->list, {"elif", "else", "endif"});
    if (is_stmt({"elif"})) {
      const size_t p = pos();
      i_ += 2;
      n->list2.push_back(if_stmt(p));
    } else if (is_stmt({"else"})) {
      i_ += 2;
      expect(Tok::CloseStmt, "'%}'");
      body_until(n->list2, {"endif"});
    }
    return finish(std::move(n));
  }

  NodePtr for_stmt(size_t start) {
    auto n = node(NodeKind::For, start);
    n->a = sequence(true);
    if (n->a->kind != NodeKind::Ident && n->a->kind != NodeKind::TupleLit) fail("expected a loop variable");
    expect_ident("in");
    n->b = expression();
    expect(Tok::CloseStmt, "'%}'");
    body_until(n->list, {"endfor", "else"});
    if (is_stmt({"else"})) {
      i_ += 2;
      expect(Tok::CloseStmt, "'%}'");
      body_until(n->list2, {"endfor"});
    }
    return finish(std::move(n));
  }

  // ---- expressions (lowest precedence first)
  NodePtr sequence(bool primary_only) {
    const size_t start = pos();
    auto first = primary_only ? primary() : expression();
    if (!is(Tok::Comma)) return first;
    auto tup = node(NodeKind::TupleLit, start);
    tup->list.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++i_;
      tup->list.push_back(primary_only ? primary() : expression());
    }
    return finish(std::move(tup));
  }

  NodePtr expression() {
    DepthGuard g(*this);
    return if_expr();
  }

  NodePtr if_expr() {
    auto a = or_expr();
    if (!is_ident("if")) return a;
    const size_t p = pos();
    ++i_;
    auto test = or_expr();
    if (is_ident("else")) {
      ++i_;
      auto n = node(NodeKind::Ternary, p);
      n->a = std::move(test);
      n->b = std::move(a);
      DepthGuard g(*this);
      n->c = if_expr();
      return finish(std::move(n));
    }
    auto n = node(NodeKind::Select, p);
    n->a = std::move(a);
    n->b = std::move(test);
    return finish(std::move(n));
  }

  NodePtr binary(std::string op, NodePtr l, NodePtr r, size_t p) {
    auto n = node(NodeKind::Binary, p);
    n->str = std::move(op);
    n->a = std::move(l);
    n->b = std::move(r);
    return finish(std::move(n));
  }

  NodePtr or_expr() {
    auto l = and_expr();
    while (is_ident("or")) {
      const size_t p = pos();
      ++i_;
      l = binary("or", std::move(l), and_expr(), p);
    }
    return l;
  }
  NodePtr and_expr() {
    auto l = not_expr();
    while (is_ident("and")) {
      const size_t p = pos();
      ++i_;
      l = binary("and", std::move(l), not_expr(), p);
    }
    return l;
  }
  NodePtr not_expr() {
    if (is_ident("not")) {
      DepthGuard g(*this);
      auto n = node(NodeKind::Unary, pos());
      ++i_;
      n->str = "not";
      n->a = not_expr();
      return finish(std::move(n));
    }
    return comparison();
  }
  NodePtr comparison() {
    auto l = additive();
    for (;;) {
      const size_t p = pos();
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++i_;
      } else if (is(Tok::Cmp)) {
        op = t_[i_++].value;
      } else {
        break;
      }
      l = binary(std::move(op), std::move(l), additive(), p);
    }
    return l;
  }
  NodePtr additive() {
    auto l = multiplicative();
    while (is(Tok::Add)) {
      const size_t p = pos();
      std::string op = t_[i_++].value;
      l = binary(std::move(op), std::move(l), multiplicative(), p);
    }
    return l;
  }
  NodePtr multiplicative() {
    auto l = power();
    while (is(Tok::Mul)) {
      const size_t p = pos();
      std::string op = t_[i_++].value;
      l = binary(std::move(op), std::move(l), power(), p);
    }
    return l;
  }
  NodePtr power() {
    auto l = test_expr();
    while (is(Tok::Pow)) {
      const size_t p = pos();
      ++i_;
      l = binary("**", std::move(l), test_expr(), p);
    }
    return l;
  }
  NodePtr test_expr() {
    auto operand = filter_expr();
    while (is_ident("is")) {
      auto n = node(NodeKind::Test, pos());
      ++i_;
      if (is_ident("not")) {
        n->flag = true;
        ++i_;
      }
      auto name = primary();
      if (name->kind != NodeKind::Ident) fail("expected a test name after 'is'");
      n->str = name->str;
      n->a = std::move(operand);
      operand = finish(std::move(n));
    }
    return operand;
  }
  NodePtr filter_expr() {
    auto operand = unary_sign();
    while (is(Tok::Pipe)) {
      auto n = node(NodeKind::Filter, pos());
      ++i_;
      auto f = primary();
      if (f->kind != NodeKind::Ident) fail("expected a filter name after '|'");
      if (is(Tok::LParen)) f = call_expr(std::move(f));
      n->a = std::move(operand);
      n->b = std::move(f);
      operand = finish(std::move(n));
    }
    return operand;
  }
  NodePtr unary_sign() {
    if ((is(Tok::Unary) || is(Tok::Add)) && (t_[i_].value == "-" || t_[i_].value == "+")) {
      DepthGuard g(*this);
      auto n = node(NodeKind::Unary, pos());
      n->str = t_[i_++].value;
      n->a = unary_sign();
      return finish(std::move(n));
    }
    auto m = member(primary());
    if (is(Tok::LParen)) return call_expr(std::move(m));
    return m;
  }
  NodePtr call_expr(NodePtr callee) {
    DepthGuard g(*this);
    auto n = node(NodeKind::Call, callee->pos);
    n->a = std::move(callee);
    n->list = args(false);
    NodePtr e = member(finish(std::move(n)));
    if (is(Tok::LParen)) e = call_expr(std::move(e));
    return e;
  }

  std::vector<NodePtr> args(bool parameters) {
    expect(Tok::LParen, "'('");
    std::vector<NodePtr> out;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::RParen)) {
      if (i_ >= t_.size()) fail("unexpected end of template in an argument list");
      const bool kw_spread = is(Tok::Pow);
      const bool pos_spread = is(Tok::Mul) && t_[i_].value == "*";
      if (parameters && (kw_spread || pos_spread)) fail("argument unpacking is not allowed in parameters");
      const size_t p = pos();
      if (kw_spread) {
        ++i_;
        auto n = node(NodeKind::KwSpread, p);
        n->a = expression();
        out.push_back(finish(std::move(n)));
        if (is(Tok::Comma)) ++i_;
        if (!is(Tok::RParen)) fail("'**' must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (pos_spread) {
        if (saw_spread) fail("only one '*' argument unpacking is allowed");
        saw_spread = true;
        ++i_;
        arg = node(NodeKind::Spread, p);
        arg->a = expression();
        arg = finish(std::move(arg));
      } else {
        arg = expression();
        if (is(Tok::Equals)) {
          ++i_;
          if (arg->kind != NodeKind::Ident) fail("expected an identifier before '='");
          auto kw = node(NodeKind::KwArg, p);
          kw->str = arg->str;
          kw->a = expression();
          arg = finish(std::move(kw));
        }
        if (parameters && arg->kind != NodeKind::Ident && arg->kind != NodeKind::KwArg)
          fail("expected an identifier for a parameter");
        if (arg->kind == NodeKind::KwArg)
          saw_keyword = true;
        else if (saw_keyword)
          fail(parameters ? "non-default argument follows default argument"
                          : "positional arguments must come before keyword arguments");
        else if (saw_spread)
          fail("positional arguments must not follow '*' argument unpacking");
      }
      out.push_back(std::move(arg));
      if (is(Tok::Comma)) ++i_;
    }
    ++i_;
    return out;
  }

  NodePtr member(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::LBracket)) {
      const bool computed = is(Tok::LBracket);
      auto n = node(NodeKind::Member, pos());
      ++i_;
      n->flag = computed;
      n->a = std::move(object);
      if (computed) {
        n->b = subscript();
        expect(Tok::RBracket, "']'");
      } else {
        n->b = primary();
        if (n->b->kind != NodeKind::Ident && n->b->kind != NodeKind::Int)
          fail("expected an identifier or integer after '.'");
      }
      object = finish(std::move(n));
    }
    return object;
  }

  NodePtr subscript() {
    const size_t start = pos();
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!is(Tok::RBracket)) {
      if (i_ >= t_.size()) fail("unexpected end of template in a subscript");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++i_;
        is_slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::Colon)) {
          ++i_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) fail("expected an index or a slice");
    if (!is_slice) {
      if (parts.size() != 1) fail("expected one index");
      return std::move(parts[0]);
    }
    if (parts.size() > 3) fail("a slice has at most 3 parts");
    auto n = node(NodeKind::Slice, start);
    n->a = std::move(parts[0]);
    if (parts.size() > 1) n->b = std::move(parts[1]);
    if (parts.size() > 2) n->c = std::move(parts[2]);
    return finish(std::move(n));
  }

  NodePtr primary() {
    DepthGuard g(*this);
    const Token& tk = next("an expression");
    switch (tk.type) {
      case Tok::Num: {
        const bool is_float = tk.value.find('.') != std::string::npos;
        auto n = node(is_float ? NodeKind::Float : NodeKind::Int, tk.pos);
        if (is_float) {
          n->fval = std::strtod(tk.value.c_str(), nullptr);
        } else {
          errno = 0;
          n->ival = std::strtoll(tk.value.c_str(), nullptr, 10);
          if (errno == ERANGE) parse_error(prog_, tk.pos, "integer literal out of range");
        }
        return finish(std::move(n));
      }
      case Tok::Str: {
        auto n = node(NodeKind::Str, tk.pos);
        n->str = tk.value;
        while (is(Tok::Str)) n->str += t_[i_++].value;  // adjacent literals concatenate
        return finish(std::move(n));
      }
      case Tok::Ident: {
        auto n = node(NodeKind::Ident, tk.pos);
        n->str = tk.value;
        return finish(std::move(n));
      }
      case Tok::LParen: {
        auto e = sequence(false);
        expect(Tok::RParen, "')'");
        return e;
      }
      case Tok::LBracket: {
        auto n = node(NodeKind::ArrayLit, tk.pos);
        while (!is(Tok::RBracket)) {
          if (i_ >= t_.size()) fail("unexpected end of template in a list");
          n->list.push_back(expression());
          if (is(Tok::Comma)) ++i_;
        }
        ++i_;
        return finish(std::move(n));
      }
      case Tok::LBrace: {
        auto n = node(NodeKind::ObjectLit, tk.pos);
        while (!is(Tok::RBrace)) {
          if (i_ >= t_.size()) fail("unexpected end of template in a dict");
          n->list.push_back(expression());
          expect(Tok::Colon, "':' in a dict literal");
          n->list2.push_back(expression());
          if (is(Tok::Comma)) ++i_;
        }
        ++i_;
        return finish(std::move(n));
      }
      default: --i_; fail("unexpected token " + short_excerpt(tk.value));
    }
  }

  const Program& prog_;
  const std::string& s_;
  std::vector<Token> t_;
  size_t i_ = 0;
  int recursion_ = 0;
};

}  // namespace

std::string Program::where(size_t pos) const {
  size_t at = origin.empty() ? 0 : origin[std::min(pos, origin.size() - 1)];
  at = std::min(at, original.size());
  size_t line = 1, col = 1;
  for (size_t k = 0; k < at; ++k) {
    if (original[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(original[k]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

std::shared_ptr<const Program> parse_template(std::string_view source) {
  if (source.size() > kMaxTemplateBytes)
    throw Error(ErrorKind::Parse, "chat template: " + std::to_string(source.size()) +
                                      " bytes, more than the " + std::to_string(kMaxTemplateBytes) +
                                      " allowed");
  auto prog = std::make_shared<Program>();
  prog->original = std::string(source);
  prog->source = preprocess(source, prog->origin);
  auto tokens = Lexer(*prog).run();
  prog->root = Parser(*prog, std::move(tokens)).program();
  return prog;
}

}  // namespace candle::generation::jinja
