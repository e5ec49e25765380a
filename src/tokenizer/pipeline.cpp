// What the parts of the pipeline share: reading their JSON, splitting pieces, the ByteLevel byte table.
#include "tokenizer/pipeline.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"
#include "wgtrain/error.h"

namespace wgtrain::tok {

using nlohmann::json;

void JsonPath::fail(const std::string& what) const {
  throw Error(origin_ + ": " + (path_.empty() ? std::string() : path_ + ": ") + what);
}

void check_fields(const json& j, const JsonPath& at, std::initializer_list<const char*> known) {
  if (!j.is_object()) at.fail("expected an object, got " + j.dump().substr(0, 80));
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) {
      std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() + " " : "";
      at.fail(type + "has an option wgtrain does not support: \"" + key + "\" = " + value.dump().substr(0, 80));
    }
  }
}

std::string get_string(const json& j, const JsonPath& at, const char* key) {
  if (!j.contains(key)) at.fail(std::string("missing \"") + key + "\"");
  const json& v = j[key];
  if (!v.is_string()) (at / key).fail("expected a string, got " + v.dump().substr(0, 80));
  return v.get<std::string>();
}

std::optional<std::string> get_optional_string(const json& j, const JsonPath& at, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return get_string(j, at, key);
}

bool get_bool(const json& j, const JsonPath& at, const char* key, std::optional<bool> fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback) return *fallback;
    at.fail(std::string("missing \"") + key + "\"");
  }
  if (!j[key].is_boolean()) (at / key).fail("expected true or false, got " + j[key].dump().substr(0, 80));
  return j[key].get<bool>();
}

char32_t get_char(const json& j, const JsonPath& at, const char* key) {
  const std::string s = get_string(j, at, key);
  if (s.empty() || utf8_length(static_cast<unsigned char>(s[0])) != s.size() || !is_valid_utf8(s))
    (at / key).fail("expected a single character, got \"" + s + "\"");
  size_t i = 0;
  return next_code_point(s, i);
}

Regex get_pattern(const json& j, const JsonPath& at, const char* key) {
  if (!j.contains(key)) at.fail(std::string("missing \"") + key + "\"");
  const json& p = j[key];
  const JsonPath here = at / key;
  if (!p.is_object() || p.size() != 1) here.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  if (p.contains("String")) return Regex::literal(get_string(p, here, "String"));
  if (p.contains("Regex")) {
    const std::string r = get_string(p, here, "Regex");
    try {
      return Regex(r);
    } catch (const Error& e) {
      here.fail(e.what());
    }
  }
  here.fail("expected {\"String\": ...} or {\"Regex\": ...}, got " + p.dump().substr(0, 80));
}

SplitBehavior parse_behavior(const json& j, const JsonPath& at) {
  const std::string b = get_string(j, at, "behavior");
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  (at / "behavior").fail("unknown split behavior \"" + b + "\"");
}

void split_piece(Piece&& piece, const std::vector<std::pair<Span, bool>>& matches, SplitBehavior behavior,
                 std::vector<Piece>& out) {
  // (span, remove) as NormalizedString::split computes them for each behavior.
  std::vector<std::pair<Span, bool>> spans;
  spans.reserve(matches.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& [s, m] : matches) spans.push_back({s, false});
      break;
    case SplitBehavior::Removed:
      spans = matches;
      break;
    case SplitBehavior::Contiguous: {
      bool previous = false;
      for (const auto& [s, m] : matches) {
        if (m == previous && !spans.empty())
          spans.back().first.second = s.second;
        else
          spans.push_back({s, false});
        previous = m;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous = false;
      for (const auto& [s, m] : matches) {
        if (m && !previous && !spans.empty())
          spans.back().first.second = s.second;
        else
          spans.push_back({s, false});
        previous = m;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        const auto& [s, m] = *it;
        if (m && !previous && !spans.empty())
          spans.back().first.first = s.first;
        else
          spans.push_back({s, false});
        previous = m;
      }
      std::reverse(spans.begin(), spans.end());
      break;
    }
  }
  // The common case, one span that is the whole piece, moves it.
  if (spans.size() == 1 && !spans[0].second && spans[0].first.first == 0 &&
      spans[0].first.second == piece.text.size()) {
    if (!piece.text.empty()) out.push_back(std::move(piece));
    return;
  }
  for (const auto& [s, remove] : spans) {
    if (remove || s.first == s.second) continue;
    out.push_back(Piece{piece.text.substr(s.first, s.second - s.first), piece.at_origin && s.first == 0});
  }
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_char;
  std::array<int, 512> from_char;  // code points below 512 only: the table maps onto U+0021..U+0143
  ByteTables() {
    from_char.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      // Printable Latin-1 bytes stand for themselves; the others take 256, 257, ... in byte order.
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_char[b], c);
      from_char[c] = b;
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::string& byte_char(uint8_t b) { return byte_tables().to_char[b]; }

int char_byte(char32_t c) { return c < 512 ? byte_tables().from_char[c] : -1; }

}  // namespace wgtrain::tok
