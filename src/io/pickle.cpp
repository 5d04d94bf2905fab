// The pickle virtual machine of candle::pickle (see src/io/pickle_vm.h): protocols 0-5, a
// value tree instead of Python objects, and an allow-list of globals instead of imports.
//
// Allowed globals and what calling them (REDUCE, NEWOBJ, INST, OBJ) does here:
//   collections.OrderedDict()                   an empty dict (or one from a list of pairs)
//   torch._utils._rebuild_tensor(_v2, _v3)      a tensor over a storage, extent checked
//   torch._utils._rebuild_parameter(_with_state) the tensor inside, with requires_grad
//   torch._tensor._rebuild_from_type_v2         calls an allowed rebuild function; the type
//                                               must be torch.Tensor or Parameter
//   torch.Size(tuple), torch.device(str[, int]) the tuple; the device's string
//   _codecs.encode(str, 'latin1' | 'utf-8')     bytes (how protocol 2 writes bytes)
//   builtins set / frozenset / bytearray        a set; bytes
//   torch.<X>Storage, torch.<dtype>, torch.Tensor, torch.nn.parameter.Parameter: values only,
//   not callable. Python 2 spellings (__builtin__) are accepted.
// BUILD is accepted on dicts (an OrderedDict's attributes, e.g. a state dict's _metadata)
// and tensors (a Parameter's state): the state is dropped. Extensions (EXT1/2/4) and
// out-of-band buffers (NEXT_BUFFER) are errors.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include "candle/error.h"
#include "candle/io/json_limits.h"
#include "io/pickle_vm.h"

namespace candle::pickle::detail {

namespace {

constexpr size_t kMaxStack = size_t(1) << 20;  // values on the stack
constexpr size_t kMaxMarks = 10'000;           // open MARKs
constexpr size_t kMaxRank = 64;
constexpr size_t kMaxBigIntDigits = 1000;  // decimal digits of a text integer wider than 64 bits
// The unpickler's memory (arena objects, container items, strings, memo entries): a fixed
// allowance plus a multiple of the pickle's size, which a real checkpoint stays far below.
constexpr uint64_t kMemoryAllowance = uint64_t(256) << 20;
constexpr uint64_t kMemoryPerInputByte = 16;
// collect_tensors
constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxSteps = size_t(1) << 22;
// names per tensor (a tensor may be listed more than once: tied weights, a dict saved twice)
constexpr size_t kMaxNamesPerTensor = 16;
constexpr size_t kMaxNameLen = size_t(64) << 10;
constexpr size_t kMaxNameBytes = size_t(256) << 20;

enum class Callable : uint8_t {
  OrderedDict,
  RebuildTensor,
  RebuildTensorV2,
  RebuildTensorV3,
  RebuildParameter,
  RebuildParameterWithState,
  RebuildFromTypeV2,
  TorchSize,
  TorchDevice,
  CodecsEncode,
  Set,
  FrozenSet,
  ByteArray,
  TensorType,  // torch.Tensor, torch.nn.parameter.Parameter (not callable)
};

const char* callable_name(Callable c) {
  switch (c) {
    case Callable::OrderedDict: return "collections.OrderedDict";
    case Callable::RebuildTensor: return "torch._utils._rebuild_tensor";
    case Callable::RebuildTensorV2: return "torch._utils._rebuild_tensor_v2";
    case Callable::RebuildTensorV3: return "torch._utils._rebuild_tensor_v3";
    case Callable::RebuildParameter: return "torch._utils._rebuild_parameter";
    case Callable::RebuildParameterWithState: return "torch._utils._rebuild_parameter_with_state";
    case Callable::RebuildFromTypeV2: return "torch._tensor._rebuild_from_type_v2";
    case Callable::TorchSize: return "torch.Size";
    case Callable::TorchDevice: return "torch.device";
    case Callable::CodecsEncode: return "_codecs.encode";
    case Callable::Set: return "builtins.set";
    case Callable::FrozenSet: return "builtins.frozenset";
    case Callable::ByteArray: return "builtins.bytearray";
    case Callable::TensorType: return "torch.Tensor";
  }
  return "?";
}

struct TorchDTypeNames {
  TorchDType dtype;
  const char* storage;  // torch.<X>Storage
  const char* name;     // torch.<name>
};

constexpr TorchDTypeNames kTorchDTypes[] = {
    {TorchDType::Float64, "DoubleStorage", "float64"},
    {TorchDType::Float32, "FloatStorage", "float32"},
    {TorchDType::Float16, "HalfStorage", "float16"},
    {TorchDType::BFloat16, "BFloat16Storage", "bfloat16"},
    {TorchDType::Int64, "LongStorage", "int64"},
    {TorchDType::Int32, "IntStorage", "int32"},
    {TorchDType::Int16, "ShortStorage", "int16"},
    {TorchDType::Int8, "CharStorage", "int8"},
    {TorchDType::UInt8, "ByteStorage", "uint8"},
    {TorchDType::Bool, "BoolStorage", "bool"},
    {TorchDType::UInt16, "UInt16Storage", "uint16"},
    {TorchDType::UInt32, "UInt32Storage", "uint32"},
    {TorchDType::UInt64, "UInt64Storage", "uint64"},
    {TorchDType::Complex64, "ComplexFloatStorage", "complex64"},
    {TorchDType::Complex128, "ComplexDoubleStorage", "complex128"},
    {TorchDType::Float8E4M3, "Float8_e4m3fnStorage", "float8_e4m3fn"},
    {TorchDType::Float8E5M2, "Float8_e5m2Storage", "float8_e5m2"},
    {TorchDType::QInt8, "QInt8Storage", "qint8"},
    {TorchDType::QUInt8, "QUInt8Storage", "quint8"},
    {TorchDType::QInt32, "QInt32Storage", "qint32"},
    {TorchDType::Untyped, "UntypedStorage", "untyped"},
};

// The values a resolved global becomes.
struct GlobalValue {
  Kind kind;
  uint8_t sub;
};

std::optional<GlobalValue> resolve_global(std::string_view module, std::string_view name) {
  auto callable = [](Callable c) { return GlobalValue{Kind::Global, static_cast<uint8_t>(c)}; };
  if (module == "collections" && name == "OrderedDict") return callable(Callable::OrderedDict);
  if (module == "torch._utils") {
    if (name == "_rebuild_tensor") return callable(Callable::RebuildTensor);
    if (name == "_rebuild_tensor_v2") return callable(Callable::RebuildTensorV2);
    if (name == "_rebuild_tensor_v3") return callable(Callable::RebuildTensorV3);
    if (name == "_rebuild_parameter") return callable(Callable::RebuildParameter);
    if (name == "_rebuild_parameter_with_state") return callable(Callable::RebuildParameterWithState);
  }
  if (module == "torch._tensor" && name == "_rebuild_from_type_v2")
    return callable(Callable::RebuildFromTypeV2);
  if (module == "torch.nn.parameter" && name == "Parameter") return callable(Callable::TensorType);
  if (module == "_codecs" && name == "encode") return callable(Callable::CodecsEncode);
  if (module == "builtins" || module == "__builtin__") {
    if (name == "set") return callable(Callable::Set);
    if (name == "frozenset") return callable(Callable::FrozenSet);
    if (name == "bytearray") return callable(Callable::ByteArray);
  }
  if (module == "torch.storage" && name == "UntypedStorage")
    return GlobalValue{Kind::StorageType, static_cast<uint8_t>(TorchDType::Untyped)};
  if (module == "torch") {
    if (name == "Size") return callable(Callable::TorchSize);
    if (name == "device") return callable(Callable::TorchDevice);
    if (name == "Tensor") return callable(Callable::TensorType);
    for (const auto& d : kTorchDTypes) {
      if (name == d.storage) return GlobalValue{Kind::StorageType, static_cast<uint8_t>(d.dtype)};
      if (d.dtype != TorchDType::Untyped && name == d.name)
        return GlobalValue{Kind::DTypeObj, static_cast<uint8_t>(d.dtype)};
    }
    // the dtypes' other names
    static constexpr std::pair<const char*, TorchDType> aliases[] = {
        {"double", TorchDType::Float64}, {"float", TorchDType::Float32}, {"half", TorchDType::Float16},
        {"long", TorchDType::Int64},     {"int", TorchDType::Int32},     {"short", TorchDType::Int16},
    };
    for (const auto& [alias, dt] : aliases)
      if (name == alias) return GlobalValue{Kind::DTypeObj, static_cast<uint8_t>(dt)};
  }
  return std::nullopt;
}

uint64_t load_le(const std::byte* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// "[2, 3]"
std::string join_dims(const std::vector<uint64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out.append(", ");
    out.append(std::to_string(dims[i]));
  }
  out.append("]");
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> data, PidFormat pids, const std::string& label)
      : data_(data), pids_(pids), label_(label) {
    budget_ = kMemoryAllowance + kMemoryPerInputByte * uint64_t(data.size());
  }

  Tree run() {
    while (true) {
      op_pos_ = pos_;
      if (pos_ >= data_.size()) fail("truncated: the pickle ends without a STOP opcode");
      const auto op = static_cast<uint8_t>(data_[pos_++]);
      if (op == '.') {
        tree_.root = pop();
        tree_.end = pos_;
        return std::move(tree_);
      }
      step(op);
    }
  }

 private:
  // ---- errors and reading ------------------------------------------------------------------
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(ErrorKind::Parse,
                label_ + ": pickle: " + msg + " (opcode at byte " + std::to_string(op_pos_) + ")");
  }

  const std::byte* take(uint64_t n) {
    if (n > data_.size() - pos_) {
      fail("truncated: " + std::to_string(n) + " bytes needed, " + std::to_string(data_.size() - pos_) +
           " left");
    }
    const std::byte* p = data_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t take_uint(size_t n) { return load_le(take(n), n); }
  std::string_view take_string(uint64_t n) {
    const std::byte* p = take(n);
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(n)};
  }
  // A text argument: the bytes up to '\n' (not included).
  std::string_view take_line() {
    const auto* begin = reinterpret_cast<const char*>(data_.data() + pos_);
    const size_t left = data_.size() - pos_;
    const void* nl = left ? std::memchr(begin, '\n', left) : nullptr;
    if (!nl) fail("truncated: a text argument has no end of line");
    size_t len = static_cast<size_t>(static_cast<const char*>(nl) - begin);
    pos_ += len + 1;
    return {begin, len};
  }

  void charge(uint64_t bytes) {
    if (bytes > budget_) {
      fail("the pickle needs more memory than its size allows (over " +
           std::to_string(kMemoryAllowance + kMemoryPerInputByte * uint64_t(data_.size())) + " bytes)");
    }
    budget_ -= bytes;
  }

  // ---- the stack -----------------------------------------------------------------------------
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(const Ref& r) {
    if (stack_.size() >= kMaxStack)
      fail("the stack holds more than " + std::to_string(kMaxStack) + " values");
    stack_.push_back(r);
  }
  Ref pop() {
    if (stack_.size() <= base()) fail("stack underflow");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref& top() {
    if (stack_.size() <= base()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<Ref> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    size_t k = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(k), stack_.end());
    stack_.resize(k);
    return items;
  }

  // ---- values --------------------------------------------------------------------------------
  Ref make(Kind kind, std::string text = {}, std::vector<Ref> items = {}, uint8_t sub = 0, uint32_t aux = 0) {
    if (tree_.arena.size() >= std::numeric_limits<uint32_t>::max()) fail("too many values");
    charge(sizeof(Object) + text.size() + items.size() * sizeof(Ref));
    Object o;
    o.kind = kind;
    o.sub = sub;
    o.aux = aux;
    o.text = std::move(text);
    o.items = std::move(items);
    tree_.arena.push_back(std::move(o));
    Ref r;
    r.kind = kind;
    r.index = static_cast<uint32_t>(tree_.arena.size() - 1);
    return r;
  }
  static Ref scalar(Kind kind, int64_t v) {
    Ref r;
    r.kind = kind;
    r.i = v;
    return r;
  }
  static Ref floating(double v) {
    Ref r;
    r.kind = Kind::Float;
    r.f = v;
    return r;
  }
  Object& obj(const Ref& r) { return tree_.arena[r.index]; }
  const std::string& str(const Ref& r, const char* what) {
    if (r.kind != Kind::Str) fail(std::string(what) + " must be a string, not " + kind_name(r.kind));
    return obj(r).text;
  }
  int64_t integer(const Ref& r, const char* what) {
    if (r.kind != Kind::Int && r.kind != Kind::Bool)
      fail(std::string(what) + " must be an integer, not " + kind_name(r.kind));
    return r.i;
  }
  uint64_t non_negative(const Ref& r, const char* what) {
    int64_t v = integer(r, what);
    if (v < 0) fail(std::string(what) + " is negative (" + std::to_string(v) + ")");
    return static_cast<uint64_t>(v);
  }
  // Adds items to a container, charging for them.
  void extend(const Ref& container, Kind want, const char* op, const Ref* items, size_t n) {
    if (container.kind != want)
      fail(std::string(op) + " needs a " + kind_name(want) + " below its items, not " +
           kind_name(container.kind));
    charge(n * sizeof(Ref));
    auto& v = obj(container).items;
    v.insert(v.end(), items, items + n);
  }

  // Integers from little-endian two's complement bytes (LONG1, LONG4).
  Ref long_from_bytes(std::string_view b) {
    size_t n = b.size();
    if (n == 0) return scalar(Kind::Int, 0);
    const bool negative = static_cast<uint8_t>(b[n - 1]) & 0x80;
    const char fill = negative ? '\xff' : '\0';
    // drop the sign extension bytes a minimal encoding would not have
    while (n > 1 && b[n - 1] == fill && ((static_cast<uint8_t>(b[n - 2]) & 0x80) != 0) == negative) --n;
    if (n <= 8) {
      uint64_t v = 0;
      for (size_t i = 0; i < 8; ++i) v |= uint64_t(static_cast<uint8_t>(i < n ? b[i] : fill)) << (8 * i);
      return scalar(Kind::Int, static_cast<int64_t>(v));
    }
    return make(Kind::BigInt, std::string(b.substr(0, n)));
  }

  // A decimal literal (INT, LONG): an int64, or a BigInt when wider.
  Ref long_from_text(std::string_view s, const char* op) {
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
    bool negative = false;
    std::string_view digits = s;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      fail(std::string(op) + " argument '" + io::excerpt(s) + "' is not an integer");
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + (s[0] == '+' ? 1 : 0), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size()) return scalar(Kind::Int, v);
    if (digits.size() > kMaxBigIntDigits)
      fail(std::string(op) + " integer has more than " + std::to_string(kMaxBigIntDigits) + " digits");
    // magnitude, little-endian bytes: multiply by 10 and add each digit (quadratic, but bounded)
    std::vector<uint8_t> mag{0};
    for (char c : digits) {
      unsigned carry = static_cast<unsigned>(c - '0');
      for (uint8_t& byte : mag) {
        unsigned x = byte * 10u + carry;
        byte = static_cast<uint8_t>(x & 0xff);
        carry = x >> 8;
      }
      if (carry) mag.push_back(static_cast<uint8_t>(carry));
    }
    mag.push_back(0);  // room for the sign bit
    if (negative) {    // two's complement
      unsigned carry = 1;
      for (uint8_t& byte : mag) {
        unsigned x = static_cast<uint8_t>(~byte) + carry;
        byte = static_cast<uint8_t>(x & 0xff);
        carry = x >> 8;
      }
    }
    return long_from_bytes(std::string_view(reinterpret_cast<const char*>(mag.data()), mag.size()));
  }

  uint64_t memo_index_text(std::string_view s, const char* op) {
    while (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
      fail(std::string(op) + " argument '" + io::excerpt(s) + "' is not a memo index");
    return v;
  }

  // STRING: a quoted Python 2 str literal with backslash escapes (codecs.escape_decode).
  std::string string_literal(std::string_view s) {
    while (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    if (s.size() < 2 || s.front() != s.back() || (s.front() != '\'' && s.front() != '"'))
      fail("the STRING opcode argument must be quoted");
    s = s.substr(1, s.size() - 2);
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c != '\\' || i + 1 == s.size()) {
        out += c;
        continue;
      }
      char e = s[++i];
      switch (e) {
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;
        case 'x': {
          int hi = i + 1 < s.size() ? hex_digit(s[i + 1]) : -1;
          int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
          if (hi < 0 || lo < 0) fail("invalid \\x escape in a STRING");
          out += static_cast<char>(hi * 16 + lo);
          i += 2;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned v = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
              v = v * 8 + static_cast<unsigned>(s[++i] - '0');
            out += static_cast<char>(v & 0xff);
          } else {  // unknown escapes stay as written
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  // UNICODE: raw-unicode-escape (\uXXXX, \UXXXXXXXX; other bytes are Latin-1), to UTF-8.
  std::string raw_unicode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<uint8_t>(s[i]);
      if (c == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        size_t n = s[i + 1] == 'u' ? 4 : 8;
        if (i + 2 + n > s.size()) fail("truncated \\u escape in a UNICODE string");
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          int d = hex_digit(s[i + 2 + k]);
          if (d < 0) fail("invalid \\u escape in a UNICODE string");
          cp = cp * 16 + static_cast<uint32_t>(d);
        }
        if (cp > 0x10ffff) fail("code point out of range in a UNICODE string");
        append_utf8(out, cp);
        i += 1 + n;
      } else {
        append_utf8(out, c);
      }
    }
    return out;
  }

  // ---- memo ----------------------------------------------------------------------------------
  void memo_put(uint64_t idx) {
    const Ref& v = top();
    auto [it, inserted] = memo_.try_emplace(idx, v);
    if (inserted)
      charge(64);  // a node of the hash map
    else
      it->second = v;
  }
  void memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) fail("memo index " + std::to_string(idx) + " is not defined");
    push(it->second);
  }

  // ---- globals and calls ---------------------------------------------------------------------
  Ref global(std::string_view module, std::string_view name) {
    auto g = resolve_global(module, name);
    if (!g) {
      fail("global '" + io::excerpt(module) + "." + io::excerpt(name) +
           "' is not allowed (only tensors, storages and state dicts can be loaded)");
    }
    std::string full = std::string(module) + "." + std::string(name);
    return make(g->kind, std::move(full), {}, g->sub);
  }

  std::vector<Ref> tuple_items(const Ref& r, const char* what) {
    if (r.kind != Kind::Tuple) fail(std::string(what) + " must be a tuple, not " + kind_name(r.kind));
    return obj(r).items;
  }

  Ref call(const Ref& fn, const std::vector<Ref>& args) {
    if (fn.kind != Kind::Global) {
      std::string what = fn.in_arena() && !obj(fn).text.empty() && fn.kind != Kind::Str
                             ? " '" + io::excerpt(obj(fn).text) + "'"
                             : "";
      fail(std::string("cannot call a ") + kind_name(fn.kind) + what);
    }
    const auto c = static_cast<Callable>(obj(fn).sub);
    auto nargs = [&](size_t lo, size_t hi) {
      if (args.size() < lo || args.size() > hi) {
        fail(std::string(callable_name(c)) + " takes " + std::to_string(lo) +
             (lo == hi ? "" : " to " + std::to_string(hi)) + " arguments, got " +
             std::to_string(args.size()));
      }
    };
    switch (c) {
      case Callable::OrderedDict: {
        nargs(0, 1);
        Ref d = make(Kind::Dict);
        if (args.size() == 1) {
          if (args[0].kind != Kind::List && args[0].kind != Kind::Tuple)
            fail("collections.OrderedDict takes a list of pairs");
          std::vector<Ref> pairs = obj(args[0]).items;
          for (const Ref& p : pairs) {
            std::vector<Ref> kv = tuple_items(p, "an OrderedDict item");
            if (kv.size() != 2) fail("an OrderedDict item is not a (key, value) pair");
            extend(d, Kind::Dict, "OrderedDict", kv.data(), 2);
          }
        }
        return d;
      }
      case Callable::RebuildTensor: nargs(4, 4); return rebuild_tensor(args, std::nullopt, false);
      case Callable::RebuildTensorV2:
        nargs(6, 7);
        return rebuild_tensor(args, std::nullopt, args[4].kind == Kind::Bool && args[4].i);
      case Callable::RebuildTensorV3: {
        nargs(7, 8);
        if (args[6].kind != Kind::DTypeObj) fail("the dtype of _rebuild_tensor_v3 must be a torch dtype");
        return rebuild_tensor(args, static_cast<TorchDType>(obj(args[6]).sub),
                              args[4].kind == Kind::Bool && args[4].i);
      }
      case Callable::RebuildParameter:
      case Callable::RebuildParameterWithState: {
        if (c == Callable::RebuildParameter)
          nargs(3, 3);
        else
          nargs(4, 4);
        if (args[0].kind != Kind::Tensor)
          fail("the data of a Parameter must be a tensor, not " + std::string(kind_name(args[0].kind)));
        TensorRecord t = tree_.tensors[obj(args[0]).aux];
        t.requires_grad = args[1].kind == Kind::Bool && args[1].i;
        return add_tensor(std::move(t));
      }
      case Callable::RebuildFromTypeV2: {
        nargs(4, 4);
        if (args[0].kind != Kind::Global) fail("the function of _rebuild_from_type_v2 must be a global");
        auto f = static_cast<Callable>(obj(args[0]).sub);
        if (f != Callable::RebuildTensor && f != Callable::RebuildTensorV2 &&
            f != Callable::RebuildTensorV3 && f != Callable::RebuildParameter &&
            f != Callable::RebuildParameterWithState)
          fail(std::string("_rebuild_from_type_v2 of ") + callable_name(f) + " is not allowed");
        if (args[1].kind != Kind::Global || static_cast<Callable>(obj(args[1]).sub) != Callable::TensorType)
          fail("the type of _rebuild_from_type_v2 must be torch.Tensor or torch.nn.parameter.Parameter");
        return call(args[0], tuple_items(args[2], "the arguments of _rebuild_from_type_v2"));
      }
      case Callable::TorchSize: {
        nargs(0, 1);
        if (args.empty()) return make(Kind::Tuple);
        std::vector<Ref> dims = tuple_items(args[0], "the argument of torch.Size");
        for (const Ref& d : dims) non_negative(d, "a dimension of torch.Size");
        return make(Kind::Tuple, {}, std::move(dims));
      }
      case Callable::TorchDevice: {
        nargs(1, 2);
        std::string s = str(args[0], "the argument of torch.device");
        if (args.size() == 2 && args[1].kind != Kind::None)
          s += ":" + std::to_string(integer(args[1], "the index of torch.device"));
        return make(Kind::Str, std::move(s));
      }
      case Callable::CodecsEncode: return codecs_encode(args);
      case Callable::Set:
      case Callable::FrozenSet: {
        nargs(0, 1);
        std::vector<Ref> items;
        if (args.size() == 1) {
          Kind k = args[0].kind;
          if (k != Kind::List && k != Kind::Tuple && k != Kind::Set) fail("set() takes a list, tuple or set");
          items = obj(args[0]).items;
        }
        return make(Kind::Set, {}, std::move(items));
      }
      case Callable::ByteArray: {
        nargs(0, 1);
        if (args.empty()) return make(Kind::Bytes);
        if (args[0].kind != Kind::Bytes) fail("bytearray() takes bytes");
        return make(Kind::Bytes, obj(args[0]).text);
      }
      case Callable::TensorType: break;
    }
    fail(std::string("cannot call '") + io::excerpt(obj(fn).text) + "'");
  }

  Ref codecs_encode(const std::vector<Ref>& args) {
    if (args.size() != 2) fail("_codecs.encode takes (str, encoding)");
    const std::string& s = str(args[0], "the text of _codecs.encode");
    const std::string& enc = str(args[1], "the encoding of _codecs.encode");
    if (enc == "utf-8" || enc == "utf8") return make(Kind::Bytes, s);
    if (enc != "latin1" && enc != "latin-1" && enc != "iso-8859-1")
      fail("_codecs.encode with encoding '" + io::excerpt(enc) + "' is not supported (latin1 or utf-8)");
    // UTF-8 to Latin-1: each code point must be below 256
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<uint8_t>(s[i]);
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else if ((c & 0xe0) == 0xc0 && i + 1 < s.size() && (static_cast<uint8_t>(s[i + 1]) & 0xc0) == 0x80) {
        uint32_t cp = ((c & 0x1fu) << 6) | (static_cast<uint8_t>(s[++i]) & 0x3fu);
        if (cp > 0xff) fail("_codecs.encode: a character does not fit Latin-1");
        out += static_cast<char>(cp);
      } else {
        fail("_codecs.encode: the text is not Latin-1 (as UTF-8)");
      }
    }
    return make(Kind::Bytes, std::move(out));
  }

  Ref add_tensor(TensorRecord t) {
    if (tree_.tensors.size() >= std::numeric_limits<uint32_t>::max()) fail("too many tensors");
    charge(sizeof(TensorRecord) + (t.shape.size() + t.stride.size()) * sizeof(uint64_t));
    tree_.tensors.push_back(std::move(t));
    return make(Kind::Tensor, {}, {}, 0, static_cast<uint32_t>(tree_.tensors.size() - 1));
  }

  std::vector<uint64_t> dims(const Ref& r, const char* what) {
    std::vector<Ref> items = tuple_items(r, what);
    if (items.size() > kMaxRank)
      fail(std::string(what) + " has " + std::to_string(items.size()) + " dimensions (at most 64)");
    std::vector<uint64_t> out;
    out.reserve(items.size());
    for (const Ref& d : items) out.push_back(non_negative(d, what));
    return out;
  }

  // _rebuild_tensor(_v2, _v3): (storage, storage_offset, size, stride, ...).
  Ref rebuild_tensor(const std::vector<Ref>& args, std::optional<TorchDType> dtype, bool requires_grad) {
    if (args[0].kind != Kind::Storage)
      fail("the storage of a tensor must be a persistent storage id, not " +
           std::string(kind_name(args[0].kind)));
    const StorageRecord& s = tree_.storages[obj(args[0]).aux];
    TensorRecord t;
    t.storage = obj(args[0]).aux;
    t.dtype = dtype.value_or(s.dtype);
    if (t.dtype == TorchDType::Untyped) fail("a tensor over an untyped storage needs a dtype");
    t.storage_offset = non_negative(args[1], "the storage offset");
    t.shape = dims(args[2], "the size of a tensor");
    t.stride = dims(args[3], "the stride of a tensor");
    t.requires_grad = requires_grad;
    if (t.shape.size() != t.stride.size()) {
      fail("a tensor's size has " + std::to_string(t.shape.size()) + " dimensions and its stride " +
           std::to_string(t.stride.size()));
    }
    // The elements the tensor reaches, offset + 1 + sum((size - 1) * stride), must lie in the
    // storage (none when it is empty).
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    bool empty = std::any_of(t.shape.begin(), t.shape.end(), [](uint64_t d) { return d == 0; });
    uint64_t count = 1;
    for (uint64_t d : t.shape) {
      if (d != 0 && count > kMax / d) fail("the element count of a tensor overflows");
      count *= d;
    }
    if (count > std::numeric_limits<size_t>::max() / 8) fail("the element count of a tensor overflows");
    if (!empty) {
      uint64_t extent = t.storage_offset;
      bool overflow = extent == kMax;
      extent += 1;
      for (size_t i = 0; i < t.shape.size() && !overflow; ++i) {
        uint64_t d = t.shape[i] - 1;
        if (t.stride[i] != 0 && d > kMax / t.stride[i]) {
          overflow = true;
        } else if (d * t.stride[i] > kMax - extent) {
          overflow = true;
        } else {
          extent += d * t.stride[i];
        }
      }
      const uint64_t esize = torch_dtype_size(t.dtype);
      const uint64_t storage_bytes = s.numel * torch_dtype_size(s.dtype);  // checked in persistent_load
      if (overflow || extent > kMax / esize || extent * esize > storage_bytes) {
        fail("a tensor of size " + join_dims(t.shape) + ", stride " + join_dims(t.stride) + " and offset " +
             std::to_string(t.storage_offset) + " reaches past its storage '" + io::excerpt(s.key) + "' of " +
             std::to_string(s.numel) + " " + torch_dtype_name(s.dtype) + " elements");
      }
    }
    return add_tensor(std::move(t));
  }

  // ('storage', storage_type, key, location, numel[, view_metadata]).
  Ref persistent_load(const Ref& pid) {
    if (pids_ == PidFormat::None) fail("a persistent id where none is expected");
    if (pid.kind != Kind::Tuple)
      fail("a persistent id must be a tuple, not " + std::string(kind_name(pid.kind)));
    std::vector<Ref> t = obj(pid).items;
    if (t.empty() || t[0].kind != Kind::Str) fail("a persistent id must start with its kind");
    const std::string& what = obj(t[0]).text;
    if (what != "storage") fail("persistent id of kind '" + io::excerpt(what) + "' is not supported");
    const size_t want = pids_ == PidFormat::Zip ? 5 : 6;
    if (t.size() != want) {
      fail("a storage persistent id has " + std::to_string(t.size()) + " items, not " + std::to_string(want));
    }
    if (t[1].kind != Kind::StorageType) fail("the type of a storage must be a torch storage type");
    StorageRecord s;
    s.dtype = static_cast<TorchDType>(obj(t[1]).sub);
    s.key = str(t[2], "a storage key");
    s.location = str(t[3], "a storage location");
    s.numel = non_negative(t[4], "a storage's size");
    if (s.numel > std::numeric_limits<uint64_t>::max() / 16) fail("a storage's size overflows");
    uint32_t root = register_storage(s);
    if (pids_ == PidFormat::Legacy && t[5].kind != Kind::None) {
      std::vector<Ref> view = tuple_items(t[5], "a storage's view metadata");
      if (view.size() != 3) fail("a storage's view metadata is not (key, offset, size)");
      StorageRecord v = tree_.storages[root];
      const std::string view_key = str(view[0], "a storage view key");
      v.view_offset = non_negative(view[1], "a storage view offset");
      v.numel = non_negative(view[2], "a storage view size");
      v.is_view = true;
      if (v.view_offset > s.numel || v.numel > s.numel - v.view_offset) {
        fail("storage view '" + io::excerpt(view_key) + "' of " + std::to_string(v.numel) + " elements at " +
             std::to_string(v.view_offset) + " lies outside its storage of " + std::to_string(s.numel));
      }
      auto it = views_.find(view_key);
      if (it != views_.end()) return storage_ref(it->second);
      tree_.storages.push_back(std::move(v));
      auto idx = static_cast<uint32_t>(tree_.storages.size() - 1);
      views_.emplace(view_key, idx);
      charge(sizeof(StorageRecord) + 2 * view_key.size() + 64);
      return storage_ref(idx);
    }
    return storage_ref(root);
  }

  uint32_t register_storage(const StorageRecord& s) {
    auto it = tree_.storage_by_key.find(s.key);
    if (it != tree_.storage_by_key.end()) {
      const StorageRecord& old = tree_.storages[it->second];
      if (old.dtype != s.dtype || old.numel != s.numel) {
        fail("storage '" + io::excerpt(s.key) + "' is referenced as " + std::to_string(old.numel) + " " +
             torch_dtype_name(old.dtype) + " and as " + std::to_string(s.numel) + " " +
             torch_dtype_name(s.dtype));
      }
      return it->second;
    }
    if (tree_.storages.size() >= std::numeric_limits<uint32_t>::max()) fail("too many storages");
    charge(sizeof(StorageRecord) + 2 * s.key.size() + s.location.size() + 64);
    tree_.storages.push_back(s);
    auto idx = static_cast<uint32_t>(tree_.storages.size() - 1);
    tree_.storage_by_key.emplace(s.key, idx);
    return idx;
  }

  Ref storage_ref(uint32_t idx) { return make(Kind::Storage, {}, {}, 0, idx); }

  // ---- opcodes -------------------------------------------------------------------------------
  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        auto v = static_cast<uint8_t>(*take(1));
        if (v > 5) fail("unsupported pickle protocol " + std::to_string(v));
        break;
      }
      case 0x95: {  // FRAME: only a hint for buffering
        uint64_t n = take_uint(8);
        if (n > data_.size() - pos_) fail("a FRAME of " + std::to_string(n) + " bytes runs past the end");
        break;
      }
      case '(':  // MARK
        if (marks_.size() >= kMaxMarks) fail("MARKs nest deeper than " + std::to_string(kMaxMarks));
        marks_.push_back(stack_.size());
        break;
      case '0':  // POP
        if (stack_.size() > base())
          stack_.pop_back();
        else
          pop_mark();
        break;
      case '1': pop_mark(); break;  // POP_MARK
      case '2': {                   // DUP
        Ref r = top();
        push(r);
        break;
      }
      // ---- scalars
      case 'N': push(Ref{}); break;
      case 0x88: push(scalar(Kind::Bool, 1)); break;
      case 0x89: push(scalar(Kind::Bool, 0)); break;
      case 'K': push(scalar(Kind::Int, static_cast<int64_t>(take_uint(1)))); break;
      case 'M': push(scalar(Kind::Int, static_cast<int64_t>(take_uint(2)))); break;
      case 'J': push(scalar(Kind::Int, static_cast<int32_t>(static_cast<uint32_t>(take_uint(4))))); break;
      case 'I': {
        std::string_view s = take_line();
        std::string_view t = s;
        while (!t.empty() && t.back() == '\r') t.remove_suffix(1);
        if (t == "01")
          push(scalar(Kind::Bool, 1));
        else if (t == "00")
          push(scalar(Kind::Bool, 0));
        else
          push(long_from_text(s, "INT"));
        break;
      }
      case 'L': push(long_from_text(take_line(), "LONG")); break;
      case 0x8a: {  // LONG1
        uint64_t n = take_uint(1);
        push(long_from_bytes(take_string(n)));
        break;
      }
      case 0x8b: {  // LONG4
        auto n = static_cast<int32_t>(static_cast<uint32_t>(take_uint(4)));
        if (n < 0) fail("LONG4 with a negative length");
        push(long_from_bytes(take_string(static_cast<uint64_t>(n))));
        break;
      }
      case 'F': {
        std::string_view s = take_line();
        while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
        double v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || s.empty())
          fail("FLOAT argument '" + io::excerpt(s) + "' is not a number");
        push(floating(v));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const std::byte* p = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(p[i]);
        double v;
        std::memcpy(&v, &bits, 8);
        push(floating(v));
        break;
      }
      // ---- strings and bytes
      case 'S': push(make(Kind::Str, string_literal(take_line()))); break;
      case 'T': push(make(Kind::Str, std::string(take_string(take_uint(4))))); break;     // BINSTRING
      case 'U': push(make(Kind::Str, std::string(take_string(take_uint(1))))); break;     // SHORT_BINSTRING
      case 'V': push(make(Kind::Str, raw_unicode(take_line()))); break;                   // UNICODE
      case 'X': push(make(Kind::Str, std::string(take_string(take_uint(4))))); break;     // BINUNICODE
      case 0x8c: push(make(Kind::Str, std::string(take_string(take_uint(1))))); break;    // SHORT_BINUNICODE
      case 0x8d: push(make(Kind::Str, std::string(take_string(take_uint(8))))); break;    // BINUNICODE8
      case 'B': push(make(Kind::Bytes, std::string(take_string(take_uint(4))))); break;   // BINBYTES
      case 'C': push(make(Kind::Bytes, std::string(take_string(take_uint(1))))); break;   // SHORT_BINBYTES
      case 0x8e:                                                                          // BINBYTES8
      case 0x96: push(make(Kind::Bytes, std::string(take_string(take_uint(8))))); break;  // BYTEARRAY8
      case 0x97: fail("out-of-band buffers (NEXT_BUFFER) are not supported");
      case 0x98:  // READONLY_BUFFER
        if (top().kind != Kind::Bytes) fail("READONLY_BUFFER needs bytes");
        break;
      // ---- containers
      case ')': push(make(Kind::Tuple)); break;
      case ']': push(make(Kind::List)); break;
      case '}': push(make(Kind::Dict)); break;
      case 0x8f: push(make(Kind::Set)); break;
      case 't': push(make(Kind::Tuple, {}, pop_mark())); break;
      case 'l': push(make(Kind::List, {}, pop_mark())); break;
      case 'd': {
        std::vector<Ref> items = pop_mark();
        if (items.size() % 2) fail("DICT with an odd number of items");
        push(make(Kind::Dict, {}, std::move(items)));
        break;
      }
      case 0x91: push(make(Kind::Set, {}, pop_mark())); break;  // FROZENSET
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1-3
        size_t n = op - 0x84u;
        if (stack_.size() < base() + n) fail("stack underflow");
        std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(make(Kind::Tuple, {}, std::move(items)));
        break;
      }
      case 'a': {  // APPEND
        Ref v = pop();
        extend(top(), Kind::List, "APPEND", &v, 1);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<Ref> items = pop_mark();
        extend(top(), Kind::List, "APPENDS", items.data(), items.size());
        break;
      }
      case 's': {  // SETITEM
        Ref kv[2];
        kv[1] = pop();
        kv[0] = pop();
        extend(top(), Kind::Dict, "SETITEM", kv, 2);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<Ref> items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        extend(top(), Kind::Dict, "SETITEMS", items.data(), items.size());
        break;
      }
      case 0x90: {  // ADDITEMS
        std::vector<Ref> items = pop_mark();
        extend(top(), Kind::Set, "ADDITEMS", items.data(), items.size());
        break;
      }
      // ---- memo
      case 'p': memo_put(memo_index_text(take_line(), "PUT")); break;
      case 'q': memo_put(take_uint(1)); break;
      case 'r': memo_put(take_uint(4)); break;
      case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
      case 'g': memo_get(memo_index_text(take_line(), "GET")); break;
      case 'h': memo_get(take_uint(1)); break;
      case 'j': memo_get(take_uint(4)); break;
      // ---- globals, calls, objects
      case 'c': {
        std::string_view module = take_line();
        std::string_view name = take_line();
        push(global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Ref name = pop();
        Ref module = pop();
        if (name.kind != Kind::Str || module.kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
        push(global(obj(module).text, obj(name).text));
        break;
      }
      case 'R': {  // REDUCE
        Ref args = pop();
        Ref fn = pop();
        push(call(fn, tuple_items(args, "the arguments of REDUCE")));
        break;
      }
      case 0x81: {  // NEWOBJ
        Ref args = pop();
        Ref cls = pop();
        push(call(cls, tuple_items(args, "the arguments of NEWOBJ")));
        break;
      }
      case 0x92: {  // NEWOBJ_EX
        Ref kwargs = pop();
        Ref args = pop();
        Ref cls = pop();
        if (kwargs.kind != Kind::Dict || !obj(kwargs).items.empty()) fail("NEWOBJ_EX with keyword arguments");
        push(call(cls, tuple_items(args, "the arguments of NEWOBJ_EX")));
        break;
      }
      case 'i': {  // INST
        std::string_view module = take_line();
        std::string_view name = take_line();
        Ref cls = global(module, name);
        push(call(cls, pop_mark()));
        break;
      }
      case 'o': {  // OBJ
        std::vector<Ref> items = pop_mark();
        if (items.empty()) fail("OBJ without a class");
        Ref cls = items[0];
        items.erase(items.begin());
        push(call(cls, items));
        break;
      }
      case 'b': {  // BUILD
        Ref state = pop();
        const Ref& inst = top();
        if (inst.kind != Kind::Dict && inst.kind != Kind::Tensor)
          fail(std::string("BUILD of a ") + kind_name(inst.kind) + " is not supported");
        (void)state;
        break;
      }
      case 'P': push(persistent_load(make(Kind::Str, std::string(take_line())))); break;  // PERSID
      case 'Q': {                                                                         // BINPERSID
        Ref pid = pop();
        push(persistent_load(pid));
        break;
      }
      case 0x82:
      case 0x83:
      case 0x84: fail("extension registry codes (EXT1/EXT2/EXT4) are not supported");
      default: {
        static const char* hex = "0123456789abcdef";
        fail(std::string("unknown opcode 0x") + hex[op >> 4] + hex[op & 15]);
      }
    }
  }

  std::span<const std::byte> data_;
  PidFormat pids_;
  const std::string& label_;
  size_t pos_ = 0, op_pos_ = 0;
  uint64_t budget_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::unordered_map<std::string, uint32_t> views_;
  Tree tree_;
};

}  // namespace

const char* torch_dtype_name(TorchDType t) {
  for (const auto& d : kTorchDTypes)
    if (d.dtype == t) return d.name;
  return "?";
}

size_t torch_dtype_size(TorchDType t) {
  switch (t) {
    case TorchDType::Float64:
    case TorchDType::Int64:
    case TorchDType::UInt64:
    case TorchDType::Complex64: return 8;
    case TorchDType::Complex128: return 16;
    case TorchDType::Float32:
    case TorchDType::Int32:
    case TorchDType::UInt32:
    case TorchDType::QInt32: return 4;
    case TorchDType::Float16:
    case TorchDType::BFloat16:
    case TorchDType::Int16:
    case TorchDType::UInt16: return 2;
    case TorchDType::Int8:
    case TorchDType::UInt8:
    case TorchDType::Bool:
    case TorchDType::Float8E4M3:
    case TorchDType::Float8E5M2:
    case TorchDType::QInt8:
    case TorchDType::QUInt8:
    case TorchDType::Untyped: return 1;
  }
  return 1;
}

std::optional<DType> candle_dtype(TorchDType t) {
  switch (t) {
    case TorchDType::Float64: return DType::F64;
    case TorchDType::Float32: return DType::F32;
    case TorchDType::Float16: return DType::F16;
    case TorchDType::BFloat16: return DType::BF16;
    case TorchDType::Int64: return DType::I64;
    case TorchDType::Int32: return DType::I32;
    case TorchDType::Int16: return DType::I16;
    case TorchDType::Int8: return DType::I16;
    case TorchDType::UInt8: return DType::U8;
    case TorchDType::Bool: return DType::U8;
    case TorchDType::UInt16: return DType::U32;
    case TorchDType::Float8E4M3: return DType::F8E4M3;
    default: return std::nullopt;
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::BigInt: return "int";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Set: return "set";
    case Kind::Global: return "global";
    case Kind::StorageType: return "storage type";
    case Kind::DTypeObj: return "dtype";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

Tree unpickle(std::span<const std::byte> data, PidFormat pids, const std::string& label) {
  return Unpickler(data, pids, label).run();
}

std::optional<Ref> dict_lookup(const Tree& tree, const Ref& dict, const std::string& key) {
  if (dict.kind != Kind::Dict) return std::nullopt;
  const auto& items = tree.obj(dict).items;
  std::optional<Ref> found;
  for (size_t i = 0; i + 1 < items.size(); i += 2)
    if (items[i].kind == Kind::Str && tree.obj(items[i]).text == key) found = items[i + 1];
  return found;
}

std::vector<NamedTensor> collect_tensors(const Tree& tree, const Ref& root, const std::string& label) {
  auto fail = [&](const std::string& msg) { throw Error(ErrorKind::Parse, label + ": " + msg); };
  std::vector<NamedTensor> out;
  std::unordered_map<std::string, size_t> position;
  size_t name_bytes = 0, emitted = 0;
  const size_t max_emitted = kMaxNamesPerTensor * tree.tensors.size() + 4096;
  auto emit = [&](const std::string& name, const Ref& t) {
    uint32_t idx = tree.obj(t).aux;
    if (++emitted > max_emitted) {
      fail("the pickled object lists the same tensors more than " + std::to_string(max_emitted) +
           " times (shared containers)");
    }
    auto [it, inserted] = position.try_emplace(name, out.size());
    if (inserted) {
      name_bytes += 2 * name.size();
      if (name_bytes > kMaxNameBytes) fail("the tensor names take more than 256 MiB");
      out.push_back({name, idx});
    } else {
      out[it->second].tensor = idx;
    }
  };
  auto is_container = [](Kind k) { return k == Kind::Dict || k == Kind::List || k == Kind::Tuple; };
  if (root.kind == Kind::Tensor) {
    emit("", root);
    return out;
  }
  if (!is_container(root.kind)) return out;

  struct Frame {
    Ref container;
    size_t next = 0;
    size_t prefix_len = 0;  // of `name` when entering the container
  };
  std::vector<Frame> frames{{root, 0, 0}};
  std::string name;
  size_t steps = 0;
  while (!frames.empty()) {
    Frame& f = frames.back();
    const Object& o = tree.obj(f.container);
    const bool dict = o.kind == Kind::Dict;
    const size_t stride = dict ? 2 : 1;
    if (f.next + stride > o.items.size()) {
      frames.pop_back();
      continue;
    }
    if (++steps > kMaxSteps) fail("walking the pickled object takes more than 2^22 steps");
    const size_t at = f.next;
    f.next += stride;
    const Ref value = dict ? o.items[at + 1] : o.items[at];
    if (value.kind != Kind::Tensor && !is_container(value.kind)) continue;
    name.resize(f.prefix_len);
    if (dict) {
      const Ref& key = o.items[at];
      if (key.kind == Kind::Str)
        name += tree.obj(key).text;
      else if (key.kind == Kind::Int)
        name += std::to_string(key.i);
      else
        continue;  // keys that cannot be part of a name
    } else {
      name += std::to_string(at);
    }
    if (name.size() > kMaxNameLen) fail("a tensor name is longer than 64 KiB");
    if (value.kind == Kind::Tensor) {
      emit(name, value);
      continue;
    }
    if (frames.size() >= kMaxDepth)
      fail("the pickled object nests deeper than " + std::to_string(kMaxDepth) + " levels (or is cyclic)");
    name += '.';
    frames.push_back({value, 0, name.size()});  // invalidates f
  }
  return out;
}

}  // namespace candle::pickle::detail
