// The parsed form of a chat template: jinja2's node types, for the subset chat templates use. Built once by
// parse() (jinja_parse.cpp) and walked by the renderer (jinja_render.cpp) on every apply.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace wgtrain::jinja {

using FilterFn = Value (*)(Renderer&, const Value& input, Args& args);
using TestFn = bool (*)(Renderer&, const Value& input, Args& args);
// The built-in filters and tests (jinja_builtins.cpp); nullptr for a name there is none of.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

enum class ExprKind {
  Const,     // value
  Name,      // name
  NsRef,     // name.attr as an assignment target (name, attr in `attr`)
  List,      // args
  Tuple,     // args
  Dict,      // args: key, value, key, value, ...
  Getattr,   // args[0].name
  Getitem,   // args[0][args[1]]
  Slice,     // args[0]:args[1]:args[2], each may be null
  Call,      // args[0](args[1..], kwargs)
  Filter,    // args[0] | name(args[1..], kwargs); args[0] null in a filter or set block: the block's text
  Test,      // args[0] is name(args[1..], kwargs)
  Not,       // args[0]
  Neg,       // args[0]
  Pos,       // args[0]
  And,       // args[0], args[1]
  Or,        // args[0], args[1]
  BinOp,     // args[0] name args[1], name one of + - * / // % **
  Concat,    // args joined with ~
  Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  CondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;
  std::string attr;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

// What a set, for or with binds: a name, several names (tuple unpacking), or a namespace attribute.
struct Target {
  enum class Kind { Name, Tuple, NsAttr } kind = Kind::Name;
  std::vector<std::string> names;  // NsAttr: the namespace variable
  std::string attr;
};

enum class StmtKind {
  Data,         // text
  Output,       // {{ expr }}
  If,           // branches, else_body
  For,          // target in expr [if cond]: body, else_body
  Set,          // target = expr
  SetBlock,     // target = body's text [| expr: a filter chain on it]
  Macro,        // name(params): body
  CallBlock,    // expr (a call) with caller(params) = body
  FilterBlock,  // body's text | expr
  With,         // assigns: body
  Break,
  Continue,
  Scope,        // body as is ({% generation %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro or caller parameters, default or null
  std::vector<std::pair<Target, ExprPtr>> assigns;
};

struct Program {
  Body body;
};

// Parses a template as jinja2 does with trim_blocks and lstrip_blocks (transformers' environment). A syntax error,
// or a tag, filter or test this interpreter does not have, is a wgtrain::Error naming its line and column.
std::shared_ptr<const Program> parse(const std::string& source);

}  // namespace wgtrain::jinja
