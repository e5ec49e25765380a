// Decoders: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, BPEDecoder, WordPiece.
#include <nlohmann/json.hpp>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace wgtrain::tok {

using nlohmann::json;

namespace {

constexpr const char* kReplacementChar = "\xEF\xBF\xBD";

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::shared_ptr<const Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::shared_ptr<const Decoder>> parts_;
};

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token made only of stand-in characters gives their bytes; any other token its own text.
      const size_t start = bytes.size();
      bool all = true;
      size_t i = 0;
      while (i < t.size()) {
        const int b = char_byte(next_code_point(t, i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool prepend) : replacement_(replacement), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::string out;
      const std::string& s = tokens[t];
      size_t i = 0;
      while (i < s.size()) {
        const size_t b = i;
        const char32_t c = next_code_point(s, i);
        if (c == replacement_) {
          // In the first token the replacement goes (it stood for the space the pre-tokenizer prepended).
          if (!(t == 0 && prepend_)) out.push_back(' ');
        } else {
          out.append(s, b, i - b);
        }
      }
      tokens[t] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool prepend_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string out;
      for (const auto& [span, is_match] : find_matches(pattern_, t)) {
        if (is_match)
          out += content_;
        else
          out.append(t, span.first, span.second - span.first);
      }
      t = std::move(out);
    }
  }

 private:
  Regex pattern_;
  std::string content_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;  // the bytes of consecutive <0xXX> tokens
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_count; ++k) out.emplace_back(kReplacementChar);  // one per byte token
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4])))
        byte = std::stoi(t.substr(3, 2), nullptr, 16);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<size_t> starts;  // byte offset of each character
      for (size_t i = 0; i < t.size();) {
        starts.push_back(i);
        next_code_point(t, i);
      }
      const size_t n = starts.size();
      auto char_at = [&](size_t k) {
        size_t i = starts[k];
        return next_code_point(t, i);
      };
      size_t start_cut = 0;
      for (size_t k = 0; k < start_ && k < n; ++k) {
        if (char_at(k) != content_) break;
        start_cut = k + 1;
      }
      size_t stop_cut = n;
      for (size_t k = 0; k < stop_ && k < n; ++k) {
        if (char_at(n - k - 1) != content_) break;
        stop_cut = n - k - 1;
      }
      if (stop_cut <= start_cut) {
        t.clear();
        continue;
      }
      const size_t b = start_cut < n ? starts[start_cut] : t.size();
      const size_t e = stop_cut < n ? starts[stop_cut] : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::string replacement = t + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& s = tokens[t];
      size_t prev = 0;
      for (size_t at = s.find(suffix_); at != std::string::npos; at = s.find(suffix_, prev)) {
        out.append(s, prev, at - prev);
        out += replacement;
        prev = at + suffix_.size();
      }
      out.append(s, prev, std::string::npos);
      tokens[t] = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::string& s = tokens[t];
      if (t != 0) {
        if (s.compare(0, prefix_.size(), prefix_) == 0)
          s.erase(0, prefix_.size());
        else
          s.insert(0, 1, ' ');
      }
      if (cleanup_) s = cleanup(s);
    }
  }

 private:
  static void replace_all(std::string& s, std::string_view from, std::string_view to) {
    std::string out;
    size_t prev = 0;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, prev)) {
      out.append(s, prev, at - prev);
      out += to;
      prev = at + from.size();
    }
    out.append(s, prev, std::string::npos);
    s = std::move(out);
  }
  static std::string cleanup(std::string s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},           {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) replace_all(s, from, to);
    return s;
  }
  std::string prefix_;
  bool cleanup_;
};

}  // namespace

std::shared_ptr<const Decoder> make_decoder(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = get_string(j, at, "type");
  if (type == "Sequence") {
    check_fields(j, at, {"type", "decoders"});
    if (!j.contains("decoders") || !j["decoders"].is_array()) at.fail("Sequence needs a \"decoders\" list");
    std::vector<std::shared_ptr<const Decoder>> parts;
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      auto p = make_decoder(j["decoders"][i], (at / "decoders")[i]);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_shared<SequenceDecoder>(std::move(parts));
  }
  if (type == "ByteLevel") {
    check_fields(j, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_shared<ByteLevelDecoder>();
  }
  if (type == "Metaspace") {
    check_fields(j, at, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    bool prepend = true;
    if (const auto s = get_optional_string(j, at, "prepend_scheme")) {
      if (*s != "first" && *s != "never" && *s != "always")
        (at / "prepend_scheme").fail("unknown prepend_scheme \"" + *s + "\" (first, never or always)");
      prepend = *s != "never";
    }
    if (j.contains("add_prefix_space") && !j["add_prefix_space"].is_null() && !get_bool(j, at, "add_prefix_space")) {
      if (prepend) at.fail("add_prefix_space false does not match prepend_scheme");
    }
    return std::make_shared<MetaspaceDecoder>(get_char(j, at, "replacement"), prepend);
  }
  if (type == "Replace") {
    check_fields(j, at, {"type", "pattern", "content"});
    return std::make_shared<ReplaceDecoder>(get_pattern(j, at, "pattern"), get_string(j, at, "content"));
  }
  if (type == "ByteFallback") {
    check_fields(j, at, {"type"});
    return std::make_shared<ByteFallbackDecoder>();
  }
  if (type == "Fuse") {
    check_fields(j, at, {"type"});
    return std::make_shared<FuseDecoder>();
  }
  if (type == "Strip") {
    check_fields(j, at, {"type", "content", "start", "stop"});
    auto count = [&](const char* key) -> size_t {
      if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0)
        (at / key).fail("expected a count");
      return j[key].get<size_t>();
    };
    return std::make_shared<StripDecoder>(get_char(j, at, "content"), count("start"), count("stop"));
  }
  if (type == "BPEDecoder") {
    check_fields(j, at, {"type", "suffix"});
    return std::make_shared<BpeDecoder>(get_optional_string(j, at, "suffix").value_or("</w>"));
  }
  if (type == "WordPiece") {
    check_fields(j, at, {"type", "prefix", "cleanup"});
    return std::make_shared<WordPieceDecoder>(get_optional_string(j, at, "prefix").value_or("##"),
                                              get_bool(j, at, "cleanup", true));
  }
  at.fail("decoder type \"" + type +
          "\" is not supported (wgtrain reads Sequence, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, "
          "BPEDecoder, WordPiece)");
}

}  // namespace wgtrain::tok
