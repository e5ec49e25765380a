// The regular expressions of tokenizer.json (Split and Replace patterns), which Hugging Face's `tokenizers` runs with
// Oniguruma, run here with PCRE2 in UTF + UCP mode. The pattern is first rewritten where the two engines read the same
// text differently (\s, \w, \h, \v, \uHHHH, Ruby's (?m)), and matches are enumerated as the `onig` crate's find_iter
// does, empty matches included.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgtrain::tok {

using Span = std::pair<size_t, size_t>;  // [begin, end) byte offsets

class Regex {
 public:
  // Throws Error (with PCRE2's reason and the offset) when the pattern does not compile.
  explicit Regex(std::string_view oniguruma_pattern);
  // Matches the text of `s` literally (a Split or Replace with a String pattern).
  static Regex literal(std::string_view s);

  // Every non-overlapping match, left to right. `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<Span>& out) const;
  bool empty_literal() const { return literal_ && pattern_.empty(); }

  // The PCRE2 pattern an Oniguruma pattern becomes (exposed for tests).
  static std::string translate(std::string_view oniguruma_pattern);

 private:
  Regex() = default;
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
  std::string pattern_;
  bool literal_ = false;
};

// Pattern::find_matches of `tokenizers`: the whole text as consecutive spans, each flagged as a match or not.
std::vector<std::pair<Span, bool>> find_matches(const Regex& re, std::string_view text);

}  // namespace wgtrain::tok
