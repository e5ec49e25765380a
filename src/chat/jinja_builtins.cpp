// jinja2's filters and tests, the Python str/dict/list methods templates call, and the global functions, with the
// semantics they have in transformers' environment (its tojson is json.dumps with ensure_ascii=False).
// Case mapping (upper, lower, title, capitalize) covers ASCII only; other characters pass through unchanged.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>

#include "chat/jinja_render.h"
#include "wgtrain/error.h"

namespace wgtrain::jinja {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw RenderError(msg); }

// Arguments bound to parameter names as Python binds them.
class Bound {
 public:
  Bound(const Args& a, const std::string& fname, std::initializer_list<std::string_view> names)
      : names_(names), v_(names.size()) {
    if (a.pos.size() > names_.size())
      fail(fname + "() takes at most " + std::to_string(names_.size()) + " argument(s) (" +
           std::to_string(a.pos.size()) + " given)");
    for (size_t i = 0; i < a.pos.size(); ++i) v_[i] = a.pos[i];
    for (const auto& [k, val] : a.kw) {
      const auto it = std::find(names_.begin(), names_.end(), k);
      if (it == names_.end()) fail(fname + "() got an unexpected keyword argument '" + k + "'");
      auto& slot = v_[static_cast<size_t>(it - names_.begin())];
      if (slot) fail(fname + "() got multiple values for argument '" + k + "'");
      slot = val;
    }
  }
  bool has(size_t i) const { return v_[i].has_value(); }
  Value get(size_t i, Value dflt = Value::none()) const { return v_[i] ? *v_[i] : std::move(dflt); }

 private:
  std::vector<std::string_view> names_;
  std::vector<std::optional<Value>> v_;
};

void no_args(const Args& a, const std::string& fname) { Bound(a, fname, {}); }

std::string need_str(const Value& v, const std::string& what) {  // a copy: v is often a temporary
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) fail(what + " must be str, not " + type_name(v));
  return v.str();
}

int64_t need_int(const Value& v, const std::string& what) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_integral()) fail(what + " must be an integer, not " + type_name(v));
  return v.as_int();
}

// ---- strings as Python's str --------------------------------------------------------------------------------------
struct Chars {  // a string's code points with their byte offsets
  explicit Chars(const std::string& s) : s(s), starts(char_starts(s)) {
    cps.reserve(starts.size());
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      size_t p = starts[i];
      cps.push_back(decode_at(s, p));
    }
  }
  size_t size() const { return cps.size(); }
  std::string sub(size_t b, size_t e) const { return s.substr(starts[b], starts[e] - starts[b]); }
  const std::string& s;
  std::vector<size_t> starts;
  std::vector<uint32_t> cps;
};

bool is_upper_letter(uint32_t c) { return is_cased(c) && upper_cp(c) == c && lower_cp(c) != c; }
bool is_lower_letter(uint32_t c) { return is_cased(c) && !is_upper_letter(c); }

std::string capitalize(const std::string& s) {  // str.capitalize(): the first character upper, the rest lower
  if (s.empty()) return s;
  size_t pos = 0;
  decode_at(s, pos);
  return py_upper(std::string_view(s).substr(0, pos)) + py_lower(std::string_view(s).substr(pos));
}

std::string py_title(const std::string& s) {  // str.title(): upper after an uncased character, lower after a cased
  std::string out;
  bool prev_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t c = decode_at(s, pos);
    const std::string_view ch = std::string_view(s).substr(start, pos - start);
    out += prev_cased ? py_lower(ch) : py_upper(ch);
    prev_cased = is_cased(c);
  }
  return out;
}

std::string jinja_title(const std::string& s) {  // the title filter: words split at runs of - whitespace ( { [ <
  std::string out;
  bool word_start = true;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t c = decode_at(s, pos);
    const std::string_view ch = std::string_view(s).substr(start, pos - start);
    const bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out += ch;
      word_start = true;
      continue;
    }
    out += word_start ? py_upper(ch) : py_lower(ch);
    word_start = false;
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  if (count < 0) count = std::numeric_limits<int64_t>::max();
  std::string out;
  if (old.empty()) {  // Python inserts the replacement around every character
    const auto starts = char_starts(s);
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      if (count > 0) out += repl, --count;
      out.append(s, starts[i], starts[i + 1] - starts[i]);
    }
    if (count > 0) out += repl;
    return out;
  }
  size_t pos = 0;
  for (size_t hit; count > 0 && (hit = s.find(old, pos)) != std::string::npos; --count) {
    out.append(s, pos, hit - pos);
    out += repl;
    pos = hit + old.size();
  }
  out.append(s, pos);
  return out;
}

List py_split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  int64_t budget = maxsplit < 0 ? std::numeric_limits<int64_t>::max() : maxsplit;
  List parts;
  if (sep.is_none() || sep.is_undefined()) {  // runs of whitespace, none at the ends
    const Chars c(s);
    const auto n = static_cast<int64_t>(c.size());
    auto space = [&](int64_t i) { return is_py_space(c.cps[static_cast<size_t>(i)]); };
    auto sub = [&](int64_t b, int64_t e) { return Value::string(c.sub(static_cast<size_t>(b), static_cast<size_t>(e))); };
    if (!from_right) {
      int64_t i = 0;
      while (budget-- > 0) {
        while (i < n && space(i)) ++i;
        if (i == n) break;
        const int64_t j = i++;
        while (i < n && !space(i)) ++i;
        parts.push_back(sub(j, i));
      }
      while (i < n && space(i)) ++i;
      if (i < n) parts.push_back(sub(i, n));
    } else {
      int64_t i = n - 1;
      while (budget-- > 0) {
        while (i >= 0 && space(i)) --i;
        if (i < 0) break;
        const int64_t j = i--;
        while (i >= 0 && !space(i)) --i;
        parts.push_back(sub(i + 1, j + 1));
      }
      while (i >= 0 && space(i)) --i;
      if (i >= 0) parts.push_back(sub(0, i + 1));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  const std::string& d = need_str(sep, "separator");
  if (d.empty()) fail("empty separator");
  if (!from_right) {
    size_t pos = 0;
    for (size_t hit; budget > 0 && (hit = s.find(d, pos)) != std::string::npos; --budget) {
      parts.push_back(Value::string(s.substr(pos, hit - pos)));
      pos = hit + d.size();
    }
    parts.push_back(Value::string(s.substr(pos)));
  } else {
    size_t end = s.size();
    while (budget > 0 && end >= d.size()) {
      const size_t hit = s.rfind(d, end - d.size());
      if (hit == std::string::npos) break;
      parts.push_back(Value::string(s.substr(hit + d.size(), end - hit - d.size())));
      end = hit;
      --budget;
    }
    parts.push_back(Value::string(s.substr(0, end)));
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

List py_splitlines(const std::string& s, bool keepends) {
  const Chars c(s);
  List lines;
  size_t b = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const uint32_t cp = c.cps[i];
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    size_t e = i + 1;
    if (cp == '\r' && e < c.size() && c.cps[e] == '\n') ++e;
    lines.push_back(Value::string(c.sub(b, keepends ? e : i)));
    b = e;
    i = e - 1;
  }
  if (b < c.size()) lines.push_back(Value::string(c.sub(b, c.size())));
  return lines;
}

// s[start:end] for the optional start/end arguments of find, count, startswith, ...
std::string window(const std::string& s, const Bound& b, size_t first, int64_t& offset) {
  offset = 0;
  if (!b.has(first) && !b.has(first + 1)) return s;
  const Chars c(s);
  const auto n = static_cast<int64_t>(c.size());
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = need_int(v, "slice index");
    if (x < 0) x += n;
    return std::clamp<int64_t>(x, 0, n);
  };
  const int64_t lo = clamp(b.get(first), 0), hi = clamp(b.get(first + 1), n);
  offset = lo;
  if (hi <= lo) return {};
  return c.sub(static_cast<size_t>(lo), static_cast<size_t>(hi));
}

int64_t char_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(char_count(std::string_view(s).substr(0, byte_pos)));
}

bool starts_or_ends(const std::string& s, const Value& affix, bool ends) {
  auto one = [&](const std::string& a) {
    return ends ? s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0 : s.rfind(a, 0) == 0;
  };
  if (affix.kind() == Kind::List && affix.list().tuple) {
    for (const auto& a : affix.list().items)
      if (one(need_str(a, "tuple item"))) return true;
    return false;
  }
  if (!affix.is_string())
    fail(std::string(ends ? "endswith" : "startswith") + " first arg must be str or a tuple of str, not " +
         type_name(affix));
  return one(affix.str());
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where) {  // -1 left, 0 center
  checked_size(width, "width");
  const auto n = static_cast<int64_t>(char_count(s));
  if (width <= n) return s;
  const int64_t total = width - n;
  const int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// format(value, spec): [[fill]align][sign][0][width][.precision][type], types s d x X o b f F e E g G %.
std::string format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  {
    size_t p = 0;
    decode_at(spec, p);  // the fill may be any character
    if (p < spec.size() && is_align(spec[p])) fill = spec.substr(0, p), align = spec[p], i = p + 1;
    else if (is_align(spec[0])) align = spec[0], i = 1;
  }
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) fill = "0", align = '=';
    ++i;
  }
  int64_t width = 0, precision = -1;
  auto digits = [&](int64_t& v) {
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])))
      v = checked_size(v * 10 + (spec[i++] - '0'), "format width");
  };
  digits(width);
  if (i < spec.size() && spec[i] == '.') {
    precision = 0;
    ++i;
    digits(precision);
  }
  const char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) fail("Invalid format specifier '" + spec + "'");
  std::string body, prefix;
  if (v.is_string() && (type == 0 || type == 's')) {
    body = v.str();
    if (precision >= 0) {
      const auto starts = char_starts(body);
      if (static_cast<size_t>(precision) + 1 < starts.size()) body.resize(starts[static_cast<size_t>(precision)]);
    }
    if (!align) align = '<';
  } else if (v.is_number() && type != 's') {
    const bool as_int = v.is_integral() && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b');
    char buf[512];
    if (as_int) {
      if (precision >= 0) fail("Precision not allowed in integer format specifier");
      const int64_t x = v.as_int();
      const uint64_t mag = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      if (type == 'b') {
        for (uint64_t m = mag; m || body.empty(); m >>= 1) body.insert(body.begin(), static_cast<char>('0' + (m & 1)));
      } else {
        std::snprintf(buf, sizeof buf, type == 'x' ? "%llx" : type == 'X' ? "%llX" : type == 'o' ? "%llo" : "%llu",
                      static_cast<unsigned long long>(mag));
        body = buf;
      }
      if (x < 0) prefix = "-";
    } else {
      double d = v.as_float();
      if (precision > 100) fail("format precision " + std::to_string(precision) + " is too large");
      if (std::signbit(d)) prefix = "-", d = -d;
      const int p = static_cast<int>(precision < 0 ? 6 : precision);
      if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G') {
        std::snprintf(buf, sizeof buf, (std::string("%.*") + type).c_str(), p, d);
      } else if (type == '%') {
        std::snprintf(buf, sizeof buf, "%.*f%%", p, d * 100);
      } else if (type == 0 && precision < 0) {
        std::snprintf(buf, sizeof buf, "%s", float_repr(d).c_str());
      } else if (type == 0) {
        std::snprintf(buf, sizeof buf, "%.*g", std::max(1, p), d);
      } else {
        fail(std::string("Unknown format code '") + type + "' for object of type '" + type_name(v) + "'");
      }
      body = buf;
    }
    if (prefix.empty() && sign != '-') prefix = std::string(1, sign);
    if (!align) align = '>';
  } else {
    fail("unsupported format string passed to " + type_name(v) + ".__format__");
  }
  const int64_t len = static_cast<int64_t>(char_count(prefix) + char_count(body));
  std::string out;
  if (len >= width) return prefix + body;
  const int64_t pad = width - len;
  auto repeat = [&](int64_t n) {
    std::string r;
    for (int64_t k = 0; k < n; ++k) r += fill;
    return r;
  };
  if (align == '<') return prefix + body + repeat(pad);
  if (align == '>') return repeat(pad) + prefix + body;
  if (align == '=') return prefix + repeat(pad) + body;
  return repeat(pad / 2) + prefix + body + repeat(pad - pad / 2);
}

// str.format with positional and named fields, {{ and }}, !r / !s and format specs.
std::string py_format(const std::string& fmt, const Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conv = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 's';
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t idx = auto_index;
      if (field.empty()) ++auto_index;
      else if (std::from_chars(field.data(), field.data() + field.size(), idx).ec != std::errc())
        fail("Replacement index " + field + " out of range for positional args tuple");
      if (idx >= a.pos.size()) fail("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = &a.pos[idx];
    } else {
      for (const auto& [k, val] : a.kw)
        if (k == field) v = &val;
      if (!v) fail("KeyError: '" + field + "'");
    }
    const Value shown = conv == 'r' ? Value::string(repr(*v)) : conv == 's' ? Value::string(to_str(*v)) : *v;
    out += format_spec(shown, spec);
  }
  return out;
}

bool all_chars(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();)
    if (!pred(decode_at(s, pos))) return false;
  return true;
}

// ---- methods --------------------------------------------------------------------------------------------------------
using Method = Value (*)(Renderer&, const Value& self, Args&);

Value m_str_simple(const std::string& name, const std::string& s, Args& a) {
  no_args(a, name);
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      const uint32_t c = decode_at(s, pos);
      const std::string_view ch = std::string_view(s).substr(start, pos - start);
      out += is_upper_letter(c) ? py_lower(ch) : is_lower_letter(c) ? py_upper(ch) : std::string(ch);
    }
    return Value::string(std::move(out));
  }
  if (name == "expandtabs") {
    std::string out;
    size_t column = 0;
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      const uint32_t c = decode_at(s, pos);
      if (c == '\t') {
        out.append(8 - column % 8, ' ');
        column += 8 - column % 8;
      } else {
        out.append(s, start, pos - start);
        column = (c == '\n' || c == '\r') ? 0 : column + 1;
      }
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return Value::boolean(all_chars(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::boolean(all_chars(s, is_cased));
  if (name == "isalnum")
    return Value::boolean(all_chars(s, [](uint32_t c) { return is_cased(c) || (c >= '0' && c <= '9'); }));
  if (name == "isspace") return Value::boolean(all_chars(s, is_py_space));
  if (name == "isascii") return Value::boolean(all_chars(s, [](uint32_t c) { return c < 0x80; }) || s.empty());
  bool has_lower = false, has_upper = false, title = true, prev_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t c = decode_at(s, pos);
    has_lower |= is_lower_letter(c);
    has_upper |= is_upper_letter(c);
    if ((is_upper_letter(c) && prev_cased) || (is_lower_letter(c) && !prev_cased)) title = false;
    prev_cased = is_cased(c);
  }
  if (name == "islower") return Value::boolean(has_lower && !has_upper);
  if (name == "isupper") return Value::boolean(has_upper && !has_lower);
  if (name == "istitle") return Value::boolean(title && (has_upper || has_lower));
  fail("str." + name + "() is not supported");
}

Value str_method(Renderer&, const std::string& name, const std::string& s, Args& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Bound b(a, name, {"chars"});
    const Value chars = b.get(0);
    if (chars.is_none()) return Value::string(strip_chars(s, std::nullopt, name != "rstrip", name != "lstrip"));
    const std::string set = need_str(chars, name + " arg");
    return Value::string(strip_chars(s, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Bound b(a, name, {"sep", "maxsplit"});
    return Value::list(py_split(s, b.get(0), need_int(b.get(1, Value::integer(-1)), "maxsplit"), name == "rsplit"));
  }
  if (name == "splitlines") {
    Bound b(a, name, {"keepends"});
    return Value::list(py_splitlines(s, truthy(b.get(0, Value::boolean(false)))));
  }
  if (name == "startswith" || name == "endswith") {
    Bound b(a, name, {"prefix", "start", "end"});
    if (!b.has(0)) fail(name + "() takes at least 1 argument (0 given)");
    int64_t offset;
    return Value::boolean(starts_or_ends(window(s, b, 1, offset), b.get(0), name == "endswith"));
  }
  if (name == "replace") {
    Bound b(a, name, {"old", "new", "count"});
    if (!b.has(1)) fail("replace() takes at least 2 arguments");
    return Value::string(py_replace(s, need_str(b.get(0), "replace() argument 1"),
                                    need_str(b.get(1), "replace() argument 2"),
                                    need_int(b.get(2, Value::integer(-1)), "count")));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Bound b(a, name, {"sub", "start", "end"});
    const std::string& sub = need_str(b.get(0), name + "() argument");
    int64_t offset;
    const std::string w = window(s, b, 1, offset);
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(char_count(w)) + 1);
      int64_t n = 0;
      for (size_t p = w.find(sub); p != std::string::npos; p = w.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t hit = name[0] == 'r' ? w.rfind(sub) : w.find(sub);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(offset + char_index(w, hit));
  }
  if (name == "join") {
    Bound b(a, name, {"iterable"});
    std::string out;
    const List items = iterate(b.get(0));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) + " found");
      if (i) out += s;
      out += items[i].str();
    }
    return Value::string(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Bound b(a, name, {"affix"});
    const std::string& x = need_str(b.get(0), name + "() argument");
    if (name == "removeprefix") return Value::string(s.rfind(x, 0) == 0 ? s.substr(x.size()) : s);
    const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value::string(ends ? s.substr(0, s.size() - x.size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    Bound b(a, name, {"sep"});
    const std::string& sep = need_str(b.get(0), name + "() argument");
    if (sep.empty()) fail("empty separator");
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      if (name == "partition") return Value::list({Value::string(s), Value::string(""), Value::string("")}, true);
      return Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    }
    return Value::list(
        {Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))}, true);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    if (name == "zfill") {
      Bound b(a, name, {"width"});
      const int64_t width = need_int(b.get(0), "width");
      const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
      const std::string body = sign ? s.substr(1) : s;
      const std::string padded = pad(body, width - (sign ? 1 : 0), "0", 1);
      return Value::string((sign ? s.substr(0, 1) : "") + padded);
    }
    Bound b(a, name, {"width", "fillchar"});
    const std::string fill = b.has(1) ? need_str(b.get(1), "fillchar") : " ";
    return Value::string(pad(s, need_int(b.get(0), "width"), fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "format") return Value::string(py_format(s, a));
  return m_str_simple(name, s, a);
}

bool is_str_method(const std::string& name) {
  static const char* const names[] = {
      "capitalize", "casefold",  "center",    "count",      "endswith",   "find",      "format",
      "index",      "isalnum",   "isalpha",   "isdecimal",  "isdigit",    "islower",   "isnumeric",
      "isspace",    "isupper",   "join",      "ljust",      "lower",      "lstrip",    "partition",
      "removeprefix", "removesuffix", "replace", "rfind",   "rindex",     "rjust",     "rpartition",
      "rsplit",     "rstrip",    "split",     "splitlines", "startswith", "strip",     "swapcase",
      "title",      "upper",     "zfill",     "encode",     "expandtabs", "format_map", "isascii",
      "isidentifier", "isprintable", "istitle", "maketrans", "translate"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value unsafe(const std::string& type, const std::string& name) {
  return Value::function(type + "." + name, [type, name](Renderer&, Args&) -> Value {
    fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
  });
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values" || name == "copy") {
    return Value::function("dict." + name, [self, name](Renderer&, Args& a) {
      no_args(a, name);
      if (name == "copy") return self;
      List out;
      for (const auto& [k, v] : self.dict().entries) {
        if (name == "items") out.push_back(Value::list({Value::string(k), v}, true));
        else out.push_back(name == "keys" ? Value::string(k) : v);
      }
      return Value::view(std::move(out), "dict_" + name);
    });
  }
  if (name == "get") {
    return Value::function("dict.get", [self](Renderer&, Args& a) {
      Bound b(a, "get", {"key", "default"});
      if (!b.has(0)) fail("get expected at least 1 argument, got 0");
      const Value key = b.get(0);
      if (key.is_string())
        if (const Value* v = self.dict().find(key.str())) return *v;
      return b.get(1);
    });
  }
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "fromkeys")
    return unsafe("dict", name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  const std::string type = type_name(self);
  if (!self.list().plain() && self.list().view != "range") return std::nullopt;
  if (name == "count" || name == "index") {
    return Value::function(type + "." + name, [self, name](Renderer&, Args& a) {
      Bound b(a, name, {"value"});
      const Value x = b.get(0);
      int64_t n = 0, i = 0;
      for (const auto& item : self.list().items) {
        if (equal(item, x)) {
          if (name == "index") return Value::integer(i);
          ++n;
        }
        ++i;
      }
      if (name == "index") fail(repr(x) + " is not in list");
      return Value::integer(n);
    });
  }
  if (self.list().tuple || !self.list().plain()) return std::nullopt;
  if (name == "copy") return Value::function("list.copy", [self](Renderer&, Args& a) {
      no_args(a, "copy");
      return Value::list(self.list().items);
    });
  if (name == "append" || name == "clear" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "reverse" || name == "sort")
    return unsafe("list", name);
  return std::nullopt;
}

// ---- attribute paths (map, selectattr, sort, join, ...): "a.b.0" looked up item by item --------------------------
std::vector<Value> attribute_parts(const Value& attr) {
  std::vector<Value> parts;
  if (attr.is_none()) return parts;
  if (!attr.is_string()) return {attr};
  const std::string& s = attr.str();
  size_t b = 0;
  while (true) {
    const size_t e = s.find('.', b);
    std::string part = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      int64_t v = 0;
      std::from_chars(part.data(), part.data() + part.size(), v);
      parts.push_back(Value::integer(v));
    } else {
      parts.push_back(Value::string(std::move(part)));
    }
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return parts;
}

Value lookup_path(Renderer& r, Value item, const std::vector<Value>& parts, const Value& dflt = Value::none()) {
  for (const auto& p : parts) {
    item = r.getitem(item, p);
    if (!dflt.is_none() && item.is_undefined()) item = dflt;
  }
  return item;
}

Value sort_key(Renderer& r, const Value& item, const std::vector<Value>& parts, bool case_sensitive) {
  Value k = lookup_path(r, item, parts);
  if (!case_sensitive && k.is_string()) return Value::string(py_lower(k.str()));
  return k;
}

// ---- filters --------------------------------------------------------------------------------------------------------
Value f_abs(Renderer&, const Value& v, Args& a) {
  no_args(a, "abs");
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Float) return Value::number(std::fabs(v.as_float()));
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Renderer& r, const Value& v, Args& a) {
  Bound b(a, "attr", {"name"});
  const std::string& name = need_str(b.get(0), "attribute name");
  // Only the attribute: a dict's keys are not attributes.
  if (v.kind() == Kind::Dict) {
    if (auto m = builtin_method(v, name)) return *m;
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  return r.getattr(v, name);
}

Value f_batch(Renderer&, const Value& v, Args& a) {
  Bound b(a, "batch", {"linecount", "fill_with"});
  const int64_t n = need_int(b.get(0), "linecount");
  if (n <= 0) fail("batch size must be positive");
  List out, cur;
  for (const auto& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (b.has(1) && !b.get(1).is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(b.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::iterator(std::move(out));
}

Value f_capitalize(Renderer&, const Value& v, Args& a) {
  no_args(a, "capitalize");
  return Value::string(capitalize(to_str(v)));
}

Value f_center(Renderer&, const Value& v, Args& a) {
  Bound b(a, "center", {"width"});
  return Value::string(pad(to_str(v), need_int(b.get(0, Value::integer(80)), "width"), " ", 0));
}

Value f_length(Renderer&, const Value& v, Args& a) {
  no_args(a, "length");
  return Value::integer(length(v));
}

Value f_default(Renderer&, const Value& v, Args& a) {
  Bound b(a, "default", {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(b.get(1, Value::boolean(false))) && !truthy(v)))
    return b.get(0, Value::string(""));
  return v;
}

Value f_dictsort(Renderer&, const Value& v, Args& a) {
  Bound b(a, "dictsort", {"case_sensitive", "by", "reverse"});
  if (v.kind() != Kind::Dict) fail("dictsort requires a mapping, not " + type_name(v));
  const bool cs = truthy(b.get(0, Value::boolean(false)));
  const std::string by = need_str(b.get(1, Value::string("key")), "by");
  if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
  const bool rev = truthy(b.get(2, Value::boolean(false)));
  List items;
  for (const auto& [k, val] : v.dict().entries) items.push_back(Value::list({Value::string(k), val}, true));
  const size_t idx = by == "key" ? 0 : 1;
  auto key = [&](const Value& item) {
    const Value& x = item.list().items[idx];
    return !cs && x.is_string() ? Value::string(py_lower(x.str())) : x;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return rev ? compare(key(y), key(x), "<") : compare(key(x), key(y), "<");
  });
  return Value::list(std::move(items));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value f_escape(Renderer&, const Value& v, Args& a) {
  no_args(a, "escape");
  return Value::string(html_escape(to_str(v)));
}

Value f_first(Renderer&, const Value& v, Args& a) {
  no_args(a, "first");
  const Value empty = Value::undefined("No first item, sequence was empty.");
  if (v.kind() == Kind::Iterator) {
    auto& it = v.iter();
    return it.pos < it.items.size() ? it.items[it.pos++] : empty;
  }
  if (v.kind() == Kind::List) return v.list().items.empty() ? empty : v.list().items.front();
  const List items = iterate(v);
  return items.empty() ? empty : items.front();
}

Value f_last(Renderer&, const Value& v, Args& a) {
  no_args(a, "last");
  if (v.kind() == Kind::Iterator) fail("'generator' object is not reversible");
  const List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

std::optional<double> parse_py_float(std::string s) {
  s = strip_chars(s, std::nullopt, true, true);
  std::erase(s, '_');
  const std::string low = py_lower(s);
  const bool neg = !low.empty() && low[0] == '-';
  const std::string body = (!low.empty() && (low[0] == '-' || low[0] == '+')) ? low.substr(1) : low;
  if (body == "inf" || body == "infinity") return neg ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  double d = 0;
  const char* first = s.data() + ((!s.empty() && s[0] == '+') ? 1 : 0);
  const auto r = std::from_chars(first, s.data() + s.size(), d);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return d;
}

Value f_float(Renderer&, const Value& v, Args& a) {
  Bound b(a, "float", {"default"});
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string())
    if (auto d = parse_py_float(v.str())) return Value::number(*d);
  return b.get(0, Value::number(0.0));
}

std::optional<int64_t> parse_py_int(std::string s, int64_t base) {
  s = strip_chars(s, std::nullopt, true, true);
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) neg = s[0] == '-', s.erase(0, 1);
  if (s.size() > 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == pb || base == 0)) s.erase(0, 2), base = pb;
  }
  if (base == 0) base = 10;
  if (s.empty() || s.front() == '_' || s.back() == '_' || s.find("__") != std::string::npos) return std::nullopt;
  std::erase(s, '_');
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, static_cast<int>(base));
  if (r.ec == std::errc::result_out_of_range) fail("integer " + s + " does not fit in 64 bits");
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return neg ? -v : v;
}

Value f_int(Renderer&, const Value& v, Args& a) {
  Bound b(a, "int", {"default", "base"});
  if (v.is_undefined()) fail_undefined(v);
  auto from_float = [](double d) {
    if (std::fabs(d) >= 9.2e18) fail("integer " + float_repr(d) + " does not fit in 64 bits");
    return Value::integer(static_cast<int64_t>(d));
  };
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float && std::isfinite(v.as_float())) return from_float(v.as_float());
  if (v.is_string()) {
    if (auto i = parse_py_int(v.str(), need_int(b.get(1, Value::integer(10)), "base"))) return Value::integer(*i);
    if (auto d = parse_py_float(v.str()); d && std::isfinite(*d)) return from_float(*d);  // "42.23"|int is 42
  }
  return b.get(0, Value::integer(0));
}

Value f_format(Renderer&, const Value& v, Args& a) {
  if (!a.pos.empty() && !a.kw.empty()) fail("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    DictData d;
    for (const auto& [k, x] : a.kw) d.set(k, x);
    return str_percent_format(to_str(v), Value::dict(std::move(d)));
  }
  return str_percent_format(to_str(v), Value::list(a.pos, true));
}

Value f_indent(Renderer&, const Value& v, Args& a) {
  Bound b(a, "indent", {"width", "first", "blank"});
  const Value width = b.get(0, Value::integer(4));
  const std::string ind =
      width.is_string() ? width.str()
                        : std::string(static_cast<size_t>(checked_size(std::max<int64_t>(0, need_int(width, "width")), "indent width")), ' ');
  const bool first = truthy(b.get(1, Value::boolean(false))), blank = truthy(b.get(2, Value::boolean(false)));
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) fail("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  const List lines = py_splitlines(v.str() + "\n", false);  // jinja2 appends the newline too
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].str();
    if (i) out += '\n';
    if (i && (blank || !line.empty())) out += ind;
    out += line;
  }
  if (first) out = ind + out;
  return Value::string(std::move(out));
}

Value f_items(Renderer&, const Value& v, Args& a) {
  no_args(a, "items");
  if (v.is_undefined()) return Value::iterator({});
  if (v.kind() != Kind::Dict) fail("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({Value::string(k), x}, true));
  return Value::iterator(std::move(out));
}

Value f_join(Renderer& r, const Value& v, Args& a) {
  Bound b(a, "join", {"d", "attribute"});
  const std::string sep = to_str(b.get(0, Value::string("")));
  const auto parts = attribute_parts(b.get(1));
  std::string out;
  bool first = true;
  for (const auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(parts.empty() ? item : lookup_path(r, item, parts));
  }
  return Value::string(std::move(out));
}

Value f_list(Renderer&, const Value& v, Args& a) {
  no_args(a, "list");
  return Value::list(iterate(v));
}

Value f_lower(Renderer&, const Value& v, Args& a) {
  no_args(a, "lower");
  return Value::string(py_lower(to_str(v)));
}

Value f_upper(Renderer&, const Value& v, Args& a) {
  no_args(a, "upper");
  return Value::string(py_upper(to_str(v)));
}

Value f_map(Renderer& r, const Value& v, Args& a) {
  if (!truthy(v) && v.kind() != Kind::Iterator) return Value::iterator({});
  List out;
  const bool by_attribute =
      a.pos.empty() && std::any_of(a.kw.begin(), a.kw.end(), [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, dflt = Value::none();
    for (const auto& [k, x] : a.kw) {
      if (k == "attribute") attribute = x;
      else if (k == "default") dflt = x;
      else fail("Unexpected keyword argument '" + k + "'");
    }
    const auto parts = attribute_parts(attribute);
    for (const auto& item : iterate(v)) out.push_back(lookup_path(r, item, parts, dflt));
  } else {
    if (a.pos.empty()) fail("map requires a filter argument");
    const std::string name = need_str(a.pos[0], "filter name");
    Args rest{List(a.pos.begin() + 1, a.pos.end()), a.kw};
    for (const auto& item : iterate(v)) {
      Args copy = rest;
      out.push_back(r.call_filter(name, item, copy));
    }
  }
  return Value::iterator(std::move(out));
}

Value min_max(Renderer& r, const Value& v, Args& a, bool want_max) {
  Bound b(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool cs = truthy(b.get(0, Value::boolean(false)));
  const auto parts = attribute_parts(b.get(1));
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(r, items[0], parts, cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(r, items[i], parts, cs);
    if (want_max ? compare(k, best_key, ">") : compare(k, best_key, "<")) best = i, best_key = std::move(k);
  }
  return items[best];
}

Value f_max(Renderer& r, const Value& v, Args& a) { return min_max(r, v, a, true); }
Value f_min(Renderer& r, const Value& v, Args& a) { return min_max(r, v, a, false); }

// select, reject, selectattr, rejectattr.
Value select_or_reject(Renderer& r, const Value& v, Args& a, bool keep_if, bool by_attribute) {
  if (!truthy(v) && v.kind() != Kind::Iterator) return Value::iterator({});
  size_t off = 0;
  std::vector<Value> parts;
  if (by_attribute) {
    if (a.pos.empty()) fail("Missing parameter for attribute name");
    parts = attribute_parts(a.pos[0]);
    off = 1;
  }
  std::optional<std::string> test;
  if (a.pos.size() > off) test = need_str(a.pos[off], "test name");
  Args test_args{List(a.pos.begin() + static_cast<std::ptrdiff_t>(std::min(a.pos.size(), off + 1)), a.pos.end()), a.kw};
  List out;
  for (const auto& item : iterate(v)) {
    const Value x = by_attribute ? lookup_path(r, item, parts) : item;
    bool passed;
    if (test) {
      Args copy = test_args;
      passed = r.call_test(*test, x, copy);
    } else {
      passed = truthy(x);
    }
    if (passed == keep_if) out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value f_select(Renderer& r, const Value& v, Args& a) { return select_or_reject(r, v, a, true, false); }
Value f_reject(Renderer& r, const Value& v, Args& a) { return select_or_reject(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, Args& a) { return select_or_reject(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, Args& a) { return select_or_reject(r, v, a, false, true); }

Value f_replace(Renderer&, const Value& v, Args& a) {
  Bound b(a, "replace", {"old", "new", "count"});
  if (!b.has(1)) fail("replace() missing required arguments 'old' and 'new'");
  const Value count = b.get(2);
  return Value::string(py_replace(to_str(v), to_str(b.get(0)), to_str(b.get(1)),
                                  count.is_none() ? -1 : need_int(count, "count")));
}

Value f_reverse(Renderer&, const Value& v, Args& a) {
  no_args(a, "reverse");
  if (v.is_string()) {
    const auto starts = char_starts(v.str());
    std::string out;
    for (size_t i = starts.size() - 1; i > 0; --i) out.append(v.str(), starts[i - 1], starts[i] - starts[i - 1]);
    return Value::string(std::move(out));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator; a generator cannot be reversed, so jinja2 makes a list of it.
  return v.kind() == Kind::Iterator ? Value::list(std::move(items)) : Value::iterator(std::move(items));
}

Value f_round(Renderer&, const Value& v, Args& a) {
  Bound b(a, "round", {"precision", "method"});
  const int64_t precision = need_int(b.get(0, Value::integer(0)), "precision");
  const std::string method = need_str(b.get(1, Value::string("common")), "method");
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common" && v.is_integral() && precision >= 0) return Value::integer(v.as_int());  // round(int) is int
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  if (method == "common") return Value::number(std::nearbyint(x) / scale);  // half to even, as Python
  // math.ceil / math.floor give an int, then jinja2 divides: no negative zero.
  const double r = method == "ceil" ? std::ceil(x) : std::floor(x);
  if (!std::isfinite(r)) fail("cannot convert float infinity to integer");
  return Value::number((r == 0 ? 0.0 : r) / scale);
}

Value f_safe(Renderer&, const Value& v, Args& a) {
  no_args(a, "safe");
  return Value::string(to_str(v));
}

Value f_sort(Renderer& r, const Value& v, Args& a) {
  Bound b(a, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool rev = truthy(b.get(0, Value::boolean(false))), cs = truthy(b.get(1, Value::boolean(false)));
  const auto parts = attribute_parts(b.get(2));
  List items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(r, items[i], parts, cs), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, "<") : compare(x.first, y.first, "<");
  });
  List out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Renderer&, const Value& v, Args& a) {
  no_args(a, "string");
  return Value::string(to_str(v));
}

Value f_sum(Renderer& r, const Value& v, Args& a) {
  Bound b(a, "sum", {"attribute", "start"});
  const auto parts = attribute_parts(b.get(0));
  Value total = b.get(1, Value::integer(0));
  for (const auto& item : iterate(v)) total = binary_op("+", total, parts.empty() ? item : lookup_path(r, item, parts));
  return total;
}

Value f_title(Renderer&, const Value& v, Args& a) {
  no_args(a, "title");
  return Value::string(jinja_title(to_str(v)));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Renderer&, const Value& v, Args& a) {
  Bound b(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = truthy(b.get(0, Value::boolean(false)));
  const Value indent = b.get(1);
  if (indent.is_string()) o.indent = indent.str();
  else if (!indent.is_none())
    o.indent = std::string(static_cast<size_t>(checked_size(std::max<int64_t>(0, need_int(indent, "indent")), "indent")), ' ');
  const Value seps = b.get(2);
  if (!seps.is_none()) {
    if (seps.kind() != Kind::List || seps.list().items.size() != 2) fail("separators must be a pair of strings");
    o.separators = std::make_pair(need_str(seps.list().items[0], "separator"), need_str(seps.list().items[1], "separator"));
  }
  o.sort_keys = truthy(b.get(3, Value::boolean(false)));
  return Value::string(to_json(v, o));
}

Value f_trim(Renderer&, const Value& v, Args& a) {
  Bound b(a, "trim", {"chars"});
  const Value chars = b.get(0);
  if (chars.is_none()) return Value::string(strip_chars(to_str(v), std::nullopt, true, true));
  const std::string set = need_str(chars, "chars");
  return Value::string(strip_chars(to_str(v), set, true, true));
}

Value f_unique(Renderer& r, const Value& v, Args& a) {
  Bound b(a, "unique", {"case_sensitive", "attribute"});
  const bool cs = truthy(b.get(0, Value::boolean(false)));
  const auto parts = attribute_parts(b.get(1));
  List seen, out;
  for (const auto& item : iterate(v)) {
    Value k = sort_key(r, item, parts, cs);
    if ((k.kind() == Kind::List && !k.list().tuple) || k.kind() == Kind::Dict || k.kind() == Kind::Namespace)
      fail("unhashable type: '" + type_name(k) + "'");
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
    seen.push_back(std::move(k));
    out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value f_wordcount(Renderer&, const Value& v, Args& a) {
  no_args(a, "wordcount");
  int64_t n = 0;
  bool in_word = false;
  const std::string s = to_str(v);
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t c = decode_at(s, pos);
    const bool w = c == '_' || (c >= '0' && c <= '9') || is_cased(c) || (c >= 0x80 && !is_py_space(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length},      {"d", f_default},         {"default", f_default},       {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},     {"first", f_first},           {"float", f_float},
    {"format", f_format},     {"indent", f_indent},     {"int", f_int},               {"items", f_items},
    {"join", f_join},         {"last", f_last},         {"length", f_length},         {"list", f_list},
    {"lower", f_lower},       {"map", f_map},           {"max", f_max},               {"min", f_min},
    {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},         {"select", f_select},         {"selectattr", f_selectattr},
    {"sort", f_sort},         {"string", f_string},     {"sum", f_sum},               {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},         {"upper", f_upper},
    {"wordcount", f_wordcount},
};

// ---- tests ----------------------------------------------------------------------------------------------------------
#define WG_TEST0(fname, expr)                         \
  bool fname(Renderer&, [[maybe_unused]] const Value& v, Args& a) { \
    no_args(a, #fname);                               \
    return (expr);                                    \
  }

WG_TEST0(t_defined, !v.is_undefined())
WG_TEST0(t_undefined, v.is_undefined())
WG_TEST0(t_none, v.is_none())
WG_TEST0(t_boolean, v.kind() == Kind::Bool)
WG_TEST0(t_true, v.kind() == Kind::Bool && v.as_bool())
WG_TEST0(t_false, v.kind() == Kind::Bool && !v.as_bool())
WG_TEST0(t_integer, v.kind() == Kind::Int)
WG_TEST0(t_float, v.kind() == Kind::Float)
WG_TEST0(t_number, v.is_number())
WG_TEST0(t_string, v.is_string())
WG_TEST0(t_mapping, v.kind() == Kind::Dict)
// Python: iter() works (Undefined iterates as empty); len() and [] exist (Undefined has both).
WG_TEST0(t_iterable, v.is_undefined() || v.is_string() || v.kind() == Kind::List || v.kind() == Kind::Dict ||
                         v.kind() == Kind::Iterator)
WG_TEST0(t_sequence, v.is_undefined() || v.is_string() || v.kind() == Kind::List || v.kind() == Kind::Dict)
WG_TEST0(t_callable, v.is_undefined() || v.kind() == Kind::Function)
WG_TEST0(t_escaped, false)
#undef WG_TEST0

bool t_lower(Renderer& r, const Value& v, Args& a) {
  no_args(a, "lower");
  Args none;
  return truthy(str_method(r, "islower", to_str(v), none));
}

bool t_upper(Renderer& r, const Value& v, Args& a) {
  no_args(a, "upper");
  Args none;
  return truthy(str_method(r, "isupper", to_str(v), none));
}

bool t_odd(Renderer&, const Value& v, Args& a) {
  no_args(a, "odd");
  return equal(binary_op("%", v, Value::integer(2)), Value::integer(1));
}

bool t_even(Renderer&, const Value& v, Args& a) {
  no_args(a, "even");
  return equal(binary_op("%", v, Value::integer(2)), Value::integer(0));
}

bool t_divisibleby(Renderer&, const Value& v, Args& a) {
  Bound b(a, "divisibleby", {"num"});
  return equal(binary_op("%", v, b.get(0)), Value::integer(0));
}

Value test_operand(const Args& a, const char* name) {
  Bound b(a, name, {"other"});
  if (!b.has(0)) fail(std::string(name) + "() missing 1 required positional argument");
  return b.get(0);
}

bool t_eq(Renderer&, const Value& v, Args& a) { return equal(v, test_operand(a, "eq")); }
bool t_ne(Renderer&, const Value& v, Args& a) { return !equal(v, test_operand(a, "ne")); }
bool t_lt(Renderer&, const Value& v, Args& a) { return compare(v, test_operand(a, "lt"), "<"); }
bool t_le(Renderer&, const Value& v, Args& a) { return compare(v, test_operand(a, "le"), "<="); }
bool t_gt(Renderer&, const Value& v, Args& a) { return compare(v, test_operand(a, "gt"), ">"); }
bool t_ge(Renderer&, const Value& v, Args& a) { return compare(v, test_operand(a, "ge"), ">="); }
bool t_in(Renderer&, const Value& v, Args& a) { return contains(test_operand(a, "in"), v); }

bool t_sameas(Renderer&, const Value& v, Args& a) {
  const Value o = test_operand(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::None:
    case Kind::Undefined: return true;
    case Kind::Bool:
    case Kind::Int: return v.as_int() == o.as_int();
    case Kind::Float: return v.as_float() == o.as_float();
    case Kind::String: return v.str() == o.str();
    default: return v.identity() == o.identity();
  }
}

bool t_filter(Renderer&, const Value& v, Args& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Renderer&, const Value& v, Args& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct TestEntry {
  const char* name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
    {"true", t_true},         {"false", t_false},         {"integer", t_integer},   {"float", t_float},
    {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},   {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},   {"lower", t_lower},
    {"upper", t_upper},       {"odd", t_odd},             {"even", t_even},         {"divisibleby", t_divisibleby},
    {"sameas", t_sameas},     {"in", t_in},               {"filter", t_filter},     {"test", t_test},
    {"==", t_eq},             {"eq", t_eq},               {"equalto", t_eq},        {"!=", t_ne},
    {"ne", t_ne},             {">", t_gt},                {"gt", t_gt},             {"greaterthan", t_gt},
    {">=", t_ge},             {"ge", t_ge},               {"<", t_lt},              {"lt", t_lt},
    {"lessthan", t_lt},       {"<=", t_le},               {"le", t_le},
};

// ---- globals --------------------------------------------------------------------------------------------------------
DictData dict_from_args(const Args& a, const std::string& fname) {
  if (a.pos.size() > 1) fail(fname + " expected at most 1 positional argument, got " + std::to_string(a.pos.size()));
  DictData d;
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.kind() == Kind::Dict) {
      d = src.dict();
    } else {
      for (const auto& pair : iterate(src)) {
        const List kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.set(need_str(kv[0], "key"), kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kw) d.set(k, v);
  return d;
}

Value g_range(Renderer&, Args& a) {
  if (!a.kw.empty()) fail("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = need_int(a.pos[0], "range() argument");
  } else {
    start = need_int(a.pos[0], "range() argument");
    stop = need_int(a.pos[1], "range() argument");
    if (a.pos.size() == 3) step = need_int(a.pos[2], "range() argument");
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  std::string text = "range(" + std::to_string(start) + ", " + std::to_string(stop);
  text += (step != 1 ? ", " + std::to_string(step) : std::string()) + ")";
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(Value::integer(i));
  }
  return Value::view(std::move(out), "range", std::move(text));
}

Value g_strftime_now(Renderer& r, Args& a) {
  Bound b(a, "strftime_now", {"format"});
  const std::string& fmt = need_str(b.get(0), "format");
  std::tm tm{};
  if (r.env().now) {
    tm = r.env().now();
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  // datetime.now() is naive: %z and %Z are empty; it has microseconds (%f), which std::tm has not.
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char d = fmt[++i];
      if (d == 'z' || d == 'Z') continue;
      if (d == 'f') c_fmt += "000000";
      else c_fmt += std::string("%") + d;
    } else {
      c_fmt += fmt[i];
    }
  }
  if (c_fmt.empty()) return Value::string("");
  std::vector<char> buf(256 + c_fmt.size() * 64);
  const size_t n = std::strftime(buf.data(), buf.size(), c_fmt.c_str(), &tm);
  return Value::string(std::string(buf.data(), n));
}

Value unsupported_function(const std::string& name) {
  return Value::function(name, [name](Renderer&, Args&) -> Value { fail(name + "() is not supported"); });
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

std::optional<Value> builtin_method(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::String:
      if (!is_str_method(name)) return std::nullopt;
      return Value::function("str." + name, [obj, name](Renderer& r, Args& a) { return str_method(r, name, obj.str(), a); });
    case Kind::Dict: return dict_method(obj, name);
    case Kind::List: return list_method(obj, name);
    default: return std::nullopt;
  }
}

DictData builtin_globals() {
  DictData g;
  g.set("range", Value::function("range", g_range));
  g.set("dict", Value::function("dict", [](Renderer&, Args& a) { return Value::dict(dict_from_args(a, "dict")); }));
  g.set("namespace", Value::function("namespace", [](Renderer&, Args& a) {
          return Value::namespace_of(dict_from_args(a, "namespace"));
        }));
  g.set("raise_exception", Value::function("raise_exception", [](Renderer&, Args& a) -> Value {
          Bound b(a, "raise_exception", {"message"});
          throw ArgumentError(to_str(b.get(0)));
        }));
  g.set("strftime_now", Value::function("strftime_now", g_strftime_now));
  for (const char* name : {"lipsum", "cycler", "joiner"}) g.set(name, unsupported_function(name));
  return g;
}

}  // namespace wgtrain::jinja
