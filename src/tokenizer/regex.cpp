#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "tokenizer/unicode.h"
#include "wgtrain/error.h"

namespace wgtrain::tok {

namespace {

// Oniguruma's \s with Unicode: TAB, LF, VT, FF, CR, NEL and the Z categories. (PCRE2's also takes U+180E.)
constexpr const char* kSpaceItems = "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}";
// Oniguruma's \w with Unicode: the Word property (Alphabetic, marks, decimal digits, connectors, joiners).
constexpr const char* kWordItems = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match data and JIT stack: matching is const and may run on several threads at once.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

std::string Regex::translate(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  int class_depth = 0;  // inside [...]; a nested class (Oniguruma has them, PCRE2 not) is refused below
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      const bool in_class = class_depth > 0;
      switch (e) {
        case 's': out += in_class ? std::string(kSpaceItems) : "[" + std::string(kSpaceItems) + "]"; break;
        case 'S': out += in_class ? std::string("\\S") : "[^" + std::string(kSpaceItems) + "]"; break;
        case 'w': out += in_class ? std::string(kWordItems) : "[" + std::string(kWordItems) + "]"; break;
        case 'W': out += in_class ? std::string("\\W") : "[^" + std::string(kWordItems) + "]"; break;
        case 'h': out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;  // Oniguruma: a hex digit
        case 'H': out += in_class ? "\\x00-/:-@G-`g-\\x{10FFFF}" : "[^0-9a-fA-F]"; break;
        case 'v': out += "\\x0B"; break;  // Oniguruma (Ruby syntax): the vertical tab, not a class
        case 'u':
          if (i + 4 < p.size() && std::isxdigit(static_cast<unsigned char>(p[i + 1])) &&
              std::isxdigit(static_cast<unsigned char>(p[i + 4]))) {
            out += "\\x{" + std::string(p.substr(i + 1, 4)) + "}";
            i += 4;
          } else {
            out += "\\u";
          }
          break;
        default:
          out.push_back('\\');
          out.push_back(e);
          // \p{..}, \x{..}, \k<..>: copied through by the loop as ordinary characters.
      }
      continue;
    }
    if (class_depth > 0) {
      if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {  // a POSIX class [:alpha:]: same in both engines
          const size_t end = p.find(":]", i + 2);
          if (end != std::string_view::npos) {
            out.append(p.substr(i, end + 2 - i));
            i = end + 1;
            continue;
          }
        }
        throw Error("regex: nested character classes are not supported: " + std::string(p));
      }
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&')
        throw Error("regex: character class intersection (&&) is not supported: " + std::string(p));
      if (c == ']') --class_depth;
      out.push_back(c);
      continue;
    }
    if (c == '[') {
      ++class_depth;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal in both engines.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
      // Inline options: Ruby's m is PCRE2's s (dot matches newline).
      size_t k = i + 2;
      std::string flags;
      while (k < p.size() && (std::isalpha(static_cast<unsigned char>(p[k])) || p[k] == '-')) flags.push_back(p[k++]);
      if (!flags.empty() && k < p.size() && (p[k] == ')' || p[k] == ':') &&
          flags.find_first_not_of("imx-") == std::string::npos) {
        for (char& f : flags)
          if (f == 'm') f = 's';
        out += "(?" + flags;
        i = k - 1;
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  const std::string translated = translate(pattern);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  // MULTILINE: Oniguruma's ^ and $ match at line boundaries.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_offset, nullptr);
  if (!code)
    throw Error("regex '" + std::string(pattern) + "' does not compile: " + pcre2_message(err) + " (at offset " +
                std::to_string(err_offset) + " of its PCRE2 form '" + translated + "')");
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  // Without JIT support (the browser build's PCRE2) this fails with PCRE2_ERROR_JIT_BADOPTION, the JIT stack above
  // is null, and find_all matches with the interpreter, pcre2_match: the same matches, slower.
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  compiled_ = std::move(compiled);
}

Regex Regex::literal(std::string_view s) {
  if (s.empty()) return Regex("");  // an empty pattern matches (emptily) everywhere, as in `tokenizers`
  Regex r;
  r.pattern_ = std::string(s);
  r.literal_ = true;
  return r;
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (literal_) {
    for (size_t at = text.find(pattern_); at != std::string_view::npos; at = text.find(pattern_, at + pattern_.size()))
      out.emplace_back(at, at + pattern_.size());
    return;
  }
  MatchState& st = match_state();
  size_t last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= text.size()) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const int rc = compiled_->jit
                       ? pcre2_jit_match(compiled_->code, subject, text.size(), last_end, 0, st.data, st.context)
                       : pcre2_match(compiled_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, st.data,
                                     st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("regex '" + pattern_ + "' failed on a text: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0], e = ov[1];
    last_end = e;
    // As the onig crate: after an empty match step one character on, and drop the first empty match that follows
    // a non-empty one.
    if (s == e) {
      last_end += e < text.size() ? utf8_length(static_cast<unsigned char>(text[e])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    out.emplace_back(s, e);
  }
}

std::vector<std::pair<Span, bool>> find_matches(const Regex& re, std::string_view text) {
  std::vector<std::pair<Span, bool>> out;
  if (text.empty()) {
    out.push_back({{0, 0}, false});
    return out;
  }
  thread_local std::vector<Span> matches;
  re.find_all(text, matches);
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) out.push_back({{prev, s}, false});
    out.push_back({{s, e}, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({{prev, text.size()}, false});
  return out;
}

}  // namespace wgtrain::tok
