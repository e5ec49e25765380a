#include "chat/jinja_value.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <limits>

namespace wgtrain::jinja {

namespace {

// Deeper than this, a value is refused rather than walked (a namespace can be made to nest itself in a loop;
// Python would stop at its recursion limit too).
constexpr int kMaxDepth = 512;

[[noreturn]] void type_error(const std::string& msg) { throw RenderError(msg); }

void check_depth(int depth) {
  if (depth > kMaxDepth) throw RenderError("value nested more than " + std::to_string(kMaxDepth) + " levels deep");
}

char hex_digit(unsigned v) { return "0123456789abcdef"[v & 15]; }

std::string hex(uint32_t v, int digits) {
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = hex_digit(v);
  return s;
}

// Characters Python's repr() escapes beyond ASCII controls: separators, format controls, private use, C1
// controls (str.isprintable() is false for them). An approximation of the Unicode tables, exact for what chat
// data contains in practice.
bool printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp >= 0x80 && cp <= 0xa0) return false;
  if (cp == 0xad || cp == 0x1680 || cp == 0x180e || cp == 0x3000 || cp == 0xfeff) return false;
  if (cp >= 0x2000 && cp <= 0x200f) return false;
  if (cp >= 0x2028 && cp <= 0x202f) return false;
  if (cp >= 0x205f && cp <= 0x206f) return false;
  if (cp >= 0xd800 && cp <= 0xf8ff) return false;  // surrogates (our invalid bytes) and private use
  if (cp >= 0xfff9 && cp <= 0xfffb) return false;
  if (cp >= 0xf0000) return false;
  return true;
}

std::string repr_string(const std::string& s) {
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t cp = decode_at(s, pos);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x80 && printable(cp)) {
      out += static_cast<char>(cp);
    } else if (printable(cp)) {
      append_utf8(out, cp);
    } else if (cp < 0x100) {
      out += "\\x" + hex(cp, 2);
    } else if (cp < 0x10000) {
      out += "\\u" + hex(cp, 4);
    } else {
      out += "\\U" + hex(cp, 8);
    }
  }
  out += quote;
  return out;
}

std::string str_impl(const Value& v, bool as_repr, int depth);

std::string seq_str(const Value& v, int depth) {
  const auto& l = v.list();
  if (l.view == "range") return l.text;
  if (!l.plain()) {  // dict_items([...])
    const Value plain = Value::list(l.items);
    return l.view + "(" + seq_str(plain, depth) + ")";
  }
  std::string out = l.tuple ? "(" : "[";
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    out += str_impl(l.items[i], true, depth + 1);
  }
  if (l.tuple && l.items.size() == 1) out += ",";
  out += l.tuple ? ")" : "]";
  return out;
}

std::string dict_str(const DictData& d, int depth) {
  std::string out = "{";
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (i) out += ", ";
    out += repr_string(d.entries[i].first) + ": " + str_impl(d.entries[i].second, true, depth + 1);
  }
  return out + "}";
}

std::string str_impl(const Value& v, bool as_repr, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::Undefined: return as_repr ? "Undefined" : "";
    case Kind::None: return "None";
    case Kind::Bool: return v.as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return float_repr(v.as_float());
    case Kind::String: return as_repr ? repr_string(v.str()) : v.str();
    case Kind::List: return seq_str(v, depth);
    case Kind::Dict: return dict_str(v.dict(), depth);
    case Kind::Namespace: return "<Namespace " + dict_str(v.ns().attrs, depth) + ">";
    case Kind::Function: return "<function " + v.fn().name + ">";
    case Kind::Iterator: return "<generator object>";
  }
  return "";
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = decode_at(s, pos);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7e)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        out += "\\u" + hex(0xd800 + (v >> 10), 4) + "\\u" + hex(0xdc00 + (v & 0x3ff), 4);
      } else {
        out += "\\u" + hex(cp, 4);
      }
    } else {
      out.append(s, start, pos - start);  // as the input had it (invalid bytes too)
    }
  }
  out += '"';
}

void json_impl(std::string& out, const Value& v, const JsonOptions& o, const std::string& item_sep,
               const std::string& key_sep, int level) {
  check_depth(level);
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Float: {
      const double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += float_repr(d);
      return;
    }
    case Kind::String: json_string(out, v.str(), o.ensure_ascii); return;
    case Kind::List: {
      if (!v.list().plain()) type_error("Object of type " + v.list().view + " is not JSON serializable");
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (o.indent) newline(level + 1);
        json_impl(out, items[i], o, item_sep, key_sep, level + 1);
      }
      if (o.indent) newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      const auto& entries = v.dict().entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<size_t> order(entries.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (o.sort_keys)
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return entries[a].first < entries[b].first; });
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += item_sep;
        if (o.indent) newline(level + 1);
        json_string(out, entries[order[i]].first, o.ensure_ascii);
        out += key_sep;
        json_impl(out, entries[order[i]].second, o, item_sep, key_sep, level + 1);
      }
      if (o.indent) newline(level);
      out += '}';
      return;
    }
    default: type_error("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

Value from_json_impl(const nlohmann::ordered_json& j, int depth) {
  check_depth(depth);
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw RenderError("integer " + std::to_string(u) + " is out of the 64-bit range");
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      DictData d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.entries.emplace_back(k, from_json_impl(e, depth + 1));
      return Value::dict(std::move(d));
    }
    default: throw RenderError("JSON value of type " + std::string(j.type_name()) + " is not supported");
  }
}

bool equal_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      const auto &x = a.list(), &y = b.list();
      if (x.tuple != y.tuple || x.view != y.view || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equal_impl(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Kind::Dict: {
      const auto &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.find(k);
        if (!w || !equal_impl(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

[[noreturn]] void overflow() { throw RenderError("integer overflow (Python's integers are unbounded; these are 64-bit)"); }

int64_t add_int(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t sub_int(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t mul_int(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) type_error("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) type_error("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const auto& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(n) > static_cast<uint64_t>(kMaxBuilt) / s.size()) type_error("string repetition too large");
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& l = seq.list();
  if (!l.items.empty() && static_cast<uint64_t>(n) > static_cast<uint64_t>(kMaxBuilt) / l.items.size() / 16)
    type_error("list repetition too large");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.items.begin(), l.items.end());
  return Value::list(std::move(out), l.tuple);
}

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  type_error("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) +
             "'");
}

}  // namespace

// ---- containers ---------------------------------------------------------------------------------------------------
const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void DictData::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries)
    if (k == key) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(key, std::move(v));
}

// ---- Python semantics -------------------------------------------------------------------------------------------
int64_t checked_size(int64_t n, const char* what) {
  if (n > kMaxBuilt) throw RenderError(std::string(what) + " of " + std::to_string(n) + " is too large");
  return n;
}

void fail_undefined(const Value& v) { throw RenderError(v.undefined_what()); }

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return !v.list().plain() ? v.list().view : v.list().tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
    case Kind::Iterator: return "generator";
  }
  return "object";
}

std::string object_type_repr(const Value& v) { return v.is_none() ? "None" : type_name(v) + " object"; }

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_float() != 0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return !v.list().items.empty();
    case Kind::Dict: return !v.dict().entries.empty();
    default: return true;
  }
}

std::string to_str(const Value& v) { return str_impl(v, false, 0); }
std::string repr(const Value& v) { return str_impl(v, true, 0); }

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);  // shortest round trip
  std::string s(buf, r.ptr);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = std::stoi(s.substr(e + 1)) + 1;  // value = 0.<digits> * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {  // Python switches to an exponent outside this range
    const auto n = static_cast<int>(digits.size());
    if (decpt <= 0) out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    else if (decpt >= n) out = digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    else out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    out += x < 0 ? "e-" : "e+";
    const std::string xs = std::to_string(x < 0 ? -x : x);
    out += (xs.size() < 2 ? "0" : "") + xs;
  }
  return neg ? "-" + out : out;
}

bool equal(const Value& a, const Value& b) { return equal_impl(a, b, 0); }

bool compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  int c = 0;  // <0, 0, >0
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) {
      const double x = a.as_float(), y = b.as_float();
      if (std::isnan(x) || std::isnan(y)) return false;
      c = x < y ? -1 : x > y ? 1 : 0;
    } else {
      c = a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    c = a.str().compare(b.str());  // UTF-8 byte order is code point order
  } else if (a.kind() == Kind::List && b.kind() == Kind::List && a.list().tuple == b.list().tuple &&
             a.list().plain() && b.list().plain()) {
    const auto &x = a.list().items, &y = b.list().items;
    size_t i = 0;
    while (i < x.size() && i < y.size() && equal(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) return compare(x[i], y[i], op);
    c = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  } else {
    type_error("'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" +
               type_name(b) + "'");
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "%" && a.is_string()) return str_percent_format(a.str(), b);  // str.__mod__ takes anything
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (ints) return Value::integer(add_int(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) return Value::string(a.str() + b.str());
    if (a.kind() == Kind::List && b.kind() == Kind::List && a.list().tuple == b.list().tuple && a.list().plain() &&
        b.list().plain()) {
      List out = a.list().items;
      out.insert(out.end(), b.list().items.begin(), b.list().items.end());
      return Value::list(std::move(out), a.list().tuple);
    }
    if (a.is_string() || (a.kind() == Kind::List && a.list().plain()))
      type_error("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(sub_int(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() - b.as_float());
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(mul_int(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_float() * b.as_float());
    auto repeatable = [](const Value& v) { return v.is_string() || (v.kind() == Kind::List && v.list().plain()); };
    if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int());
    if (repeatable(b) && a.is_integral()) return repeat(b, a.as_int());
    unsupported_operands(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported_operands(op, a, b);
    if (b.as_float() == 0) type_error("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (ints) return Value::integer(floor_div(a.as_int(), b.as_int()));
    if (!nums) unsupported_operands(op, a, b);
    if (b.as_float() == 0) type_error("float floor division by zero");
    return Value::number(std::floor(a.as_float() / b.as_float()));
  }
  if (op == "%") {
    if (ints) return Value::integer(floor_mod(a.as_int(), b.as_int()));
    if (!nums) unsupported_operands(op, a, b);
    const double x = a.as_float(), y = b.as_float();
    if (y == 0) type_error("float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = mul_int(acc, base);
        e >>= 1;
        if (e > 0) base = mul_int(base, base);
      }
      return Value::integer(acc);
    }
    if (!nums) unsupported_operands("** or pow()", a, b);
    return Value::number(std::pow(a.as_float(), b.as_float()));
  }
  type_error("unknown operator " + std::string(op));
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.kind() == Kind::Float) return Value::number(-v.as_float());
  type_error("bad operand type for unary -: '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;  // jinja2's Undefined iterates as empty
    case Kind::String:
      if (!item.is_string())
        type_error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const auto& e : container.list().items)
        if (equal(e, item)) return true;
      return false;
    case Kind::Dict:
      if (item.kind() == Kind::List && !item.list().tuple) type_error("unhashable type: 'list'");
      if (item.kind() == Kind::Dict) type_error("unhashable type: 'dict'");
      return item.is_string() && container.dict().find(item.str()) != nullptr;
    case Kind::Iterator: {
      auto& it = container.iter();
      while (it.pos < it.items.size())
        if (equal(it.items[it.pos++], item)) return true;
      return false;
    }
    default: type_error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::List: return v.list().items;
    case Kind::Dict: {
      List keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& [k, _] : v.dict().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Kind::String: {
      const auto& s = v.str();
      const auto starts = char_starts(s);
      List chars;
      chars.reserve(starts.size());
      for (size_t i = 0; i + 1 < starts.size(); ++i)
        chars.push_back(Value::string(s.substr(starts[i], starts[i + 1] - starts[i])));
      return chars;
    }
    case Kind::Iterator: {
      auto& it = v.iter();
      List rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.pos), it.items.end());
      it.pos = it.items.size();
      return rest;
    }
    default: type_error("'" + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return static_cast<int64_t>(char_count(v.str()));
    case Kind::List: return static_cast<int64_t>(v.list().items.size());
    case Kind::Dict: return static_cast<int64_t>(v.dict().entries.size());
    default: type_error("object of type '" + type_name(v) + "' has no len()");
  }
}

Value str_percent_format(const std::string& fmt, const Value& args) {
  List positional;
  const DictData* mapping = nullptr;
  // Python treats any argument with __getitem__ but a tuple or str as a mapping: unused, it is no error.
  const bool mapping_like = args.kind() == Kind::Dict || args.is_undefined() ||
                            (args.kind() == Kind::List && !args.list().tuple && args.list().view != "dict_items" &&
                             args.list().view != "dict_keys" && args.list().view != "dict_values");
  if (args.kind() == Kind::List && args.list().tuple) positional = args.list().items;
  else positional.push_back(args);
  if (args.kind() == Kind::Dict) mapping = &args.dict();
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) type_error("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) type_error("format requires a mapping");
      arg = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!arg) type_error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
    int64_t width = 0, precision = -1;
    auto digits = [&](int64_t& v) {
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
        v = checked_size(v * 10 + (fmt[i++] - '0'), "format width");
    };
    digits(width);
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      ++i;
      digits(precision);
    }
    if (i >= fmt.size()) type_error("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) type_error("not enough arguments for format string");
      arg = &positional[next++];
    }
    std::string piece;
    if (conv == 's' || conv == 'r') {
      piece = conv == 's' ? to_str(*arg) : repr(*arg);
      if (precision >= 0 && piece.size() > static_cast<size_t>(precision)) piece.resize(static_cast<size_t>(precision));
    } else if (conv == 'd' || conv == 'i' || conv == 'f' || conv == 'F' || conv == 'x' || conv == 'X') {
      if (!arg->is_number()) type_error("%" + std::string(1, conv) + " format: a real number is required, not " +
                                        type_name(*arg));
      const std::string spec = "%" + flags + (precision >= 0 ? "." + std::to_string(precision) : "");
      const bool real = conv == 'f' || conv == 'F';
      const std::string c_fmt = real ? spec + conv : spec + "ll" + (conv == 'i' ? 'd' : conv);
      const auto ll = static_cast<long long>(arg->is_integral() ? arg->as_int() : static_cast<int64_t>(arg->as_float()));
      const int n = real ? std::snprintf(nullptr, 0, c_fmt.c_str(), arg->as_float()) : std::snprintf(nullptr, 0, c_fmt.c_str(), ll);
      std::vector<char> buf(static_cast<size_t>(std::max(n, 0)) + 1);
      if (real) std::snprintf(buf.data(), buf.size(), c_fmt.c_str(), arg->as_float());
      else std::snprintf(buf.data(), buf.size(), c_fmt.c_str(), ll);
      piece = buf.data();
    } else {
      type_error("unsupported format character '" + std::string(1, conv) + "'");
    }
    if (piece.size() < static_cast<size_t>(width)) {
      const std::string pad(static_cast<size_t>(width) - piece.size(), ' ');
      piece = flags.find('-') != std::string::npos ? piece + pad : pad + piece;
    }
    out += piece;
  }
  if (!mapping_like && next < positional.size()) type_error("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

std::string to_json(const Value& v, const JsonOptions& opts) {
  // json.dumps: ", " and ": " by default, "," between items once there is an indent.
  std::string item_sep = opts.indent ? "," : ", ", key_sep = ": ";
  if (opts.separators) std::tie(item_sep, key_sep) = *opts.separators;
  std::string out;
  json_impl(out, v, opts, item_sep, key_sep, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }

// ---- UTF-8 --------------------------------------------------------------------------------------------------------
uint32_t decode_at(std::string_view s, size_t& pos) {
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  int n = 0;
  uint32_t cp = 0, min = 0;
  if ((c & 0xe0) == 0xc0) n = 1, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0) n = 2, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0) n = 3, cp = c & 0x07, min = 0x10000;
  bool ok = n > 0;
  for (int k = 1; ok && k <= n; ++k) {
    if (pos + static_cast<size_t>(k) >= s.size()) {
      ok = false;
      break;
    }
    const auto d = static_cast<unsigned char>(s[pos + static_cast<size_t>(k)]);
    if ((d & 0xc0) != 0x80) ok = false;
    cp = (cp << 6) | (d & 0x3f);
  }
  if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    ++pos;
    return 0xdc00 + c;  // the byte itself, as Python's surrogateescape would carry it
  }
  pos += static_cast<size_t>(n) + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= 0xdc80 && cp <= 0xdcff) {  // an invalid input byte, carried through
    out += static_cast<char>(cp - 0xdc00);
  } else if (cp < 0x80) {
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

std::vector<size_t> char_starts(std::string_view s) {
  std::vector<size_t> starts;
  starts.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    starts.push_back(pos);
    decode_at(s, pos);
  }
  starts.push_back(s.size());
  return starts;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) decode_at(s, pos);
  return n;
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::string strip_chars(std::string_view s, std::optional<std::string_view> chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars)
    for (size_t pos = 0; pos < chars->size();) set.push_back(decode_at(*chars, pos));
  auto strip = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_py_space(cp);
  };
  const auto starts = char_starts(s);
  size_t b = 0, e = starts.size() - 1;  // character indices [b, e)
  auto cp_at = [&](size_t i) {
    size_t pos = starts[i];
    return decode_at(s, pos);
  };
  if (left)
    while (b < e && strip(cp_at(b))) ++b;
  if (right)
    while (e > b && strip(cp_at(e - 1))) --e;
  return std::string(s.substr(starts[b], starts[e] - starts[b]));
}

namespace {

// Case pairs laid out alternately in [lo, hi]: an upper case letter (at even code points if upper_even), then its
// lower case one.
bool alternating(uint32_t cp, uint32_t lo, uint32_t hi, bool upper_even, bool want_upper, uint32_t& out) {
  if (cp < lo || cp > hi) return false;
  const bool is_upper = ((cp & 1) == 0) == upper_even;
  out = is_upper == want_upper ? cp : is_upper ? cp + 1 : cp - 1;
  return true;
}

uint32_t map_case(uint32_t c, bool upper) {
  uint32_t out;
  if (c < 0x80) {
    if (upper && c >= 'a' && c <= 'z') return c - 32;
    if (!upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (c >= 0xc0 && c <= 0xfe && c != 0xd7 && c != 0xf7 && c != 0xdf) {  // Latin-1
    if (upper && c >= 0xe0) return c - 0x20;
    if (!upper && c <= 0xde) return c + 0x20;
    return c;
  }
  if (c == 0xff) return upper ? 0x178 : c;
  if (c == 0x178) return upper ? c : 0xff;
  if (c == 0xb5) return upper ? 0x39c : c;
  if (c == 0x131) return upper ? 'I' : c;
  if (c == 0x17f) return upper ? 'S' : c;
  if (c == 0x130) return upper ? c : 'i';  // Python gives i + U+0307; the dot is dropped here
  if (c == 0x1e9e) return upper ? c : 0xdf;
  if (alternating(c, 0x100, 0x12f, true, upper, out) || alternating(c, 0x132, 0x137, true, upper, out) ||
      alternating(c, 0x139, 0x148, false, upper, out) || alternating(c, 0x14a, 0x177, true, upper, out) ||
      alternating(c, 0x179, 0x17e, false, upper, out) || alternating(c, 0x1e00, 0x1e95, true, upper, out) ||
      alternating(c, 0x1ea0, 0x1eff, true, upper, out) || alternating(c, 0x460, 0x481, true, upper, out) ||
      alternating(c, 0x48a, 0x4bf, true, upper, out) || alternating(c, 0x4c1, 0x4ce, false, upper, out) ||
      alternating(c, 0x4d0, 0x52f, true, upper, out))
    return out;
  if (c == 0x4c0) return upper ? c : 0x4cf;
  if (c == 0x4cf) return upper ? 0x4c0 : c;
  // Greek
  if ((c >= 0x391 && c <= 0x3a1) || (c >= 0x3a3 && c <= 0x3ab)) return upper ? c : c + 0x20;
  if ((c >= 0x3b1 && c <= 0x3c1) || (c >= 0x3c3 && c <= 0x3cb)) return upper ? c - 0x20 : c;
  if (c == 0x3c2) return upper ? 0x3a3 : c;
  if (c == 0x386) return upper ? c : 0x3ac;
  if (c == 0x3ac) return upper ? 0x386 : c;
  if (c >= 0x388 && c <= 0x38a) return upper ? c : c + 0x25;
  if (c >= 0x3ad && c <= 0x3af) return upper ? c - 0x25 : c;
  if (c == 0x38c) return upper ? c : 0x3cc;
  if (c == 0x3cc) return upper ? 0x38c : c;
  if (c == 0x38e || c == 0x38f) return upper ? c : c + 0x3f;
  if (c == 0x3cd || c == 0x3ce) return upper ? c - 0x3f : c;
  // Cyrillic, Armenian, fullwidth Latin
  if (c >= 0x400 && c <= 0x40f) return upper ? c : c + 0x50;
  if (c >= 0x450 && c <= 0x45f) return upper ? c - 0x50 : c;
  if (c >= 0x410 && c <= 0x42f) return upper ? c : c + 0x20;
  if (c >= 0x430 && c <= 0x44f) return upper ? c - 0x20 : c;
  if (c >= 0x531 && c <= 0x556) return upper ? c : c + 0x30;
  if (c >= 0x561 && c <= 0x586) return upper ? c - 0x30 : c;
  if (c >= 0xff21 && c <= 0xff3a) return upper ? c : c + 0x20;
  if (c >= 0xff41 && c <= 0xff5a) return upper ? c - 0x20 : c;
  return c;
}

}  // namespace

uint32_t lower_cp(uint32_t cp) { return map_case(cp, false); }
uint32_t upper_cp(uint32_t cp) { return map_case(cp, true); }
bool is_cased(uint32_t cp) {
  return lower_cp(cp) != cp || upper_cp(cp) != cp || cp == 0xdf || cp == 0x138 || cp == 0x149 || cp == 0x3c2;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t c = decode_at(s, pos);
    if (c == 0x3a3) {  // final sigma: after a cased letter and not before one
      size_t back = start, ahead = pos;
      bool before = false, after = false;
      while (back > 0) {
        size_t b = back - 1;
        while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
        size_t p = b;
        const uint32_t prev = decode_at(s, p);
        back = b;
        if (prev == '\'' || prev == 0x2019 || prev == 0xad) continue;  // case-ignorable
        before = is_cased(prev);
        break;
      }
      while (ahead < s.size()) {
        const uint32_t next = decode_at(s, ahead);
        if (next == '\'' || next == 0x2019 || next == 0xad) continue;
        after = is_cased(next);
        break;
      }
      append_utf8(out, before && !after ? 0x3c2 : 0x3c3);
      continue;
    }
    if (c < 0x80) out += static_cast<char>(lower_cp(c));
    else if (const uint32_t l = lower_cp(c); l != c) append_utf8(out, l);
    else out.append(s, start, pos - start);
  }
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t c = decode_at(s, pos);
    if (c == 0xdf) out += "SS";
    else if (c == 0x149) out += "\u02bcN";
    else if (c < 0x80) out += static_cast<char>(upper_cp(c));
    else if (const uint32_t u = upper_cp(c); u != c) append_utf8(out, u);
    else out.append(s, start, pos - start);
  }
  return out;
}

}  // namespace wgtrain::jinja
