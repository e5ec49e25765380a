// The renderer: walks a parsed template with jinja2's runtime semantics (scopes, loops, macros, undefined values,
// attribute and item lookup) and the globals transformers adds (raise_exception, strftime_now).
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "chat/jinja_ast.h"

namespace wgtrain::jinja {

// A frame of variables. A for-loop iteration, a macro call and a with/set block get their own (assignments there
// do not leak out, as in jinja2); if-branches do not.
struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

struct Environment {
  std::function<std::tm()> now;  // the local time strftime_now formats
};

class Renderer {
 public:
  explicit Renderer(const Environment& env) : env_(env) {}

  // jinja2's Template.render(**context). Errors are wgtrain::Error with the template line; raise_exception(msg) is
  // an ArgumentError whose message is msg.
  std::string render(const Program& program, const DictData& context);

  // Used by the built-in filters, tests and functions too.
  Value eval(const Expr& e);
  Value call(const Value& callee, Args& args);
  Value getattr(const Value& obj, const std::string& name);  // obj.name: attribute, else item
  Value getitem(const Value& obj, const Value& key);         // obj[key]: item, else attribute
  Value call_filter(const std::string& name, const Value& v, Args& args);
  bool call_test(const std::string& name, const Value& v, Args& args);
  const Environment& env() const { return env_; }

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, std::string& out);
  Flow exec_for(const Stmt& s, std::string& out);
  void assign(const Target& t, const Value& v);
  Value lookup(const std::string& name) const;
  Value slice(const Value& obj, const Expr& s);
  Value make_macro(const Stmt& def, const std::vector<std::pair<std::string, ExprPtr>>& params, const Body& body,
                   const std::string& name);
  void append(std::string& out, const std::string& s) const;

  const Environment& env_;
  std::shared_ptr<Scope> root_;
  std::shared_ptr<Scope> scope_;
  const Value* block_input_ = nullptr;  // the text a filter block or set block filters
  int line_ = 0;                        // of the statement or expression being evaluated, for error messages
  int call_depth_ = 0;
};

// jinja_builtins.cpp
// The methods Python's str, dict and list have (those templates use), bound to obj; nullopt when obj's type has
// no such attribute.
std::optional<Value> builtin_method(const Value& obj, const std::string& name);
// jinja2's global functions (range, dict, namespace, ...) and transformers' (raise_exception, strftime_now).
DictData builtin_globals();

}  // namespace wgtrain::jinja
