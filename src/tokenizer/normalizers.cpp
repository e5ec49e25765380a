// Normalizers: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, StripAccents, Nmt, ByteLevel.
#include <nlohmann/json.hpp>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace wgtrain::tok {

using nlohmann::json;

namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::shared_ptr<const Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::shared_ptr<const Normalizer>> parts_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& s) const override { s = tok::normalize(s, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = lowercase(s); }
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);  // an empty string stays empty
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& s) const override {
    thread_local std::vector<Span> matches;
    pattern_.find_all(s, matches);
    if (matches.empty()) return;
    std::string out;
    out.reserve(s.size() + matches.size() * content_.size());
    size_t prev = 0;
    for (const auto& [b, e] : matches) {
      out.append(s, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_whitespace(next_code_point(s, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_whitespace(next_code_point(s, i))) break;
        end = start;
      }
    }
    s = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Keeps or maps each character (StripAccents, Nmt).
template <typename F>
void map_chars(std::string& s, F&& f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = next_code_point(s, i);
    if (const auto m = f(c)) append_utf8(out, *m);
  }
  s = std::move(out);
}

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    map_chars(s, [](char32_t c) -> std::optional<char32_t> {
      if (is_combining_mark(c)) return std::nullopt;
      return c;
    });
  }
};

class NmtNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    map_chars(s, [](char32_t c) -> std::optional<char32_t> {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F)
        return std::nullopt;
      if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
          c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
        return U' ';
      return c;
    });
  }
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char b : s) out += byte_char(b);
    s = std::move(out);
  }
};

}  // namespace

std::shared_ptr<const Normalizer> make_normalizer(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = get_string(j, at, "type");
  if (type == "Sequence") {
    check_fields(j, at, {"type", "normalizers"});
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) at.fail("Sequence needs a \"normalizers\" list");
    std::vector<std::shared_ptr<const Normalizer>> parts;
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      auto p = make_normalizer(j["normalizers"][i], (at / "normalizers")[i]);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_shared<SequenceNormalizer>(std::move(parts));
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    check_fields(j, at, {"type"});
    const NormalForm f = type == "NFC"    ? NormalForm::NFC
                         : type == "NFD"  ? NormalForm::NFD
                         : type == "NFKC" ? NormalForm::NFKC
                                          : NormalForm::NFKD;
    return std::make_shared<UnicodeNormalizer>(f);
  }
  if (type == "Lowercase") {
    check_fields(j, at, {"type"});
    return std::make_shared<LowercaseNormalizer>();
  }
  if (type == "Prepend") {
    check_fields(j, at, {"type", "prepend"});
    return std::make_shared<PrependNormalizer>(get_string(j, at, "prepend"));
  }
  if (type == "Replace") {
    check_fields(j, at, {"type", "pattern", "content"});
    return std::make_shared<ReplaceNormalizer>(get_pattern(j, at, "pattern"), get_string(j, at, "content"));
  }
  if (type == "Strip") {
    check_fields(j, at, {"type", "strip_left", "strip_right"});
    return std::make_shared<StripNormalizer>(get_bool(j, at, "strip_left"), get_bool(j, at, "strip_right"));
  }
  if (type == "StripAccents") {
    check_fields(j, at, {"type"});
    return std::make_shared<StripAccentsNormalizer>();
  }
  if (type == "Nmt") {
    check_fields(j, at, {"type"});
    return std::make_shared<NmtNormalizer>();
  }
  if (type == "ByteLevel") {
    check_fields(j, at, {"type"});
    return std::make_shared<ByteLevelNormalizer>();
  }
  at.fail("normalizer type \"" + type +
          "\" is not supported (wgtrain reads Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, "
          "StripAccents, Nmt, ByteLevel)");
}

}  // namespace wgtrain::tok
