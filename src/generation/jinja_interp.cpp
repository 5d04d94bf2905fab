// The interpreter's statements, operators, calls and globals, with @huggingface/jinja's semantics:
// `set` in a loop body stays in the loop, a macro sees its caller's scope, an iteration cut short
// by `continue` or `break` contributes none of its text, `==` is JavaScript's loose equality.
#include "jinja_interp.h"

#include <cmath>
#include <ctime>

namespace candle::generation::jinja {

namespace {

struct EvalDepth {
  Interp& in;
  const Node& at;
  EvalDepth(Interp& i, const Node& n) : in(i), at(n) {
    if (++in.depth_ > kMaxEvalDepth) {
      --in.depth_;
      in.fail(at, "recursion deeper than " + std::to_string(kMaxEvalDepth) + " levels");
    }
  }
  ~EvalDepth() { --in.depth_; }
};

bool js_to_number(const std::string& text, double* out) {
  const std::string t = js_trim(text, true, true);
  if (t.empty()) {
    *out = 0;
    return true;
  }
  for (char c : t)
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) return false;
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size();
}

bool numeric_like(const Value& v) {
  return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool;
}

}  // namespace

bool loose_equal(const Value& a, const Value& b) {
  const bool an = a.kind == Kind::Undefined || a.kind == Kind::Null;
  const bool bn = b.kind == Kind::Undefined || b.kind == Kind::Null;
  if (an || bn) return an && bn;
  if (a.kind == Kind::Int && b.kind == Kind::Int) return a.i == b.i;
  if (numeric_like(a) && numeric_like(b)) return a.as_double() == b.as_double();
  if (a.kind == Kind::String && b.kind == Kind::String) return *a.s == *b.s;
  if (a.kind == Kind::String && numeric_like(b)) {
    double x;
    return js_to_number(*a.s, &x) && x == b.as_double();
  }
  if (b.kind == Kind::String && numeric_like(a)) return loose_equal(b, a);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Array: return a.arr == b.arr;
    case Kind::Object:
    case Kind::Namespace: return a.obj == b.obj;
    case Kind::Function: return a.fn == b.fn;
    default: return false;
  }
}

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::Null: return true;
    case Kind::Bool: return a.b == b.b;
    case Kind::String: return *a.s == *b.s;
    case Kind::Array: return a.arr == b.arr;
    case Kind::Object:
    case Kind::Namespace: return a.obj == b.obj;
    case Kind::Function: return a.fn == b.fn;
    default: return false;
  }
}

std::string primitive_string(const Value& v, const Interp& in, const Node& at) {
  switch (v.kind) {
    case Kind::String: return *v.s;
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return js_number_string(v.f);
    case Kind::Bool: return v.b ? "true" : "false";
    default: in.fail(at, std::string("cannot concatenate a ") + kind_name(v.kind) + " as text");
  }
}

void Interp::fail(const Node& at, const std::string& msg) const {
  throw Error(ErrorKind::InvalidArgument, "chat template: " + msg + " at " + prog_.where(at.pos));
}

void Interp::fail_budget() const {
  throw Error(ErrorKind::InvalidArgument, "chat template: rendering took more than " +
                                              std::to_string(kMaxSteps) +
                                              " steps (a loop too long for a chat template)");
}

void Interp::check_output(const std::string& out) const {
  if (out.size() > kMaxStringBytes)
    throw Error(ErrorKind::InvalidArgument,
                "chat template: output grew past " + std::to_string(kMaxStringBytes >> 20) + " MiB");
}

// ---- statements -------------------------------------------------------------------------------------
void Interp::exec_block(const std::vector<NodePtr>& body, Scope& s, std::string& out) {
  for (const auto& st : body) exec(*st, s, out);
}

void Interp::exec(const Node& n, Scope& s, std::string& out) {
  EvalDepth guard(*this, n);
  step();
  switch (n.kind) {
    case NodeKind::Program: exec_block(n.list, s, out); return;
    case NodeKind::Text:
      out += n.str;
      step(n.str.size() / 64);
      check_output(out);
      return;
    case NodeKind::Output: {
      const Value v = eval(*n.a, s);
      if (v.kind == Kind::Function) fail(n, "cannot print a function");
      const std::string text = to_output_string(v);
      out += text;
      step(text.size() / 64);
      check_output(out);
      return;
    }
    case NodeKind::If: exec_block(eval(*n.a, s).truthy() ? n.list : n.list2, s, out); return;
    case NodeKind::For: exec_for(n, s, out); return;
    case NodeKind::Set: exec_set(n, s); return;
    case NodeKind::Macro: {
      const Node* macro = &n;
      s.vars[n.str] = Value::function([this, macro](Args& args, Scope& caller) {
        return call_macro(*macro, args, caller, "'" + macro->str + "'");
      });
      return;
    }
    case NodeKind::CallBlock: {
      // caller() runs in the scope it is called from (the macro's, whose chain holds this one):
      // a pointer to this scope could outlive it if the macro stored `caller` in a namespace
      const Node* block = &n;
      Value caller = Value::function(
          [this, block](Args& args, Scope& dynamic) { return call_macro(*block, args, dynamic, "caller"); });
      Args args = eval_args(n.a->list, s);
      const Value fn = eval(*n.a->a, s);
      if (fn.kind != Kind::Function) fail(n, std::string("cannot call a ") + kind_name(fn.kind));
      Scope with_caller(&s);
      with_caller.vars["caller"] = caller;
      const Value v = (*fn.fn)(args, with_caller);
      out += to_output_string(v);
      check_output(out);
      return;
    }
    case NodeKind::FilterBlock: {
      std::string body;
      exec_block(n.list2, s, body);
      const Value v = apply_filter(Value::string(std::move(body)), *n.a, s);
      out += to_output_string(v);
      check_output(out);
      return;
    }
    case NodeKind::Break: throw BreakSignal{};
    case NodeKind::Continue: throw ContinueSignal{};
    case NodeKind::Comment: return;
    default: fail(n, "an expression where a statement was expected");
  }
}

void Interp::exec_set(const Node& n, Scope& s) {
  Value rhs;
  if (n.b) {
    rhs = eval(*n.b, s);
  } else {
    std::string body;
    exec_block(n.list2, s, body);
    rhs = Value::string(std::move(body));
  }
  const Node& lhs = *n.a;
  if (lhs.kind == NodeKind::Ident) {
    s.vars[lhs.str] = std::move(rhs);
  } else if (lhs.kind == NodeKind::TupleLit) {
    if (rhs.kind != Kind::Array) fail(n, std::string("cannot unpack a ") + kind_name(rhs.kind) + " in set");
    if (rhs.arr->size() != lhs.list.size())
      fail(n, lhs.list.size() > rhs.arr->size() ? "too few items to unpack in set"
                                                : "too many items to unpack in set");
    for (size_t k = 0; k < lhs.list.size(); ++k) {
      if (lhs.list[k]->kind != NodeKind::Ident) fail(n, "cannot unpack to a non-identifier in set");
      s.vars[lhs.list[k]->str] = (*rhs.arr)[k];
    }
  } else if (lhs.kind == NodeKind::Member) {
    const Value object = eval(*lhs.a, s);
    if (object.kind != Kind::Namespace) fail(n, "cannot assign an attribute of a non-namespace object");
    if (lhs.flag || lhs.b->kind != NodeKind::Ident)
      fail(n, "cannot assign to a member with a non-identifier name");
    object.obj->set(lhs.b->str, std::move(rhs));
  } else {
    fail(n, "invalid left side of an assignment");
  }
}

void Interp::exec_for(const Node& n, Scope& s, std::string& out) {
  Scope scope(&s);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  if (iterable.kind == Kind::Object) {
    Array keys;
    for (const auto& e : iterable.obj->entries) keys.push_back(Value::string(e.first));
    iterable = Value::array(std::move(keys));
  }
  if (iterable.kind != Kind::Array)
    fail(n, std::string("expected a list or a dict to loop over, got a ") + kind_name(iterable.kind));
  const Node& var = *n.a;
  auto bind = [&](Scope& target, const Value& item) {
    if (var.kind == NodeKind::Ident) {
      target.vars[var.str] = item;
      return;
    }
    if (item.kind != Kind::Array) fail(n, std::string("cannot unpack a ") + kind_name(item.kind));
    if (item.arr->size() != var.list.size())
      fail(n, var.list.size() > item.arr->size() ? "too few items to unpack" : "too many items to unpack");
    for (size_t k = 0; k < var.list.size(); ++k) {
      if (var.list[k]->kind != NodeKind::Ident) fail(n, "cannot unpack to a non-identifier");
      target.vars[var.list[k]->str] = (*item.arr)[k];
    }
  };
  const std::shared_ptr<Array> source = iterable.arr;  // keeps the items alive if the body rebinds
  std::vector<const Value*> items;
  for (const Value& item : *source) {
    step();
    if (test) {
      Scope loop_scope(&scope);
      bind(loop_scope, item);
      if (!eval(*test, loop_scope).truthy()) continue;
    }
    items.push_back(&item);
  }
  bool no_iteration = true;
  const size_t len = items.size();
  for (size_t k = 0; k < len; ++k) {
    step(4);  // the loop object and the bindings
    Value loop = Value::object();
    loop.obj->entries.reserve(9);
    const auto ik = static_cast<int64_t>(k), il = static_cast<int64_t>(len);
    loop.obj->set("index", Value::integer(ik + 1));
    loop.obj->set("index0", Value::integer(ik));
    loop.obj->set("revindex", Value::integer(il - ik));
    loop.obj->set("revindex0", Value::integer(il - ik - 1));
    loop.obj->set("first", Value::boolean(k == 0));
    loop.obj->set("last", Value::boolean(k + 1 == len));
    loop.obj->set("length", Value::integer(il));
    loop.obj->set("previtem", k > 0 ? *items[k - 1] : Value::undefined());
    loop.obj->set("nextitem", k + 1 < len ? *items[k + 1] : Value::undefined());
    scope.vars["loop"] = std::move(loop);
    bind(scope, *items[k]);
    std::string body;
    try {
      exec_block(n.list, scope, body);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    out += body;
    check_output(out);
    no_iteration = false;
  }
  if (no_iteration) exec_block(n.list2, scope, out);
}

Value Interp::call_macro(const Node& macro, Args& args, Scope& caller_scope, const std::string& display) {
  EvalDepth guard(*this, macro);
  Scope scope(&caller_scope);
  // a CallBlock keeps its caller parameters in `list`, a Macro its parameters in `list`
  const std::vector<NodePtr>& params = macro.list;
  std::vector<std::pair<std::string, Value>> kw = args.kw;
  std::vector<const Node*> pending;
  for (size_t k = 0; k < params.size(); ++k) {
    const Node& p = *params[k];
    const std::string& name = p.str;
    Value v;
    bool have = false;
    if (k < args.pos.size()) {
      v = args.pos[k];
      have = true;
    } else {
      for (auto it = kw.begin(); it != kw.end(); ++it) {
        if (it->first == name) {
          v = it->second;
          kw.erase(it);
          have = true;
          break;
        }
      }
    }
    if (!have && p.kind == NodeKind::KwArg) pending.push_back(&p);
    scope.vars[name] = v;
  }
  // extra arguments are visible as kwargs / varargs (Jinja's special macro variables)
  Value kwargs = Value::object();
  for (auto& [k, v] : kw) kwargs.obj->set(k, v);
  scope.vars["kwargs"] = kwargs;
  Array varargs;
  for (size_t k = params.size(); k < args.pos.size(); ++k) varargs.push_back(args.pos[k]);
  scope.vars["varargs"] = Value::array(std::move(varargs));
  for (const Node* p : pending) scope.vars[p->str] = eval(*p->a, scope);
  (void)display;
  std::string out;
  exec_block(macro.list2, scope, out);
  return Value::string(std::move(out));
}

// ---- expressions ------------------------------------------------------------------------------------
Args Interp::eval_args(const std::vector<NodePtr>& args, Scope& s) {
  Args out;
  for (const auto& a : args) {
    if (a->kind == NodeKind::Spread) {
      const Value v = eval(*a->a, s);
      if (v.kind != Kind::Array) fail(*a, std::string("cannot unpack a ") + kind_name(v.kind));
      for (const Value& x : *v.arr) out.pos.push_back(x);
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      out.pos.push_back(eval(*a, s));
    }
  }
  auto add_kw = [&](const Node& at, const std::string& k, Value v) {
    if (out.kwarg(k)) fail(at, "got multiple values for the keyword argument " + short_excerpt(k));
    out.kw.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::KwArg) {
      add_kw(*a, a->str, eval(*a->a, s));
    } else if (a->kind == NodeKind::KwSpread) {
      const Value v = eval(*a->a, s);
      if (v.kind != Kind::Object) fail(*a, "the argument after ** must be a dict");
      for (const auto& [k, x] : v.obj->entries) add_kw(*a, k, x);
    }
  }
  if (out.pos.size() > kMaxArrayItems)
    fail(args.front() ? *args.front() : *args.back(), "too many arguments");
  return out;
}

Value Interp::eval(const Node& n, Scope& s) {
  EvalDepth guard(*this, n);
  step();
  switch (n.kind) {
    case NodeKind::Int: return Value::integer(n.ival);
    case NodeKind::Float: return Value::number(n.fval);
    case NodeKind::Str: return Value::string(n.str);
    case NodeKind::Ident: {
      const Value* v = s.lookup(n.str);
      return v ? *v : Value::undefined();
    }
    case NodeKind::ArrayLit:
    case NodeKind::TupleLit: {
      Array a;
      a.reserve(n.list.size());
      for (const auto& x : n.list) a.push_back(eval(*x, s));
      return Value::array(std::move(a));
    }
    case NodeKind::ObjectLit: {
      Value o = Value::object();
      for (size_t k = 0; k < n.list.size(); ++k) {
        const Value key = eval(*n.list[k], s);
        if (key.kind != Kind::String)
          fail(*n.list[k], std::string("dict keys must be strings, got a ") + kind_name(key.kind));
        o.obj->set(*key.s, eval(*n.list2[k], s));
      }
      return o;
    }
    case NodeKind::Member: return eval_member(n, s);
    case NodeKind::Call: return eval_call(n, s);
    case NodeKind::Unary: {
      const Value v = eval(*n.a, s);
      if (n.str == "not") return Value::boolean(!v.truthy());
      const bool neg = n.str == "-";
      if (v.kind == Kind::Float) return Value::number(neg ? -v.f : v.f);
      if (v.kind == Kind::Int || v.kind == Kind::Bool) {
        const int64_t x = v.kind == Kind::Bool ? (v.b ? 1 : 0) : v.i;
        if (neg && x == INT64_MIN) fail(n, "integer overflow");
        return Value::integer(neg ? -x : x);
      }
      fail(n, "unary " + n.str + " of a " + kind_name(v.kind));
    }
    case NodeKind::Binary: return eval_binary(n, s);
    case NodeKind::Filter: return apply_filter(eval(*n.a, s), *n.b, s);
    case NodeKind::Test: {
      const bool r = run_test(n.str, eval(*n.a, s), nullptr, n);
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::Select: return eval(*n.b, s).truthy() ? eval(*n.a, s) : Value::undefined();
    case NodeKind::Ternary: return eval(*n.a, s).truthy() ? eval(*n.b, s) : eval(*n.c, s);
    default: fail(n, "a statement or argument where an expression was expected");
  }
}

Value Interp::eval_call(const Node& n, Scope& s) {
  Args args = eval_args(n.list, s);
  const Value fn = eval(*n.a, s);
  if (fn.kind != Kind::Function) fail(n, std::string("cannot call a ") + kind_name(fn.kind));
  return (*fn.fn)(args, s);
}

Value Interp::eval_member(const Node& n, Scope& s) {
  const Value object = eval(*n.a, s);
  if (object.is_string()) step(object.s->size() / 16);  // indexing and slicing walk the code points
  Value prop;
  if (n.flag && n.b->kind == NodeKind::Slice) {
    const Node& sl = *n.b;
    if (object.kind != Kind::Array && object.kind != Kind::String)
      fail(n, "only lists and strings can be sliced");
    int64_t part[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    const Node* nodes[3] = {sl.a.get(), sl.b.get(), sl.c.get()};
    for (int k = 0; k < 3; ++k) {
      if (!nodes[k]) continue;
      const Value v = eval(*nodes[k], s);
      if (v.kind == Kind::Undefined) continue;
      if (v.kind != Kind::Int) fail(n, "slice bounds must be integers");
      part[k] = v.i;
      given[k] = true;
    }
    std::vector<uint32_t> off;
    if (object.kind == Kind::String) off = code_point_offsets(*object.s);
    const auto len = static_cast<int64_t>(object.kind == Kind::String ? off.size() - 1 : object.arr->size());
    const int64_t step_by = part[2];
    if (step_by == 0) fail(n, "slice step cannot be zero");
    int64_t start, stop;
    if (step_by > 0) {
      start = !given[0] ? 0 : part[0] < 0 ? std::max<int64_t>(len + part[0], 0) : std::min(part[0], len);
      stop = !given[1] ? len : part[1] < 0 ? std::max<int64_t>(len + part[1], 0) : std::min(part[1], len);
    } else {
      start = !given[0]     ? len - 1
              : part[0] < 0 ? std::max<int64_t>(len + part[0], -1)
                            : std::min(part[0], len - 1);
      stop = !given[1]      ? -1
             : part[1] < -1 ? std::max<int64_t>(len + part[1], -1)
                            : std::min(part[1], len - 1);
    }
    const int64_t dir = step_by > 0 ? 1 : -1;
    if (object.kind == Kind::String) {
      std::string out;
      for (int64_t i = start; dir * i < dir * stop; i += step_by) {
        const auto k = static_cast<size_t>(i);
        out.append(*object.s, off[k], off[k + 1] - off[k]);
      }
      return Value::string(std::move(out));
    }
    Array out;
    for (int64_t i = start; dir * i < dir * stop; i += step_by)
      out.push_back((*object.arr)[static_cast<size_t>(i)]);
    return Value::array(std::move(out));
  }
  if (n.flag)
    prop = eval(*n.b, s);
  else if (n.b->kind == NodeKind::Int)
    prop = Value::integer(n.b->ival);
  else
    prop = Value::string(n.b->str);

  if (object.kind == Kind::Object || object.kind == Kind::Namespace) {
    if (prop.kind != Kind::String)
      fail(n, std::string("cannot look up a dict with a ") + kind_name(prop.kind));
    if (const Value* v = object.obj->find(*prop.s)) return *v;
    if (object.kind == Kind::Object) return member_builtin(object, *prop.s, n);
    return Value::undefined();
  }
  if (object.kind == Kind::Array || object.kind == Kind::String) {
    if (prop.kind == Kind::Int) {
      if (object.kind == Kind::Array) {
        const auto len = static_cast<int64_t>(object.arr->size());
        const int64_t i = prop.i < 0 ? prop.i + len : prop.i;
        return i >= 0 && i < len ? (*object.arr)[static_cast<size_t>(i)] : Value::undefined();
      }
      const auto off = code_point_offsets(*object.s);
      const auto len = static_cast<int64_t>(off.size() - 1);
      const int64_t i = prop.i < 0 ? prop.i + len : prop.i;
      if (i < 0 || i >= len) return Value::undefined();
      const auto k = static_cast<size_t>(i);
      return Value::string(object.s->substr(off[k], off[k + 1] - off[k]));
    }
    if (prop.kind == Kind::String) return member_builtin(object, *prop.s, n);
    fail(n, std::string("cannot index with a ") + kind_name(prop.kind));
  }
  if (prop.kind != Kind::String) fail(n, std::string("cannot index a ") + kind_name(object.kind));
  return Value::undefined();
}

Value Interp::eval_binary(const Node& n, Scope& s) {
  const std::string& op = n.str;
  const Value left = eval(*n.a, s);
  if (op == "and") return left.truthy() ? eval(*n.b, s) : left;
  if (op == "or") return left.truthy() ? left : eval(*n.b, s);
  const Value right = eval(*n.b, s);
  if (left.is_string() && right.is_string()) step(std::min(left.s->size(), right.s->size()) / 64);
  if (op == "==") return Value::boolean(loose_equal(left, right));
  if (op == "!=") return Value::boolean(!loose_equal(left, right));
  const bool is_in = op == "in" || op == "not in";
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && is_in) return Value::boolean(op == "not in");
    fail(n, "cannot apply " + op + " to an undefined value");
  }
  if (left.is_null() || right.is_null()) fail(n, "cannot apply " + op + " to none");
  if (op == "~") {
    std::string t = primitive_string(left, *this, n) + primitive_string(right, *this, n);
    step(t.size() / 64);
    return Value::string(std::move(t));
  }
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = left.as_double(), b = right.as_double();
    if (a == 0 && b < 0) fail(n, "0.0 cannot be raised to a negative power");
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail(n, "the power is not a finite number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    if (is_float) return Value::number(r);
    if (!(std::fabs(r) < 9.2e18)) return Value::number(r);
    return Value::integer(static_cast<int64_t>(r));
  }
  if (left.is_numeric() && right.is_numeric()) {
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    if (!is_float) {
      const int64_t a = left.i, b = right.i;
      int64_t r = 0;
      if (op == "+" || op == "-" || op == "*") {
        const bool overflow = op == "+"   ? __builtin_add_overflow(a, b, &r)
                              : op == "-" ? __builtin_sub_overflow(a, b, &r)
                                          : __builtin_mul_overflow(a, b, &r);
        // past int64, a JavaScript number: a double
        if (overflow)
          return Value::number(op == "+"   ? static_cast<double>(a) + static_cast<double>(b)
                               : op == "-" ? static_cast<double>(a) - static_cast<double>(b)
                                           : static_cast<double>(a) * static_cast<double>(b));
        return Value::integer(r);
      }
      if (op == "//" || op == "%") {
        if (b == 0) fail(n, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) fail(n, "integer overflow");
        if (op == "%") return Value::integer(a % b);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return Value::integer(q);
      }
      if (op == "<") return Value::boolean(a < b);
      if (op == ">") return Value::boolean(a > b);
      if (op == "<=") return Value::boolean(a <= b);
      if (op == ">=") return Value::boolean(a >= b);
    }
    const double a = left.as_double(), b = right.as_double();
    if (op == "+") return Value::number(a + b);
    if (op == "-") return Value::number(a - b);
    if (op == "*") return Value::number(a * b);
    if (op == "/") return Value::number(a / b);
    if (op == "//") return Value::number(std::floor(a / b));
    if (op == "%") return Value::number(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      if (left.arr->size() + right.arr->size() > kMaxArrayItems) fail(n, "a list grew too large");
      Array out = *left.arr;
      out.insert(out.end(), right.arr->begin(), right.arr->end());
      step(out.size() / 16);
      return Value::array(std::move(out));
    }
  } else if (right.is_array()) {
    bool member = false;
    for (const Value& x : *right.arr) {
      if (x.is_string() && left.is_string() && x.s->size() == left.s->size()) step(x.s->size() / 64);
      if (strict_equal(x, left)) {
        member = true;
        break;
      }
    }
    step(right.arr->size() / 16);
    if (op == "in") return Value::boolean(member);
    if (op == "not in") return Value::boolean(!member);
  }
  if ((left.is_string() || right.is_string()) && op == "+") {
    std::string t = primitive_string(left, *this, n) + primitive_string(right, *this, n);
    step(t.size() / 64);
    return Value::string(std::move(t));
  }
  if (left.is_string() && right.is_string() && is_in) {
    const bool found = right.s->find(*left.s) != std::string::npos;
    step(right.s->size() / 64);
    return Value::boolean(op == "in" ? found : !found);
  }
  if (left.is_string() && right.is_object() && is_in) {
    const bool found = right.obj->find(*left.s) != nullptr;
    return Value::boolean(op == "in" ? found : !found);
  }
  fail(n,
       "unknown operator " + op + " between a " + kind_name(left.kind) + " and a " + kind_name(right.kind));
}

// ---- globals ----------------------------------------------------------------------------------------
namespace {

Value range_fn(Args& a, const Interp& in, const Node& at) {
  int64_t v[3] = {0, 0, 1};
  if (a.pos.empty() || a.pos.size() > 3) in.fail(at, "range() takes 1 to 3 arguments");
  for (size_t k = 0; k < a.pos.size(); ++k) {
    if (a.pos[k].kind != Kind::Int) in.fail(at, "range() arguments must be integers");
    v[k] = a.pos[k].i;
  }
  int64_t start = 0, stop = v[0], step_by = 1;
  if (a.pos.size() >= 2) start = v[0], stop = v[1];
  if (a.pos.size() == 3) step_by = v[2];
  if (step_by == 0) in.fail(at, "range() step must not be zero");
  // the count first: range(10**12) is refused, not materialized
  const long double span =
      step_by > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  const long double count = span <= 0 ? 0 : std::ceil(span / std::fabs(static_cast<long double>(step_by)));
  if (count > static_cast<long double>(kMaxArrayItems))
    in.fail(at, "range() of " + std::to_string(static_cast<uint64_t>(std::min<long double>(count, 1e19L))) +
                    " items, more than the " + std::to_string(kMaxArrayItems) + " allowed");
  Array out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k)
    out.push_back(Value::integer(start + k * step_by));
  return Value::array(std::move(out));
}

Value namespace_fn(Args& a, Interp& in, const Node& at) {
  Value ns = in.new_namespace();
  if (a.pos.size() > 1) in.fail(at, "namespace() takes at most 1 positional argument");
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.kind == Kind::Object) {
      for (const auto& [k, v] : src.obj->entries) ns.obj->set(k, v);
    } else if (src.kind == Kind::Array) {
      for (const Value& pair : *src.arr) {
        if (pair.kind != Kind::Array || pair.arr->size() != 2 || (*pair.arr)[0].kind != Kind::String)
          in.fail(at, "namespace() expects a dict or a list of [key, value] pairs");
        ns.obj->set(*(*pair.arr)[0].s, (*pair.arr)[1]);
      }
    } else {
      in.fail(at, std::string("namespace() cannot take a ") + kind_name(src.kind));
    }
  }
  for (const auto& [k, v] : a.kw) ns.obj->set(k, v);
  return ns;
}

Value strftime_now_fn(Args& a, const Interp& in, const Node& at) {
  if (a.pos.empty() || a.pos[0].kind != Kind::String) in.fail(at, "strftime_now() takes a format string");
  static const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  static const char* kLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                "July",    "August",   "September", "October", "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  const std::string& f = *a.pos[0].s;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out.push_back(f[i]);
      continue;
    }
    const char c = f[i + 1];
    std::string rep;
    switch (c) {
      case 'Y': rep = std::to_string(tm.tm_year + 1900); break;
      case 'm': rep = pad2(tm.tm_mon + 1); break;
      case 'd': rep = pad2(tm.tm_mday); break;
      case 'b': rep = kShort[tm.tm_mon]; break;
      case 'B': rep = kLong[tm.tm_mon]; break;
      case 'H': rep = pad2(tm.tm_hour); break;
      case 'M': rep = pad2(tm.tm_min); break;
      case '%': rep = "%"; break;
      default: out.push_back('%'); continue;
    }
    out += rep;
    ++i;
  }
  return Value::string(std::move(out));
}

}  // namespace

Value Interp::new_namespace() {
  if (namespaces_.size() == namespaces_.capacity() && namespaces_.size() >= 64)  // forget the freed ones
    std::erase_if(namespaces_, [](const std::weak_ptr<Object>& w) { return w.expired(); });
  Value ns = Value::ns();
  namespaces_.push_back(ns.obj);
  return ns;
}

Interp::~Interp() {
  for (const auto& w : namespaces_) {
    if (const auto p = w.lock()) {
      const auto entries = std::move(p->entries);  // leaves p->entries empty
      p->index.clear();
    }
  }
}

std::string Interp::run(const Value& context) {
  Scope globals(nullptr);
  const Node& root = *prog_.root;
  globals.vars["true"] = globals.vars["True"] = Value::boolean(true);
  globals.vars["false"] = globals.vars["False"] = Value::boolean(false);
  globals.vars["none"] = globals.vars["None"] = Value::null();
  globals.vars["raise_exception"] = Value::function([](Args& a, Scope&) -> Value {
    const std::string msg = a.pos.empty() ? std::string() : to_output_string(a.pos[0]);
    throw Error(ErrorKind::InvalidArgument, "chat template raised an exception: " + short_excerpt(msg, 200));
  });
  globals.vars["range"] =
      Value::function([this, &root](Args& a, Scope&) { return range_fn(a, *this, root); });
  globals.vars["namespace"] =
      Value::function([this, &root](Args& a, Scope&) { return namespace_fn(a, *this, root); });
  globals.vars["strftime_now"] =
      Value::function([this, &root](Args& a, Scope&) { return strftime_now_fn(a, *this, root); });
  if (context.kind == Kind::Object) {
    for (const auto& [k, v] : context.obj->entries) {
      if (globals.vars.count(k))
        throw Error(ErrorKind::InvalidArgument, "chat template: the context redefines " + short_excerpt(k));
      globals.vars[k] = v;
    }
  }
  std::string out;
  try {
    exec(root, globals, out);
  } catch (const BreakSignal&) {
    fail(root, "'break' outside a loop");
  } catch (const ContinueSignal&) {
    fail(root, "'continue' outside a loop");
  }
  return out;
}

std::string render(const Program& program, const Value& context) { return Interp(program).run(context); }

}  // namespace candle::generation::jinja
