#pragma once
// The Jinja subset behind chat templates, with the semantics of @huggingface/jinja (the renderer of
// transformers.js): its lexer (trim_blocks and lstrip_blocks on), its grammar and precedence, its
// values (JavaScript-like: `true` prints as "true", 1.0 as "1.0"), filters, tests and methods.
// Templates are hostile input: the parser bounds nesting, the interpreter bounds recursion, steps,
// string and array sizes, and every failure is a candle::Error (Parse for syntax, InvalidArgument
// for a render error) that names the line and column.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "candle/error.h"

namespace candle::generation::jinja {

// ---- limits -------------------------------------------------------------------------------------
inline constexpr size_t kMaxTemplateBytes = 1u << 20;  // a chat template is a few KB
inline constexpr int kMaxNodeDepth = 200;              // nesting of expressions and blocks
inline constexpr int kMaxEvalDepth = 1000;             // interpreter recursion, macros included
inline constexpr size_t kMaxStringBytes = 16u << 20;   // any string value, and the output
inline constexpr size_t kMaxArrayItems = 1u << 20;     // any array (range() included)
inline constexpr uint64_t kMaxSteps =
    1'000'000;  // evaluations, iterations, bytes/64: qwen3 renders 5,000 turns

// ---- values -------------------------------------------------------------------------------------
struct Value;
struct Object;
struct Args;
struct Scope;
using Array = std::vector<Value>;
// A callable: a macro, a bound method or a global; it gets the caller's scope (macros see it).
using Function = std::function<Value(Args&, Scope&)>;

enum class Kind : uint8_t { Undefined, Null, Bool, Int, Float, String, Array, Object, Namespace, Function };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // String
  std::shared_ptr<Array> arr;            // Array (shared, as JavaScript arrays are)
  std::shared_ptr<Object> obj;           // Object and Namespace
  std::shared_ptr<Function> fn;          // Function

  Value() = default;
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  // A list nested 100,000 deep (`{% set ns.a = [ns.a] %}` in a loop) would be freed by a
  // recursion as deep: the last owner hands its list or object to a per-thread queue instead,
  // and the outermost destructor empties the queue in a loop.
  ~Value() {
    if (arr || obj) release_containers();
  }

  static Value undefined() { return {}; }
  static Value null();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value array(Array v = {});
  static Value object();
  static Value ns();
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_string() const { return kind == Kind::String; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_object() const { return kind == Kind::Object; }
  bool is_numeric() const { return kind == Kind::Int || kind == Kind::Float; }
  const std::string& str() const { return *s; }
  double as_double() const { return kind == Kind::Int ? static_cast<double>(i) : kind == Kind::Bool ? b : f; }
  bool truthy() const;

 private:
  void release_containers() noexcept;
};

// An insertion-ordered map (JavaScript's Map): a key set again keeps its place.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  std::unordered_map<std::string, size_t> index;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
  // the entry's position, or entries.size()
  size_t position(const std::string& key) const;
  size_t size() const { return entries.size(); }
};

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(std::string_view name) const;
  // positional i, else keyword `name`, else nullptr
  const Value* get(size_t i, std::string_view name) const;
};

// Bytes of strings (and 4 per list item) built on this thread: the interpreter's step budget
// charges them, so that no loop can make large values for free.
uint64_t& work_counter();

const char* kind_name(Kind k);
// JavaScript's String(number) for a double (shortest round trip, exponent past 1e21).
std::string js_number_string(double v);
// What `{{ v }}` prints (Null and Undefined print nothing).
std::string to_output_string(const Value& v);
struct JsonOptions {
  int indent = 0;
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null, int depth = 0);
// The value of a JSON text (nlohmann ordered parse); numbers with an integral value become Int,
// as they do in JavaScript.
Value from_json_text(std::string_view json);

// ---- UTF-8 and JavaScript string helpers ----------------------------------------------------------
bool js_is_space(uint32_t cp);
// Byte length of the JavaScript whitespace character (\s) at s[i], or 0.
size_t js_space_at(std::string_view s, size_t i);
std::string js_trim(std::string_view s, bool left, bool right);
size_t utf16_length(std::string_view s);
// The byte offset of each code point of s, then s.size() (strings are at most kMaxStringBytes).
std::vector<uint32_t> code_point_offsets(std::string_view s);
std::string short_excerpt(std::string_view s, size_t max = 40);

// ---- syntax tree --------------------------------------------------------------------------------
enum class NodeKind : uint8_t {
  // statements
  Program,
  Text,
  Output,
  If,
  For,
  Set,
  Macro,
  CallBlock,
  FilterBlock,
  Break,
  Continue,
  Comment,
  // expressions
  Int,
  Float,
  Str,
  Ident,
  ArrayLit,
  TupleLit,
  ObjectLit,
  Member,
  Slice,
  Call,
  Unary,
  Binary,
  Filter,
  Test,
  Select,
  Ternary,
  KwArg,
  Spread,
  KwSpread,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  size_t pos = 0;   // byte offset in the preprocessed source, for messages
  int depth = 1;    // height of this subtree
  std::string str;  // text, identifier, string literal, operator
  int64_t ival = 0;
  double fval = 0;
  bool flag = false;  // Member: computed; Test: negated
  NodePtr a, b, c;    // operands (roles per kind, see the parser)
  std::vector<NodePtr> list, list2;
};

struct Program {
  std::string original;          // the template as given
  std::string source;            // preprocessed text (node positions index it)
  std::vector<uint32_t> origin;  // for each byte of `source` (and its end), its offset in `original`
  NodePtr root;
  // "line L, column C" in the original template of a position in `source`
  std::string where(size_t pos) const;
};

// Lexes and parses; throws candle::Error(Parse) naming line and column.
std::shared_ptr<const Program> parse_template(std::string_view source);
// Renders with `context` (an Object) as the global variables.
std::string render(const Program& program, const Value& context);

}  // namespace candle::generation::jinja
