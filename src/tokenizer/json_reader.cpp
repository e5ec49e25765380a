#include "tokenizer/json_reader.h"

#include <cctype>

#include "tokenizer/unicode.h"
#include "wgtrain/error.h"

namespace wgtrain::tok {

namespace {

class Scanner {
 public:
  Scanner(std::string_view s, const std::string& origin) : s_(s), origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(origin_ + ": not valid JSON at byte " + std::to_string(i_) + ": " + what);
  }
  size_t pos() const { return i_; }
  bool at_end() {
    ws();
    return i_ >= s_.size();
  }
  char peek() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  // After a value in an object or array: true for ',', false for the closing bracket.
  bool more(char close) {
    const char c = peek();
    ++i_;
    if (c == ',') return true;
    if (c == close) return false;
    fail(std::string("expected ',' or '") + close + "'");
  }

  std::string read_string() {
    expect('"');
    std::string out;
    while (true) {
      const size_t start = i_;
      while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\\' && static_cast<unsigned char>(s_[i_]) >= 0x20) ++i_;
      out.append(s_.substr(start, i_ - start));
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') break;
      if (c != '\\') fail("control character in a string");
      if (i_ >= s_.size()) fail("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          char32_t c1 = hex4();
          if (c1 >= 0xD800 && c1 <= 0xDBFF) {
            if (i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
              i_ += 2;
              const char32_t c2 = hex4();
              if (c2 < 0xDC00 || c2 > 0xDFFF) fail("unpaired surrogate in \\u escape");
              c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
            } else {
              fail("unpaired surrogate in \\u escape");
            }
          } else if (c1 >= 0xDC00 && c1 <= 0xDFFF) {
            fail("unpaired surrogate in \\u escape");
          }
          append_utf8(out, c1);
          break;
        }
        default: fail(std::string("bad escape \\") + e);
      }
    }
    return out;
  }

  int64_t read_integer() {
    ws();
    const size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    int64_t v = 0;
    size_t digits = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) fail("number too large");
      v = v * 10 + (s_[i_++] - '0');
      ++digits;
    }
    if (digits == 0) fail("expected a number");
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      i_ = start;
      fail("expected an integer");
    }
    return s_[start] == '-' ? -v : v;
  }

  // Steps over one value of any kind.
  void skip_value(int depth = 0) {
    if (depth > 512) fail("nested too deeply");
    const char c = peek();
    if (c == '"') {
      skip_string();
    } else if (c == '{') {
      ++i_;
      if (peek() == '}') {
        ++i_;
        return;
      }
      do {
        skip_string();
        expect(':');
        skip_value(depth + 1);
      } while (more('}'));
    } else if (c == '[') {
      ++i_;
      if (peek() == ']') {
        ++i_;
        return;
      }
      do skip_value(depth + 1);
      while (more(']'));
    } else {
      // A number or literal: its characters; nlohmann checks them when it parses the rest.
      const size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' ||
                                s_[i_] == '.'))
        ++i_;
      if (i_ == start) fail(std::string("unexpected '") + c + "'");
    }
  }

  void skip_string() {
    expect('"');
    while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  char32_t hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    char32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("bad \\u escape");
    }
    return v;
  }

  std::string_view s_;
  const std::string& origin_;
  size_t i_ = 0;
};

void read_vocab(Scanner& sc, ModelTables& t) {
  sc.expect('{');
  if (sc.peek() == '}') {
    sc.expect('}');
    return;
  }
  do {
    std::string token = sc.read_string();
    sc.expect(':');
    t.vocab.emplace_back(std::move(token), sc.read_integer());
  } while (sc.more('}'));
}

void read_merges(Scanner& sc, ModelTables& t, const std::string& origin) {
  sc.expect('[');
  if (sc.peek() == ']') {
    sc.expect(']');
    return;
  }
  do {
    const size_t index = t.merges.size();
    auto bad = [&](const std::string& what) {
      throw Error(origin + ": model.merges[" + std::to_string(index) + "]: " + what);
    };
    if (sc.peek() == '"') {  // "a b"
      std::string m = sc.read_string();
      const size_t sp = m.find(' ');
      if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
        bad("merge \"" + m + "\" is not two tokens separated by one space");
      t.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    } else if (sc.peek() == '[') {  // ["a", "b"]
      sc.expect('[');
      if (sc.peek() != '"') bad("expected [\"a\", \"b\"]");
      std::string a = sc.read_string();
      if (!sc.more(']') || sc.peek() != '"') bad("expected [\"a\", \"b\"]");
      std::string b = sc.read_string();
      if (sc.more(']')) bad("expected [\"a\", \"b\"]");
      t.merges.emplace_back(std::move(a), std::move(b));
    } else {
      bad("expected \"a b\" or [\"a\", \"b\"]");
    }
  } while (sc.more(']'));
}

}  // namespace

nlohmann::json parse_tokenizer_json(std::string_view text, const std::string& origin, ModelTables& tables) {
  // Find the byte ranges of model.vocab and model.merges, reading them on the way.
  std::vector<std::pair<size_t, size_t>> cut;  // ranges replaced by {} or []
  std::vector<const char*> placeholder;
  if (!is_valid_utf8(text)) throw Error(origin + ": not valid UTF-8");
  Scanner sc(text, origin);
  if (!sc.at_end() && sc.peek() == '{') {
    sc.expect('{');
    if (sc.peek() != '}') {
      do {
        const std::string key = sc.read_string();
        sc.expect(':');
        if (key == "model" && sc.peek() == '{') {
          sc.expect('{');
          if (sc.peek() == '}') {
            sc.expect('}');
            continue;
          }
          do {
            const std::string mkey = sc.read_string();
            sc.expect(':');
            const char c = sc.peek();
            const size_t start = sc.pos();
            if (mkey == "vocab" && c == '{') {
              tables.vocab.clear();  // a repeated key: the last one counts, as for the rest of the file
              read_vocab(sc, tables);
              tables.has_vocab = true;
              cut.emplace_back(start, sc.pos());
              placeholder.push_back("{}");
            } else if (mkey == "merges" && c == '[') {
              tables.merges.clear();
              read_merges(sc, tables, origin);
              tables.has_merges = true;
              cut.emplace_back(start, sc.pos());
              placeholder.push_back("[]");
            } else {
              sc.skip_value();
            }
          } while (sc.more('}'));
        } else {
          sc.skip_value();
        }
      } while (sc.more('}'));
    }
  }
  std::string rest;
  rest.reserve(text.size() / 8);
  size_t prev = 0;
  for (size_t k = 0; k < cut.size(); ++k) {
    rest.append(text.substr(prev, cut[k].first - prev));
    rest += placeholder[k];
    prev = cut[k].second;
  }
  rest.append(text.substr(prev));
  try {
    return nlohmann::json::parse(rest);
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
}

}  // namespace wgtrain::tok
