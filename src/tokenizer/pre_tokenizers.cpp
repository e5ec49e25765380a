// Pre-tokenizers: Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit.
#include <nlohmann/json.hpp>

#include <cctype>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace wgtrain::tok {

using nlohmann::json;

namespace {

// The flagged spans of a per-character pattern: every matching character is a match of its own.
template <typename Pred>
std::vector<std::pair<Span, bool>> char_matches(std::string_view text, Pred&& pred) {
  std::vector<std::pair<Span, bool>> out;
  if (text.empty()) {
    out.push_back({{0, 0}, false});
    return out;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = next_code_point(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({{last, b}, false});
      out.push_back({{b, i}, true});
      last = i;
    }
  }
  if (last < text.size()) out.push_back({{last, text.size()}, false});
  return out;
}

// Applies `split_one` (piece -> flagged spans, behavior) to every piece.
template <typename F>
void split_all(std::vector<Piece>& pieces, SplitBehavior behavior, F&& matches_of) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) {
    const auto matches = matches_of(p.text);
    split_piece(std::move(p), matches, behavior, out);
  }
  pieces = std::move(out);
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::shared_ptr<const PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }

 private:
  std::vector<std::shared_ptr<const PreTokenizer>> parts_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_all(pieces, behavior_, [&](const std::string& text) {
      auto m = find_matches(pattern_, text);
      if (invert_)
        for (auto& [span, is_match] : m) is_match = !is_match;
      return m;
    });
  }

 private:
  Regex pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's pre-tokenization regex, which ByteLevel applies when use_regex is on.
const Regex& gpt2_regex() {
  static const Regex re(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return re;
}

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_ || use_regex_) {
      std::vector<Piece> out;
      out.reserve(pieces.size());
      for (Piece& p : pieces) {
        if (add_prefix_space_ && !p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
        if (use_regex_) {
          const auto matches = find_matches(gpt2_regex(), p.text);
          split_piece(std::move(p), matches, SplitBehavior::Isolated, out);
        } else {
          out.push_back(std::move(p));
        }
      }
      pieces = std::move(out);
    }
    // Every byte becomes its printable stand-in.
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += byte_char(b);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

enum class PrependScheme { First, Never, Always };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(rep_, replacement);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    for (Piece& p : pieces) {
      std::string s;
      s.reserve(p.text.size() + rep_.size());
      for (char c : p.text) {
        if (c == ' ')
          s += rep_;
        else
          s.push_back(c);
      }
      const bool starts_with_rep = s.compare(0, rep_.size(), rep_) == 0;
      if (!s.empty() && !starts_with_rep &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_origin)))
        s.insert(0, rep_);
      p.text = std::move(s);
      if (split_) {
        const auto matches = char_matches(p.text, [&](char32_t c) { return c == replacement_; });
        split_piece(std::move(p), matches, SplitBehavior::MergedWithNext, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    }
    pieces = std::move(out);
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

template <typename Pred>
class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(Pred pred, SplitBehavior behavior) : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_all(pieces, behavior_, [&](const std::string& text) { return char_matches(text, pred_); });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::shared_ptr<const PreTokenizer> char_split(Pred pred, SplitBehavior behavior) {
  return std::make_shared<CharSplitPreTokenizer<Pred>>(std::move(pred), behavior);
}

// The Whitespace pre-tokenizer: runs of \w, and runs of what is neither \w nor space (the regex \w+|[^\w\s]+).
class WhitespacePreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_all(pieces, SplitBehavior::Removed, [](const std::string& text) {
      std::vector<std::pair<Span, bool>> out;  // the runs are kept (not a match once inverted), the rest removed
      if (text.empty()) {
        out.push_back({{0, 0}, true});
        return out;
      }
      size_t i = 0, prev = 0;
      while (i < text.size()) {
        size_t j = i;
        const char32_t c = next_code_point(text, j);
        const int kind = is_word_char(c) ? 1 : is_whitespace(c) ? 0 : 2;
        if (kind == 0) {
          i = j;
          continue;
        }
        size_t end = j;
        while (end < text.size()) {
          size_t k = end;
          const char32_t d = next_code_point(text, k);
          const int dk = is_word_char(d) ? 1 : is_whitespace(d) ? 0 : 2;
          if (dk != kind) break;
          end = k;
        }
        if (prev != i) out.push_back({{prev, i}, true});
        out.push_back({{i, end}, false});
        prev = i = end;
      }
      if (prev != text.size()) out.push_back({{prev, text.size()}, true});
      return out;
    });
  }
};

bool is_bert_punctuation(char32_t c) {
  return (c < 0x80 && std::ispunct(static_cast<int>(c))) || is_punctuation(c);
}

}  // namespace

std::shared_ptr<const PreTokenizer> make_pre_tokenizer(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = get_string(j, at, "type");
  if (type == "Sequence") {
    check_fields(j, at, {"type", "pretokenizers"});
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      at.fail("Sequence needs a \"pretokenizers\" list");
    std::vector<std::shared_ptr<const PreTokenizer>> parts;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto p = make_pre_tokenizer(j["pretokenizers"][i], (at / "pretokenizers")[i]);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_shared<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    check_fields(j, at, {"type", "pattern", "behavior", "invert"});
    return std::make_shared<SplitPreTokenizer>(get_pattern(j, at, "pattern"), parse_behavior(j, at),
                                               get_bool(j, at, "invert", false));
  }
  if (type == "ByteLevel") {
    check_fields(j, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_shared<ByteLevelPreTokenizer>(get_bool(j, at, "add_prefix_space", true),
                                                   get_bool(j, at, "use_regex", true));
  }
  if (type == "Metaspace") {
    check_fields(j, at, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    PrependScheme scheme = PrependScheme::Always;
    if (const auto s = get_optional_string(j, at, "prepend_scheme")) {
      if (*s == "first")
        scheme = PrependScheme::First;
      else if (*s == "never")
        scheme = PrependScheme::Never;
      else if (*s == "always")
        scheme = PrependScheme::Always;
      else
        (at / "prepend_scheme").fail("unknown prepend_scheme \"" + *s + "\" (first, never or always)");
    }
    if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null() && !get_bool(j, at, "add_prefix_space")) {
      if (scheme != PrependScheme::Never) at.fail("add_prefix_space false does not match prepend_scheme");
    }
    return std::make_shared<MetaspacePreTokenizer>(get_char(j, at, "replacement"), scheme,
                                                   get_bool(j, at, "split", true));
  }
  if (type == "Digits") {
    check_fields(j, at, {"type", "individual_digits"});
    const bool individual = get_bool(j, at, "individual_digits", false);
    return char_split(is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Whitespace") {
    check_fields(j, at, {"type"});
    return std::make_shared<WhitespacePreTokenizer>();
  }
  if (type == "WhitespaceSplit") {
    check_fields(j, at, {"type"});
    return char_split(is_whitespace, SplitBehavior::Removed);
  }
  if (type == "Punctuation") {
    check_fields(j, at, {"type", "behavior"});
    const SplitBehavior b = j.contains("behavior") ? parse_behavior(j, at) : SplitBehavior::Isolated;
    return char_split(is_bert_punctuation, b);
  }
  if (type == "BertPreTokenizer") {
    check_fields(j, at, {"type"});
    return std::make_shared<SequencePreTokenizer>(std::vector<std::shared_ptr<const PreTokenizer>>{
        char_split(is_whitespace, SplitBehavior::Removed), char_split(is_bert_punctuation, SplitBehavior::Isolated)});
  }
  if (type == "CharDelimiterSplit") {
    check_fields(j, at, {"type", "delimiter"});
    const char32_t d = get_char(j, at, "delimiter");
    return char_split([d](char32_t c) { return c == d; }, SplitBehavior::Removed);
  }
  at.fail("pre-tokenizer type \"" + type +
          "\" is not supported (wgtrain reads Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, "
          "WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit)");
}

}  // namespace wgtrain::tok
