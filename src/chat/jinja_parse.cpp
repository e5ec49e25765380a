// Lexer and parser of chat templates. The lexer reproduces jinja2's, including its whitespace rules as
// transformers configures them: trim_blocks (the newline after a block or comment tag goes), lstrip_blocks (spaces
// and tabs before a block or comment tag that starts its line go), `-` and `+` on tags, no trailing newline kept.
// The parser follows jinja2's grammar and operator precedence, builds the AST once, and resolves filter and test
// names then, so a template that needs something missing fails at construction.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "chat/jinja_ast.h"
#include "wgtrain/error.h"

namespace wgtrain::jinja {

namespace {

// Expressions and blocks nested deeper than this are refused (a bracket level counts about 3): real templates stay
// far below, and the recursive descent must not exhaust the stack on adversarial input.
constexpr int kMaxNesting = 300;

enum class T { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Op, Eof };

struct Token {
  T type;
  std::string value;  // Data text, name, decoded string, operator
  size_t pos = 0;
  int64_t ival = 0;
  double fval = 0;
};

// Line and column (1-based, columns in characters) of a source offset.
class SourceMap {
 public:
  explicit SourceMap(const std::string& s) : s_(s) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n') line_starts_.push_back(i + 1);
  }
  std::pair<int, int> at(size_t pos) const {
    pos = std::min(pos, s_.size());
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    const size_t start = *it;
    return {static_cast<int>(it - line_starts_.begin()) + 1,
            static_cast<int>(char_count(std::string_view(s_).substr(start, pos - start))) + 1};
  }
  int line(size_t pos) const { return at(pos).first; }
  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    const auto [line, col] = at(pos);
    throw Error("chat template: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + msg);
  }

 private:
  const std::string& s_;
  std::vector<size_t> line_starts_;
};

// jinja2 splits on \r\n, \r and \n, joins with \n, and (keep_trailing_newline=False) drops one final newline.
std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  Lexer(const std::string& s, const SourceMap& map) : s_(s), map_(map) {}

  std::vector<Token> run() {
    const size_t n = s_.size();
    size_t pos = 0;
    while (pos < n) {
      enum { Var, Block, Comment } kind = Var;
      size_t q = s_.find('{', pos);
      for (; q != std::string::npos && q + 1 < n; q = s_.find('{', q + 1)) {
        const char c = s_[q + 1];
        if (c == '{' || c == '%' || c == '#') {
          kind = c == '{' ? Var : c == '%' ? Block : Comment;
          break;
        }
      }
      if (q == std::string::npos || q + 1 >= n) {
        push(T::Data, s_.substr(pos), pos);
        break;
      }
      const char sign = (q + 2 < n && (s_[q + 2] == '-' || s_[q + 2] == '+')) ? s_[q + 2] : 0;
      size_t raw_body = 0;
      const bool raw = kind == Block && raw_begin(q, raw_body);
      std::string text = s_.substr(pos, q - pos);
      strip_before_tag(text, sign, kind != Var, pos);
      if (!text.empty()) push(T::Data, std::move(text), pos);
      const size_t after_start = q + 2 + (sign ? 1 : 0);
      if (raw) pos = lex_raw(raw_body);
      else if (kind == Comment) pos = skip_comment(q, after_start);
      else pos = lex_tag(kind == Block, q, after_start);
    }
    push(T::Eof, "", n);
    return std::move(tokens_);
  }

 private:
  void push(T type, std::string value, size_t pos) { tokens_.push_back(Token{type, std::move(value), pos}); }

  size_t skip_space(size_t p) const {
    while (p < s_.size()) {
      size_t q = p;
      if (!is_py_space(decode_at(s_, q))) break;
      p = q;
    }
    return p;
  }

  bool space_at(size_t p) const {
    if (p >= s_.size()) return false;
    return is_py_space(decode_at(s_, p));
  }

  bool at(size_t p, std::string_view what) const { return s_.compare(p, what.size(), what) == 0; }

  // The text before a tag: all trailing whitespace goes for `-`; for lstrip_blocks, spaces and tabs (any Unicode
  // whitespace, as jinja2's \s) between the line's start and a block or comment tag go, unless `+`.
  void strip_before_tag(std::string& text, char sign, bool block_or_comment, size_t text_pos) const {
    if (sign == '-') {
      text = strip_chars(text, std::nullopt, false, true);
      return;
    }
    if (sign == '+' || !block_or_comment) return;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    const bool line_starting = text_pos == 0 || s_[text_pos - 1] == '\n';
    if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
        strip_chars(std::string_view(text).substr(l_pos), std::nullopt, true, false).empty())
      text.resize(l_pos);
  }

  // `{% raw %}` (with optional -/+ and spaces): sets where its body starts.
  bool raw_begin(size_t q, size_t& body) const {
    size_t p = q + 2;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    p = skip_space(p);
    if (!at(p, "raw")) return false;
    p = skip_space(p + 3);
    if (at(p, "-%}")) {
      body = skip_space(p + 3);
      return true;
    }
    if (at(p, "%}")) {
      body = p + 2;
      return true;
    }
    return false;
  }

  size_t lex_raw(size_t body) {
    if (body >= s_.size()) return body;  // jinja2 lets a raw block opened at the very end go unclosed
    for (size_t r = s_.find("{%", body); r != std::string::npos; r = s_.find("{%", r + 1)) {
      size_t p = r + 2;
      const char sign = (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ? s_[p] : 0;
      if (sign) ++p;
      p = skip_space(p);
      if (!at(p, "endraw")) continue;
      p = skip_space(p + 6);
      size_t end;
      if (at(p, "+%}")) end = p + 3;
      else if (at(p, "-%}")) end = skip_space(p + 3);
      else if (at(p, "%}")) end = p + 2 + (at(p + 2, "\n") ? 1 : 0);
      else continue;
      std::string text = s_.substr(body, r - body);
      strip_before_tag(text, sign, true, body);
      if (!text.empty()) push(T::Data, std::move(text), body);
      return end;
    }
    map_.fail(body, "missing {% endraw %} for this {% raw %} block");
  }

  size_t skip_comment(size_t q, size_t start) const {
    if (start >= s_.size()) return start;  // as jinja2: an unclosed comment at the very end is no error
    const size_t e = s_.find("#}", start);
    if (e == std::string::npos) map_.fail(q, "missing end of comment tag '#}'");
    if (e > start && s_[e - 1] == '-') return skip_space(e + 2);
    if (e > start && s_[e - 1] == '+') return e + 2;
    return e + 2 + (at(e + 2, "\n") ? 1 : 0);  // trim_blocks
  }

  // `(\d+_)*\d+` at p: its end, or npos.
  size_t digit_run(size_t p) const {
    const size_t n = s_.size();
    if (p >= n || !is_digit(s_[p])) return std::string::npos;
    size_t q = p;
    while (q < n && is_digit(s_[q])) ++q;
    while (q + 1 < n && s_[q] == '_' && is_digit(s_[q + 1])) {
      ++q;
      while (q < n && is_digit(s_[q])) ++q;
    }
    return q;
  }

  size_t exponent_at(size_t p) const {
    if (p >= s_.size() || (s_[p] != 'e' && s_[p] != 'E')) return std::string::npos;
    ++p;
    if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
    return digit_run(p);
  }

  // jinja2's float: digits followed by .digits, .digits e[+-]digits or e[+-]digits; not right after a dot.
  size_t float_end(size_t p) const {
    if (p > 0 && s_[p - 1] == '.') return std::string::npos;
    const size_t d = digit_run(p);
    if (d == std::string::npos) return d;
    const size_t frac = (d < s_.size() && s_[d] == '.') ? digit_run(d + 1) : std::string::npos;
    if (frac != std::string::npos) {
      const size_t e = exponent_at(frac);
      return e != std::string::npos ? e : frac;
    }
    return exponent_at(d);
  }

  // jinja2's integer: 0b/0o/0x with digits, or decimal; `_` between digits. Returns the end and sets base.
  size_t integer_end(size_t p, int& base) const {
    const size_t n = s_.size();
    if (s_[p] == '0' && p + 1 < n) {
      const char x = static_cast<char>(s_[p + 1] | 0x20);
      base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
      if (base != 10) {
        auto valid = [&](char c) {
          const int v = is_digit(c) ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (c | 0x20) - 'a' + 10 : 99;
          return v < base;
        };
        size_t q = p + 2;
        int count = 0;
        while (q < n) {
          if (s_[q] == '_' && q + 1 < n && valid(s_[q + 1])) q += 2;
          else if (valid(s_[q])) ++q;
          else break;
          ++count;
        }
        if (count > 0) return q;
      }
    }
    base = 10;
    if (s_[p] == '0') {  // 0(_?0)*
      size_t q = p + 1;
      while (q < n) {
        if (s_[q] == '0') ++q;
        else if (s_[q] == '_' && q + 1 < n && s_[q + 1] == '0') q += 2;
        else break;
      }
      return q;
    }
    size_t q = p + 1;  // [1-9](_?\d)*
    while (q < n) {
      if (is_digit(s_[q])) ++q;
      else if (s_[q] == '_' && q + 1 < n && is_digit(s_[q + 1])) q += 2;
      else break;
    }
    return q;
  }

  // A string literal's body as Python's unicode-escape decodes it (after jinja2 backslash-escapes non-ASCII).
  std::string unescape(std::string_view body, size_t pos) const {
    std::string out;
    auto hex_value = [&](size_t at, int digits, const char* what) {
      if (at + static_cast<size_t>(digits) > body.size()) map_.fail(pos, std::string("truncated ") + what + " escape");
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const char c = body[at + static_cast<size_t>(k)];
        const int d = is_digit(c) ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (c | 0x20) - 'a' + 10 : -1;
        if (d < 0) map_.fail(pos, std::string("truncated ") + what + " escape");
        v = v * 16 + static_cast<uint32_t>(d);
      }
      return v;
    };
    auto put = [&](uint32_t cp) {
      if (cp > 0x10ffff) map_.fail(pos, "illegal Unicode character in string literal");
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // a lone surrogate cannot be UTF-8
      append_utf8(out, cp);
    };
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out += body[i];
        continue;
      }
      const char d = body[++i];
      switch (d) {
        case '\n': break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': put(hex_value(i + 1, 2, "\\xXX")), i += 2; break;
        case 'u': {
          uint32_t cp = hex_value(i + 1, 4, "\\uXXXX");
          i += 4;
          // A surrogate pair written as two escapes is one character once encoded.
          if (cp >= 0xd800 && cp <= 0xdbff && i + 6 < body.size() + 1 && body.substr(i + 1, 2) == "\\u") {
            const uint32_t lo = hex_value(i + 3, 4, "\\uXXXX");
            if (lo >= 0xdc00 && lo <= 0xdfff) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              i += 6;
            }
          }
          put(cp);
          break;
        }
        case 'U': put(hex_value(i + 1, 8, "\\UXXXXXXXX")), i += 8; break;
        case 'N': map_.fail(pos, "\\N{...} escapes are not supported in string literals");
        default:
          if (d >= '0' && d <= '7') {
            uint32_t v = static_cast<uint32_t>(d - '0');
            for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
              v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
            put(v);
          } else if (static_cast<unsigned char>(d) >= 0x80) {
            // jinja2 turned the character into \xNN / \uNNNN first, so the backslash escapes that backslash.
            size_t p = i;
            const uint32_t cp = decode_at(body, p);
            i = p - 1;
            char buf[16];
            if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp);
            else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            else std::snprintf(buf, sizeof buf, "\\U%08x", cp);
            out += buf;
          } else {
            out += '\\';
            out += d;
          }
      }
    }
    return out;
  }

  // The tokens of a {{ }} or {% %} tag; returns the position after its end.
  size_t lex_tag(bool block, size_t q, size_t p) {
    push(block ? T::BlockBegin : T::VarBegin, "", q);
    const size_t n = s_.size();
    std::vector<char> balance;  // closers expected; the end tag is not recognised inside brackets (as jinja2)
    while (true) {
      if (p >= n) map_.fail(q, block ? "unterminated '{%' tag: missing '%}'" : "unterminated '{{' tag: missing '}}'");
      if (balance.empty()) {
        if (block) {
          if (at(p, "+%}")) return end_tag(T::BlockEnd, p, p + 3);
          if (at(p, "-%}")) return end_tag(T::BlockEnd, p, skip_space(p + 3));
          if (at(p, "%}")) return end_tag(T::BlockEnd, p, p + 2 + (at(p + 2, "\n") ? 1 : 0));
        } else {
          if (at(p, "-}}")) return end_tag(T::VarEnd, p, skip_space(p + 3));
          if (at(p, "}}")) return end_tag(T::VarEnd, p, p + 2);
        }
      }
      if (space_at(p)) {
        p = skip_space(p);
        continue;
      }
      const char c = s_[p];
      if (is_digit(c)) {
        if (const size_t f = float_end(p); f != std::string::npos) {
          std::string text = s_.substr(p, f - p);
          std::erase(text, '_');
          Token t{T::Float, text, p};
          const auto r = std::from_chars(text.data(), text.data() + text.size(), t.fval);
          if (r.ec == std::errc::result_out_of_range)  // Python: inf, or 0.0 for an underflow
            t.fval = text.find_first_of("eE") != std::string::npos && text[text.find_first_of("eE") + 1] == '-'
                         ? 0.0
                         : INFINITY;
          tokens_.push_back(std::move(t));
          p = f;
          continue;
        }
        int base = 10;
        const size_t e = integer_end(p, base);
        std::string text = s_.substr(p, e - p);
        std::erase(text, '_');
        Token t{T::Integer, text, p};
        const size_t skip = base == 10 ? 0 : 2;
        const auto r = std::from_chars(text.data() + skip, text.data() + text.size(), t.ival, base);
        if (r.ec != std::errc()) map_.fail(p, "integer literal " + text + " does not fit in 64 bits");
        tokens_.push_back(std::move(t));
        p = e;
        continue;
      }
      if (is_name_start(c)) {
        size_t e = p + 1;
        while (e < n && is_name_char(s_[e])) ++e;
        push(T::Name, s_.substr(p, e - p), p);
        p = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < n && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
        if (e >= n) map_.fail(p, "unterminated string literal");
        push(T::String, unescape(std::string_view(s_).substr(p + 1, e - p - 1), p), p);
        p = e + 1;
        continue;
      }
      static constexpr std::string_view two[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (auto t : two)
        if (at(p, t)) op = t;
      if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) op = c;
      if (op.empty()) {
        size_t e = p;
        const uint32_t cp = decode_at(s_, e);
        std::string shown;
        append_utf8(shown, cp);
        map_.fail(p, "unexpected character '" + shown + "'");
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) map_.fail(p, "unexpected '" + op + "'");
        if (balance.back() != op[0]) map_.fail(p, "unexpected '" + op + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      push(T::Op, op, p);
      p += op.size();
    }
  }

  size_t end_tag(T type, size_t at, size_t next) {
    push(type, "", at);
    return next;
  }

  const std::string& s_;
  const SourceMap& map_;
  std::vector<Token> tokens_;
};

// ---- parser ---------------------------------------------------------------------------------------------------------

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case T::Data: return "template data";
    case T::VarBegin: return "begin of print statement";
    case T::VarEnd: return "end of print statement";
    case T::BlockBegin: return "begin of statement block";
    case T::BlockEnd: return "end of statement block";
    case T::Name: return t.value;
    case T::String: return "string";
    case T::Integer: return "integer";
    case T::Float: return "float";
    case T::Op: return t.value;
    case T::Eof: return "end of template";
  }
  return "token";
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const SourceMap& map) : toks_(std::move(tokens)), map_(map) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != T::Eof) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        p_.fail("template nested more than " + std::to_string(kMaxNesting) + " levels deep");
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  int line() const { return map_.line(cur().pos); }
  [[noreturn]] void fail(const std::string& msg) const { map_.fail(cur().pos, msg); }

  bool is_name(std::string_view v) const { return cur().type == T::Name && cur().value == v; }
  bool is_op(std::string_view v) const { return cur().type == T::Op && cur().value == v; }
  bool skip_name(std::string_view v) {
    if (!is_name(v)) return false;
    next();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!is_op(v)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view v) {
    if (!skip_op(v)) fail("expected '" + std::string(v) + "', got '" + describe(cur()) + "'");
  }
  void expect(T type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != T::Name) fail("expected a name, got '" + describe(cur()) + "'");
    return next().value;
  }

  // ---- statements ----
  Body subparse(const std::vector<std::string>& end_tokens) {
    Body body;
    while (cur().type != T::Eof) {
      const Token& t = cur();
      if (t.type == T::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->line = map_.line(t.pos);
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == T::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = line();
        s->expr = parse_tuple();
        expect(T::VarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.type == T::BlockBegin) {
        next();
        if (cur().type == T::Name &&
            std::find(end_tokens.begin(), end_tokens.end(), cur().value) != end_tokens.end())
          return body;
        auto s = parse_statement();
        expect(T::BlockEnd, "'%}'");
        if (s) body.push_back(std::move(s));
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
    return body;
  }

  // The block end of the opening tag, the body, then (still current) the end tag's name.
  Body parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle = false) {
    skip_op(":");
    expect(T::BlockEnd, "'%}'");
    Body body = subparse(end_tokens);
    if (cur().type == T::Eof) {
      std::string want;
      for (const auto& e : end_tokens) want += (want.empty() ? "'" : " or '") + e + "'";
      fail("unexpected end of template: expected " + want + " to close '" + tag_stack_.back() + "' from line " +
           std::to_string(tag_lines_.back()));
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr new_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr parse_statement() {
    Nest nest(*this);
    if (cur().type != T::Name) fail("tag name expected");
    const std::string tag = cur().value;
    const int tag_line = line();
    static const char* const unsupported[] = {"block", "extends", "include", "import", "from", "autoescape", "do"};
    for (const char* u : unsupported)
      if (tag == u) fail("the '" + tag + "' tag is not supported in chat templates");
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif")
      fail("unexpected '" + tag + "'" +
           (tag_stack_.empty() ? std::string() : " inside '" + tag_stack_.back() + "'"));
    tag_stack_.push_back(tag);
    tag_lines_.push_back(tag_line);
    StmtPtr s;
    if (tag == "for") s = parse_for();
    else if (tag == "if") s = parse_if();
    else if (tag == "set") s = parse_set();
    else if (tag == "macro") s = parse_macro();
    else if (tag == "call") s = parse_call_block();
    else if (tag == "filter") s = parse_filter_block();
    else if (tag == "with") s = parse_with();
    else if (tag == "print") {
      next();
      s = new_stmt(StmtKind::Output, tag_line);
      s->expr = parse_tuple();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside a for loop");
      next();
      s = new_stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, tag_line);
    } else if (tag == "generation") {  // transformers' assistant-mask extension: renders its body
      next();
      s = new_stmt(StmtKind::Scope, tag_line);
      s->body = parse_statements({"endgeneration"}, true);
    } else {
      fail("unknown tag '" + tag + "'");
    }
    tag_stack_.pop_back();
    tag_lines_.pop_back();
    return s;
  }

  StmtPtr parse_for() {
    auto s = new_stmt(StmtKind::For, line());
    next();
    s->target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail("expected 'in', got '" + describe(cur()) + "'");
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->cond = parse_expression();
    if (is_name("recursive")) fail("recursive for loops are not supported");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"});
    --loop_depth_;
    if (next().value == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = new_stmt(StmtKind::If, line());
    next();
    while (true) {
      ExprPtr test = parse_tuple(false, false);
      Body body = parse_statements({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string tok = next().value;
      if (tok == "elif") continue;
      if (tok == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    const int l = line();
    next();
    Target target = parse_assign_target({}, true);
    if (skip_op("=")) {
      auto s = new_stmt(StmtKind::Set, l);
      s->target = std::move(target);
      s->expr = parse_tuple();
      return s;
    }
    auto s = new_stmt(StmtKind::SetBlock, l);
    if (target.kind == Target::Kind::Tuple) fail("a block set takes one name");
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  std::vector<std::pair<std::string, ExprPtr>> parse_signature() {
    std::vector<std::pair<std::string, ExprPtr>> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression();
      else if (!params.empty() && params.back().second) fail("non-default argument follows default argument");
      params.emplace_back(std::move(name), std::move(def));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro() {
    auto s = new_stmt(StmtKind::Macro, line());
    next();
    s->name = expect_name();
    s->params = parse_signature();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved;
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = new_stmt(StmtKind::CallBlock, line());
    next();
    if (is_op("(")) s->params = parse_signature();
    s->expr = parse_expression();
    if (s->expr->kind != ExprKind::Call) fail("expected a call after 'call'");
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endcall"}, true);
    loop_depth_ = saved;
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = new_stmt(StmtKind::FilterBlock, line());
    next();
    s->expr = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = new_stmt(StmtKind::With, line());
    next();
    while (cur().type != T::BlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_assign_target({}, false);
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression());
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  Target parse_assign_target(const std::vector<std::string>& extra_end, bool with_namespace) {
    ExprPtr e = parse_tuple(true, true, extra_end, false, with_namespace);
    Target t;
    if (e->kind == ExprKind::Name) {
      t.names.push_back(e->name);
    } else if (e->kind == ExprKind::NsRef) {
      t.kind = Target::Kind::NsAttr;
      t.names.push_back(e->name);
      t.attr = e->attr;
    } else if (e->kind == ExprKind::Tuple) {
      t.kind = Target::Kind::Tuple;
      for (const auto& item : e->args) {
        if (item->kind != ExprKind::Name) fail("can only unpack into plain names");
        t.names.push_back(item->name);
      }
    } else {
      fail("cannot assign to this expression");
    }
    for (const auto& n : t.names)
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        fail("cannot assign to '" + n + "'");
    return t;
  }

  // ---- expressions ----
  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == T::VarEnd || cur().type == T::BlockEnd || (cur().type == T::Op && cur().value == ")"))
      return true;
    return cur().type == T::Name && std::find(extra_end.begin(), extra_end.end(), cur().value) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true, const std::vector<std::string>& extra_end = {},
                      bool explicit_parens = false, bool with_namespace = false) {
    const int l = line();
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = make(ExprKind::Tuple, l);
    t->args = std::move(args);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr = true) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    Nest nest(*this);
    int l = line();
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      auto c = make(ExprKind::CondExpr, l);
      ExprPtr test = parse_or();
      ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(expr1));
      c->args.push_back(std::move(other));
      expr1 = std::move(c);
      l = line();
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, ExprPtr left, ExprPtr right, int l, std::string op = {}) {
    auto e = make(kind, l);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    const int l = line();
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(ExprKind::Or, std::move(left), parse_and(), l);
    return left;
  }

  ExprPtr parse_and() {
    const int l = line();
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(ExprKind::And, std::move(left), parse_not(), l);
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      auto e = make(ExprKind::Not, line());
      next();
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int l = line();
    ExprPtr expr = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == T::Op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                  cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        ops.push_back(next().value);
      } else if (skip_name("in")) {
        ops.emplace_back("in");
      } else if (is_name("not") && look().type == T::Name && look().value == "in") {
        next();
        next();
        ops.emplace_back("notin");
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return expr;
    auto c = make(ExprKind::Compare, l);
    c->args.push_back(std::move(expr));
    for (auto& o : operands) c->args.push_back(std::move(o));
    c->ops = std::move(ops);
    return c;
  }

  ExprPtr parse_math1() {
    const int l = line();
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().value;
      left = binary(ExprKind::BinOp, std::move(left), parse_concat(), l, op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int l = line();
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = make(ExprKind::Concat, l);
    c->args.push_back(std::move(first));
    while (skip_op("~")) c->args.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    const int l = line();
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      left = binary(ExprKind::BinOp, std::move(left), parse_pow(), l, op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    const int l = line();
    ExprPtr left = parse_unary();
    while (skip_op("**")) left = binary(ExprKind::BinOp, std::move(left), parse_unary(), l, "**");
    return left;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    Nest nest(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(is_op("-") ? ExprKind::Neg : ExprKind::Pos, line());
      next();
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary(bool with_namespace = false) {
    Nest nest(*this);
    const Token& t = cur();
    const int l = line();
    if (t.type == T::Name) {
      const std::string name = next().value;
      auto e = make(ExprKind::Const, l);
      if (name == "true" || name == "True") e->value = Value::boolean(true);
      else if (name == "false" || name == "False") e->value = Value::boolean(false);
      else if (name == "none" || name == "None") e->value = Value::none();
      else if (with_namespace && is_op(".")) {
        next();
        e->kind = ExprKind::NsRef;
        e->name = name;
        e->attr = expect_name();
      } else {
        e->kind = ExprKind::Name;
        e->name = name;
      }
      return e;
    }
    if (t.type == T::String) {
      std::string s;
      while (cur().type == T::String) s += next().value;  // adjacent literals concatenate
      auto e = make(ExprKind::Const, l);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == T::Integer || t.type == T::Float) {
      auto e = make(ExprKind::Const, l);
      e->value = t.type == T::Integer ? Value::integer(t.ival) : Value::number(t.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make(ExprKind::List, l);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression());
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make(ExprKind::Dict, l);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression());
        expect_op(":");
        e->args.push_back(parse_expression());
      }
      expect_op("}");
      return e;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) node = parse_filter(std::move(node), false);
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int l = line();
    if (skip_op(".")) {
      if (cur().type == T::Name) {
        auto e = make(ExprKind::Getattr, l);
        e->args.push_back(std::move(node));
        e->name = next().value;
        return e;
      }
      if (cur().type != T::Integer) fail("expected name or number after '.'");
      auto e = make(ExprKind::Getitem, l);
      auto idx = make(ExprKind::Const, l);
      idx->value = Value::integer(next().ival);
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(idx));
      return e;
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail("expected a subscript expression");
    auto e = make(ExprKind::Getitem, l);
    e->args.push_back(std::move(node));
    if (args.size() == 1) {
      e->args.push_back(std::move(args[0]));
    } else {
      auto t = make(ExprKind::Tuple, l);
      t->args = std::move(args);
      e->args.push_back(std::move(t));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const int l = line();
    std::vector<ExprPtr> parts;
    if (skip_op(":")) {
      parts.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression();
      if (!skip_op(":")) return node;
      parts.push_back(std::move(node));
    }
    if (is_op(":") || is_op("]") || is_op(",")) parts.push_back(nullptr);
    else parts.push_back(parse_expression());
    if (skip_op(":")) {
      if (is_op("]") || is_op(",")) parts.push_back(nullptr);
      else parts.push_back(parse_expression());
    } else {
      parts.push_back(nullptr);
    }
    auto s = make(ExprKind::Slice, l);
    s->args = std::move(parts);
    return s;
  }

  void parse_call_args(Expr& into) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == T::Name && look().type == T::Op && look().value == "=") {
        std::string key = next().value;
        next();
        into.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!into.kwargs.empty()) fail("positional argument follows keyword argument");
        into.args.push_back(parse_expression());
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::Call, line());
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const size_t at = cur().pos;
      auto e = make(ExprKind::Filter, line());
      e->name = dotted_name();
      e->filter = find_filter(e->name);
      if (!e->filter) map_.fail(at, "no filter named '" + e->name + "'");
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int l = line();
    next();  // is
    const bool negated = skip_name("not");
    const size_t at = cur().pos;
    auto e = make(ExprKind::Test, l);
    e->name = dotted_name();
    e->test = find_test(e->name);
    if (!e->test) map_.fail(at, "no test named '" + e->name + "'");
    e->args.push_back(std::move(node));
    const T t = cur().type;
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t == T::Name || t == T::String || t == T::Integer || t == T::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("cannot chain tests with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = make(ExprKind::Not, l);
    n->args.push_back(std::move(e));
    return n;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  const SourceMap& map_;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<int> tag_lines_;
};

}  // namespace

std::shared_ptr<const Program> parse(const std::string& source) {
  const std::string src = normalize_newlines(source);
  const SourceMap map(src);
  auto program = std::make_shared<Program>();
  Parser parser(Lexer(src, map).run(), map);
  program->body = parser.parse_template();
  return program;
}

}  // namespace wgtrain::jinja
