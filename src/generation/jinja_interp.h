#pragma once
// The tree-walking interpreter of the Jinja subset (shared by jinja_interp.cpp, the statements and
// operators, and jinja_builtins.cpp, the filters, tests and methods).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja.h"

namespace candle::generation::jinja {

// A scope: a for loop, a macro call or the globals. Lookups walk to the parent.
struct Scope {
  explicit Scope(Scope* p) : parent(p) {}
  Scope* parent;
  std::unordered_map<std::string, Value> vars;
  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

struct BreakSignal {};
struct ContinueSignal {};

class Interp {
 public:
  explicit Interp(const Program& p) : prog_(p) {}
  // Empties every namespace this render made that is still alive: a namespace is the one value a
  // template can change, so `{% set ns.self = ns %}` (or a `loop` stored in it whose items hold it)
  // is the one way to a reference cycle, which would leak.
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // namespace(): a new namespace, remembered for the destructor
  Value new_namespace();

  std::string run(const Value& context);

  // statements append to `out`
  void exec(const Node& n, Scope& s, std::string& out);
  void exec_block(const std::vector<NodePtr>& body, Scope& s, std::string& out);
  Value eval(const Node& n, Scope& s);

  // builtins (jinja_builtins.cpp)
  Value apply_filter(const Value& operand, const Node& filter, Scope& s);
  bool run_test(const std::string& name, const Value& operand, const Value* arg, const Node& at);
  Value member_builtin(const Value& object, const std::string& name, const Node& at);
  Value call_macro(const Node& macro, Args& args, Scope& caller_scope, const std::string& display);

  Args eval_args(const std::vector<NodePtr>& args, Scope& s);
  [[noreturn]] void fail(const Node& at, const std::string& msg) const;
  // one unit of work, plus 1 per 64 bytes of values built since the last call (and, through
  // `units`, of values scanned); throws once the budget is spent
  void step(uint64_t units = 1) {
    const uint64_t built = work_counter();
    steps_ += units + (built - built_seen_) / 64;
    built_seen_ = built;
    if (steps_ > kMaxSteps) fail_budget();
  }
  void check_output(const std::string& out) const;

  int depth_ = 0;

 private:
  [[noreturn]] void fail_budget() const;
  Value eval_binary(const Node& n, Scope& s);
  Value eval_member(const Node& n, Scope& s);
  Value eval_call(const Node& n, Scope& s);
  void exec_for(const Node& n, Scope& s, std::string& out);
  void exec_set(const Node& n, Scope& s);

  const Program& prog_;
  std::vector<std::weak_ptr<Object>> namespaces_;
  uint64_t steps_ = 0;
  uint64_t built_seen_ = work_counter();
};

// JavaScript's loose == between two values, as `==` and `!=` use it.
bool loose_equal(const Value& a, const Value& b);
// JavaScript's === as `in` over a list uses it.
bool strict_equal(const Value& a, const Value& b);
// The text `~` and `+` concatenate (JavaScript's String(value)).
std::string primitive_string(const Value& v, const Interp& in, const Node& at);

}  // namespace candle::generation::jinja
