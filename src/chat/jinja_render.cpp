#include "chat/jinja_render.h"

#include <utility>

#include "wgtrain/error.h"

namespace wgtrain::jinja {

namespace {

constexpr size_t kMaxOutput = size_t{1} << 28;  // 256 MiB of rendered text is a runaway template, not a chat
constexpr int kMaxCallDepth = 100;               // macro recursion

// Python's dict attributes: a.b on a dict finds these before its keys (jinja2 tries getattr, then the item).
bool is_dict_attribute(const std::string& name) {
  static const char* const names[] = {"clear", "copy",   "fromkeys", "get",    "items",
                                      "keys",  "pop",    "popitem",  "setdefault", "update", "values"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

bool is_dunder(const std::string& name) {
  return name.size() > 4 && name.rfind("__", 0) == 0 && name.compare(name.size() - 2, 2, "__") == 0;
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

// Python's slice.indices(): the positions a[start:stop:step] takes from a sequence of n.
std::vector<size_t> slice_positions(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                    int64_t step) {
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    return x < lower ? lower : x > upper ? upper : x;
  };
  const int64_t b = adjust(start, step > 0 ? lower : upper), e = adjust(stop, step > 0 ? upper : lower);
  std::vector<size_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

std::string Renderer::render(const Program& program, const DictData& context) {
  root_ = std::make_shared<Scope>();
  const DictData globals = builtin_globals();
  for (const auto& [k, v] : globals.entries) root_->vars[k] = v;
  for (const auto& [k, v] : context.entries) root_->vars[k] = v;
  scope_ = root_;
  std::string out;
  try {
    exec(program.body, out);
  } catch (const RenderError& e) {
    scope_.reset();
    root_.reset();
    throw Error("chat template: line " + std::to_string(line_) + ": " + e.what());
  } catch (const Error&) {
    throw;  // raise_exception's ArgumentError, as it is
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {  // a library limit (length_error, out_of_range): still the template's error
    throw Error("chat template: line " + std::to_string(line_) + ": " + e.what());
  }
  // Macros hold their scope weakly, so dropping the root frees everything.
  scope_.reset();
  root_.reset();
  return out;
}

void Renderer::append(std::string& out, const std::string& s) const {
  if (out.size() + s.size() > kMaxOutput) throw RenderError("rendered text exceeds 256 MiB");
  out += s;
}

Value Renderer::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

// ---- statements ---------------------------------------------------------------------------------------------------
Renderer::Flow Renderer::exec(const Body& body, std::string& out) {
  for (const auto& sp : body) {
    const Stmt& s = *sp;
    line_ = s.line;
    switch (s.kind) {
      case StmtKind::Data: append(out, s.text); break;
      case StmtKind::Output: append(out, to_str(eval(*s.expr))); break;
      case StmtKind::If: {
        const Body* chosen = &s.else_body;
        for (const auto& [test, branch] : s.branches) {
          line_ = test->line;
          if (truthy(eval(*test))) {
            chosen = &branch;
            break;
          }
        }
        if (const Flow f = exec(*chosen, out); f != Flow::Normal) return f;
        break;
      }
      case StmtKind::For:
        if (const Flow f = exec_for(s, out); f != Flow::Normal) return f;
        break;
      case StmtKind::Set: assign(s.target, eval(*s.expr)); break;
      case StmtKind::SetBlock:
      case StmtKind::FilterBlock: {
        std::string text;
        const auto saved = scope_;
        scope_ = std::make_shared<Scope>(Scope{{}, saved});
        exec(s.body, text);
        scope_ = saved;
        Value v = Value::string(std::move(text));
        if (s.expr) {
          const Value* saved_input = block_input_;
          block_input_ = &v;
          Value filtered = eval(*s.expr);
          block_input_ = saved_input;
          v = std::move(filtered);
        }
        if (s.kind == StmtKind::SetBlock) assign(s.target, v);
        else append(out, to_str(v));
        break;
      }
      case StmtKind::Macro: scope_->vars[s.name] = make_macro(s, s.params, s.body, s.name); break;
      case StmtKind::CallBlock: {
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.args[0]);
        Args args;
        for (size_t i = 1; i < call_expr.args.size(); ++i) args.pos.push_back(eval(*call_expr.args[i]));
        for (const auto& [k, e] : call_expr.kwargs) args.kw.emplace_back(k, eval(*e));
        args.kw.emplace_back("caller", make_macro(s, s.params, s.body, "caller"));
        append(out, to_str(call(callee, args)));
        break;
      }
      case StmtKind::With: {
        std::vector<Value> values;
        for (const auto& a : s.assigns) values.push_back(eval(*a.second));
        const auto saved = scope_;
        scope_ = std::make_shared<Scope>(Scope{{}, saved});
        for (size_t i = 0; i < values.size(); ++i) assign(s.assigns[i].first, values[i]);
        const Flow f = exec(s.body, out);
        scope_ = saved;
        if (f != Flow::Normal) return f;
        break;
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Scope:
        if (const Flow f = exec(s.body, out); f != Flow::Normal) return f;
        break;
    }
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s, std::string& out) {
  List items = iterate(eval(*s.expr));
  const auto outer = scope_;
  if (s.cond) {  // `for x in xs if cond`: loop.index and loop.length count what passes
    List kept;
    for (auto& item : items) {
      scope_ = std::make_shared<Scope>(Scope{{}, outer});
      assign(s.target, item);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    scope_ = outer;
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  // jinja2 marks the loop as having run only when an iteration reaches the end of the body, so `else` also runs
  // after a break in the first iteration or when every iteration continues.
  bool completed_iteration = false;
  auto last_changed = std::make_shared<std::optional<List>>();
  for (int64_t i = 0; i < n; ++i) {
    scope_ = std::make_shared<Scope>(Scope{{}, outer});
    assign(s.target, items[static_cast<size_t>(i)]);
    DictData loop;
    loop.entries.reserve(13);
    loop.entries.emplace_back("index", Value::integer(i + 1));
    loop.entries.emplace_back("index0", Value::integer(i));
    loop.entries.emplace_back("revindex", Value::integer(n - i));
    loop.entries.emplace_back("revindex0", Value::integer(n - i - 1));
    loop.entries.emplace_back("first", Value::boolean(i == 0));
    loop.entries.emplace_back("last", Value::boolean(i == n - 1));
    loop.entries.emplace_back("length", Value::integer(n));
    loop.entries.emplace_back("depth", Value::integer(1));
    loop.entries.emplace_back("depth0", Value::integer(0));
    if (i > 0) loop.entries.emplace_back("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) loop.entries.emplace_back("nextitem", items[static_cast<size_t>(i + 1)]);
    loop.entries.emplace_back("cycle", Value::function("loop.cycle", [i](Renderer&, Args& a) {
                                if (a.pos.empty()) throw RenderError("no items for cycling given");
                                return a.pos[static_cast<size_t>(i) % a.pos.size()];
                              }));
    loop.entries.emplace_back("changed", Value::function("loop.changed", [last_changed](Renderer&, Args& a) {
                                const Value now = Value::list(a.pos);
                                if (*last_changed && equal(Value::list(**last_changed), now)) return Value::boolean(false);
                                *last_changed = a.pos;
                                return Value::boolean(true);
                              }));
    scope_->vars["loop"] = Value::dict(std::move(loop));
    const Flow f = exec(s.body, out);
    if (f == Flow::Break) break;
    if (f == Flow::Normal) completed_iteration = true;
  }
  scope_ = outer;
  if (!completed_iteration && !s.else_body.empty()) {
    scope_ = std::make_shared<Scope>(Scope{{}, outer});
    exec(s.else_body, out);
    scope_ = outer;
  }
  return Flow::Normal;
}

void Renderer::assign(const Target& t, const Value& v) {
  switch (t.kind) {
    case Target::Kind::Name: scope_->vars[t.names[0]] = v; return;
    case Target::Kind::Tuple: {
      const List items = iterate(v);
      if (items.size() != t.names.size()) {
        if (items.size() > t.names.size())
          throw RenderError("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
        throw RenderError("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                          std::to_string(items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) scope_->vars[t.names[i]] = items[i];
      return;
    }
    case Target::Kind::NsAttr: {
      const Value ns = lookup(t.names[0]);
      if (ns.kind() != Kind::Namespace) throw RenderError("cannot assign attribute on non-namespace object");
      ns.ns().attrs.set(t.attr, v);
      return;
    }
  }
}

Value Renderer::make_macro(const Stmt& def, const std::vector<std::pair<std::string, ExprPtr>>& params,
                           const Body& body, const std::string& name) {
  // The defining scope is held weakly: a scope holding its own macro must not keep itself alive.
  std::weak_ptr<Scope> defined_in = scope_;
  const Stmt* where = &def;
  return Value::function(name, [defined_in, where, &params, &body, name](Renderer& r, Args& a) {
    if (r.call_depth_ >= kMaxCallDepth) throw RenderError("maximum recursion depth exceeded in macro '" + name + "'");
    auto parent = defined_in.lock();
    auto frame = std::make_shared<Scope>(Scope{{}, parent ? parent : r.root_});
    List varargs;
    for (size_t i = 0; i < a.pos.size(); ++i) {
      if (i < params.size()) frame->vars[params[i].first] = a.pos[i];
      else varargs.push_back(a.pos[i]);
    }
    DictData extra;
    for (const auto& [k, v] : a.kw) {
      bool is_param = false;
      for (const auto& p : params) is_param |= p.first == k;
      if (is_param || k == "caller") frame->vars[k] = v;
      else extra.set(k, v);
    }
    frame->vars["varargs"] = Value::list(std::move(varargs), true);
    frame->vars["kwargs"] = Value::dict(std::move(extra));
    const auto saved_scope = r.scope_;
    const int saved_line = r.line_;
    r.scope_ = frame;
    ++r.call_depth_;
    for (const auto& [pname, dflt] : params) {
      if (frame->vars.count(pname)) continue;
      frame->vars[pname] = dflt ? r.eval(*dflt) : Value::undefined("parameter '" + pname + "' was not provided");
    }
    std::string text;
    r.line_ = where->line;
    r.exec(body, text);
    --r.call_depth_;
    r.scope_ = saved_scope;
    r.line_ = saved_line;
    return Value::string(std::move(text));
  });
}

// ---- expressions --------------------------------------------------------------------------------------------------
Value Renderer::call(const Value& callee, Args& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind() != Kind::Function) throw RenderError("'" + type_name(callee) + "' object is not callable");
  return callee.fn().call(*this, args);
}

Value Renderer::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict: {
      if (is_dict_attribute(name)) return *builtin_method(obj, name);
      if (const Value* v = obj.dict().find(name)) return *v;
      return no_attribute(obj, name);
    }
    case Kind::Namespace: {
      if (const Value* v = obj.ns().attrs.find(name)) return *v;
      return no_attribute(obj, name);
    }
    default:
      if (!is_dunder(name))
        if (auto m = builtin_method(obj, name)) return *m;
      return no_attribute(obj, name);
  }
}

Value Renderer::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.kind() == Kind::Dict) {
    if (key.is_string()) {
      if (const Value* v = obj.dict().find(key.str())) return *v;
    }
  } else if (((obj.kind() == Kind::List && (obj.list().plain() || obj.list().view == "range")) || obj.is_string()) &&
             key.is_integral()) {
    const bool str = obj.is_string();
    const std::vector<size_t> starts = str ? char_starts(obj.str()) : std::vector<size_t>{};
    const int64_t n = str ? static_cast<int64_t>(starts.size()) - 1 : static_cast<int64_t>(obj.list().items.size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      const auto k = static_cast<size_t>(i);
      if (!str) return obj.list().items[k];
      return Value::string(obj.str().substr(starts[k], starts[k + 1] - starts[k]));
    }
    return Value::undefined(object_type_repr(obj) + " has no element " + std::to_string(key.as_int()));
  }
  // Not an item: jinja2 tries the attribute of that name.
  if (key.is_string()) {
    if (obj.kind() == Kind::Namespace) {
      if (const Value* v = obj.ns().attrs.find(key.str())) return *v;
    } else if (!is_dunder(key.str())) {
      if (auto m = builtin_method(obj, key.str())) return *m;
    }
    return no_attribute(obj, key.str());
  }
  return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
}

Value Renderer::slice(const Value& obj, const Expr& s) {
  if (obj.is_undefined()) fail_undefined(obj);
  std::optional<int64_t> part[3];
  bool valid = true;
  for (int k = 0; k < 3; ++k) {
    if (!s.args[static_cast<size_t>(k)]) continue;
    const Value v = eval(*s.args[static_cast<size_t>(k)]);
    if (v.is_none()) continue;
    if (!v.is_integral()) valid = false;  // Python's TypeError, which jinja2 turns into undefined
    else part[k] = v.as_int();
  }
  if (part[2] && *part[2] == 0) throw RenderError("slice step cannot be zero");
  if (!valid || (obj.kind() != Kind::List && !obj.is_string()) ||
      (obj.kind() == Kind::List && !obj.list().plain() && obj.list().view != "range"))
    return Value::undefined(object_type_repr(obj) + " cannot be sliced");
  const int64_t step = part[2].value_or(1);
  if (obj.is_string()) {
    const std::string& str = obj.str();
    const auto starts = char_starts(str);
    std::string out;
    for (size_t i : slice_positions(static_cast<int64_t>(starts.size()) - 1, part[0], part[1], step))
      out.append(str, starts[i], starts[i + 1] - starts[i]);
    return Value::string(std::move(out));
  }
  const auto& l = obj.list();
  List out;
  for (size_t i : slice_positions(static_cast<int64_t>(l.items.size()), part[0], part[1], step))
    out.push_back(l.items[i]);
  return Value::list(std::move(out), l.tuple);
}

Value Renderer::call_filter(const std::string& name, const Value& v, Args& args) {
  const FilterFn f = find_filter(name);
  if (!f) throw RenderError("no filter named '" + name + "'");
  return f(*this, v, args);
}

bool Renderer::call_test(const std::string& name, const Value& v, Args& args) {
  const TestFn t = find_test(name);
  if (!t) throw RenderError("no test named '" + name + "'");
  return t(*this, v, args);
}

Value Renderer::eval(const Expr& e) {
  line_ = e.line;
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::NsRef: throw RenderError("a namespace reference is only valid in an assignment");
    case ExprKind::List:
    case ExprKind::Tuple: {
      List items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value k = eval(*e.args[i]);
        if (!k.is_string()) throw RenderError("dict keys other than strings are not supported, got " + type_name(k));
        d.set(k.str(), eval(*e.args[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Getattr: return getattr(eval(*e.args[0]), e.name);
    case ExprKind::Getitem: {
      const Value obj = eval(*e.args[0]);
      if (e.args[1]->kind == ExprKind::Slice) return slice(obj, *e.args[1]);
      return getitem(obj, eval(*e.args[1]));
    }
    case ExprKind::Slice: throw RenderError("a slice is only valid inside []");
    case ExprKind::Call: {
      const Value callee = eval(*e.args[0]);
      Args args;
      for (size_t i = 1; i < e.args.size(); ++i) args.pos.push_back(eval(*e.args[i]));
      for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
      line_ = e.line;
      return call(callee, args);
    }
    case ExprKind::Filter: {
      const Value input = e.args[0] ? eval(*e.args[0]) : *block_input_;
      Args args;
      for (size_t i = 1; i < e.args.size(); ++i) args.pos.push_back(eval(*e.args[i]));
      for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
      line_ = e.line;
      return e.filter(*this, input, args);
    }
    case ExprKind::Test: {
      const Value input = eval(*e.args[0]);
      Args args;
      for (size_t i = 1; i < e.args.size(); ++i) args.pos.push_back(eval(*e.args[i]));
      for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a));
      line_ = e.line;
      return Value::boolean(e.test(*this, input, args));
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.args[0])));
    case ExprKind::Neg: return negate(eval(*e.args[0]));
    case ExprKind::Pos: {
      Value v = eval(*e.args[0]);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) throw RenderError("bad operand type for unary +: '" + type_name(v) + "'");
      return v.kind() == Kind::Bool ? Value::integer(v.as_int()) : v;
    }
    case ExprKind::And: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? eval(*e.args[1]) : l;
    }
    case ExprKind::Or: {
      Value l = eval(*e.args[0]);
      return truthy(l) ? l : eval(*e.args[1]);
    }
    case ExprKind::BinOp: {
      const Value l = eval(*e.args[0]);
      const Value r = eval(*e.args[1]);
      line_ = e.line;
      return binary_op(e.name, l, r);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& a : e.args) s += to_str(eval(*a));
      return Value::string(std::move(s));
    }
    case ExprKind::Compare: {
      Value left = eval(*e.args[0]);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1]);
        const std::string& op = e.ops[k];
        line_ = e.line;
        bool ok;
        if (op == "==") ok = equal(left, right);
        else if (op == "!=") ok = !equal(left, right);
        else if (op == "in") ok = contains(right, left);
        else if (op == "notin") ok = !contains(right, left);
        else ok = compare(left, right, op);
        if (!ok) return Value::boolean(false);  // Python chains: a < b < c is a < b and b < c
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::CondExpr: {
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  throw RenderError("unknown expression");
}

}  // namespace wgtrain::jinja
