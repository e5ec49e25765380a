// The values of the chat-template interpreter and their Python semantics: what str(), repr(), ==, <, +, `in`,
// truthiness, len() and iteration do to them in Jinja2 (which runs on Python objects), and json.dumps as
// transformers' tojson filter calls it. Strings are UTF-8; where Python counts characters (len, indexing, slicing,
// strip sets) these count code points.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgtrain::jinja {

// A failure while rendering (Python's TypeError, UndefinedError, ...). The renderer adds the template line.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
class Renderer;
using List = std::vector<Value>;

// Positional and keyword arguments of a call, a filter or a test.
struct Args {
  List pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct ListData {
  List items;
  bool tuple = false;  // a Python tuple: prints as (a, b), is never equal to a list
  // Otherwise a list, unless this names another sequence type: "dict_items", "dict_keys", "dict_values" (views:
  // no indexing, no JSON) or "range" (printed as `text`, no JSON).
  std::string view;
  std::string text;
  bool plain() const { return view.empty(); }
};

// A Python dict with string keys, in insertion order (as json.loads and dict literals build them).
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);  // replaces in place, or appends
};

// jinja2's namespace(): the one mutable object a template can build (`{% set ns.x = ... %}`).
struct NamespaceData {
  DictData attrs;
};

// A Python generator (what select, map, items, unique and reverse give): one pass only, no len(), always true.
struct IteratorData {
  List items;
  size_t pos = 0;
};

struct Function {
  std::string name;
  std::function<Value(Renderer&, Args&)> call;
};

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function, Iterator };

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string what) {
    Value v;
    v.s_ = std::move(what);
    return v;
  }
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b) {
    Value v(Kind::Bool);
    v.i_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::Int);
    v.i_ = i;
    return v;
  }
  static Value number(double f) {
    Value v(Kind::Float);
    v.f_ = f;
    return v;
  }
  static Value string(std::string s) {
    Value v(Kind::String);
    v.s_ = std::move(s);
    return v;
  }
  static Value list(List items, bool tuple = false) {
    Value v(Kind::List);
    v.p_ = std::make_shared<ListData>(ListData{std::move(items), tuple, {}, {}});
    return v;
  }
  static Value view(List items, std::string type, std::string text = "") {
    Value v(Kind::List);
    v.p_ = std::make_shared<ListData>(ListData{std::move(items), false, std::move(type), std::move(text)});
    return v;
  }
  static Value dict(DictData d) {
    Value v(Kind::Dict);
    v.p_ = std::make_shared<DictData>(std::move(d));
    return v;
  }
  static Value namespace_of(DictData attrs) {
    Value v(Kind::Namespace);
    v.p_ = std::make_shared<NamespaceData>(NamespaceData{std::move(attrs)});
    return v;
  }
  static Value function(std::string name, std::function<Value(Renderer&, Args&)> call) {
    Value v(Kind::Function);
    v.p_ = std::make_shared<Function>(Function{std::move(name), std::move(call)});
    return v;
  }
  static Value iterator(List items) {
    Value v(Kind::Iterator);
    v.p_ = std::make_shared<IteratorData>(IteratorData{std::move(items), 0});
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }  // Python's int (bool included)

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // Bool or Int
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return s_; }            // String
  const std::string& undefined_what() const { return s_; }  // Undefined: the error an operation on it raises
  const ListData& list() const { return *static_cast<const ListData*>(p_.get()); }
  const DictData& dict() const { return *static_cast<const DictData*>(p_.get()); }
  NamespaceData& ns() const { return *static_cast<NamespaceData*>(p_.get()); }
  const Function& fn() const { return *static_cast<const Function*>(p_.get()); }
  IteratorData& iter() const { return *static_cast<IteratorData*>(p_.get()); }
  const void* identity() const { return p_.get(); }

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::Undefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<void> p_;
};

// ---- Python semantics -------------------------------------------------------------------------------------------
// A string or list a template builds (by *, padding, an indent width, a format width) may not exceed this: a chat
// is never that long, and a runaway template must fail rather than exhaust memory.
constexpr int64_t kMaxBuilt = int64_t{1} << 28;
int64_t checked_size(int64_t n, const char* what);  // n, or a RenderError if n > kMaxBuilt

[[noreturn]] void fail_undefined(const Value& v);  // the UndefinedError an operation on an undefined value raises
std::string type_name(const Value& v);             // Python's type(v).__name__: 'str', 'NoneType', 'dict', ...
std::string object_type_repr(const Value& v);      // jinja2's wording in undefined messages: 'dict object', 'None'
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); undefined is ""
std::string repr(const Value& v);
std::string float_repr(double d);  // Python's repr(float): shortest round trip, 1e+16, 1e-05, 1.0
bool equal(const Value& a, const Value& b);
// a < b, a <= b, ... as Python: numbers, strings, lists/tuples; anything else is a TypeError.
bool compare(const Value& a, const Value& b, std::string_view op);
Value binary_op(std::string_view op, const Value& a, const Value& b);  // + - * / // % **
Value negate(const Value& v);
bool contains(const Value& container, const Value& item);  // item in container
List iterate(const Value& v);                               // list(v); consumes a generator
int64_t length(const Value& v);                             // len(v)
Value str_percent_format(const std::string& fmt, const Value& args);  // fmt % args (printf style)

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // per level; none: one line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& opts);  // json.dumps(v, ...)
// JSON data (messages, tools, extra variables) as template values: objects keep their key order.
Value from_json(const nlohmann::ordered_json& j);

// ---- UTF-8 as Python's code points ----------------------------------------------------------------------------
// The byte offset where each code point starts, plus the end. An invalid byte counts as one character, so
// malformed input is carried through unchanged, never rejected or crashed on.
std::vector<size_t> char_starts(std::string_view s);
size_t char_count(std::string_view s);
uint32_t decode_at(std::string_view s, size_t& pos);  // advances pos; an invalid byte decodes as itself
void append_utf8(std::string& out, uint32_t cp);
bool is_py_space(uint32_t cp);  // str.isspace(), and the regex \s of jinja2's lexer
std::string strip_chars(std::string_view s, std::optional<std::string_view> chars, bool left, bool right);
// Python's str.lower() / str.upper() for Latin, Greek, Cyrillic, Armenian and fullwidth letters (the special
// cases included: ß uppercases to SS, a final capital sigma lowercases to ς); other scripts pass through.
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
uint32_t lower_cp(uint32_t cp);
uint32_t upper_cp(uint32_t cp);
bool is_cased(uint32_t cp);  // has case: counts for title(), islower(), isupper()

}  // namespace wgtrain::jinja
