// The parts of a Hugging Face tokenizer, each built from its object in tokenizer.json: normalizers, pre-tokenizers,
// the BPE model, post-processors and decoders, with the semantics of the `tokenizers` library (0.23). Offsets are not
// tracked: wgtrain needs ids and text, and the one place where `tokenizers` consults an offset (Metaspace's
// prepend_scheme "first") only asks whether a piece starts at the beginning of the input (Piece::at_origin).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/regex.h"

namespace wgtrain::tok {

// Where in which file a JSON value sits, for error messages: "tokenizer.json: pre_tokenizer.pretokenizers[0]: ...".
class JsonPath {
 public:
  JsonPath(std::string origin, std::string path) : origin_(std::move(origin)), path_(std::move(path)) {}
  JsonPath operator/(std::string_view key) const {
    return {origin_, path_.empty() ? std::string(key) : path_ + "." + std::string(key)};
  }
  JsonPath operator[](size_t i) const { return {origin_, path_ + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const;
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }

 private:
  std::string origin_, path_;
};

// Typed reads of a component's fields, failing with the path on a missing or mistyped field; `known` lists the
// fields a component understands, and any other is an error (never a silently different tokenizer).
void check_fields(const nlohmann::json& j, const JsonPath& at, std::initializer_list<const char*> known);
std::string get_string(const nlohmann::json& j, const JsonPath& at, const char* key);
std::optional<std::string> get_optional_string(const nlohmann::json& j, const JsonPath& at, const char* key);
bool get_bool(const nlohmann::json& j, const JsonPath& at, const char* key, std::optional<bool> fallback = {});
char32_t get_char(const nlohmann::json& j, const JsonPath& at, const char* key);
// A {"String": s} or {"Regex": r} pattern.
Regex get_pattern(const nlohmann::json& j, const JsonPath& at, const char* key);

// A part of the input between added tokens, on its way through normalizer, pre-tokenizer and model.
struct Piece {
  std::string text;
  bool at_origin = false;  // starts at byte 0 of the input
};

// How a split keeps its delimiters (SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior parse_behavior(const nlohmann::json& j, const JsonPath& at);
// NormalizedString::split: the pieces of `piece` given the flagged spans of its text.
void split_piece(Piece&& piece, const std::vector<std::pair<Span, bool>>& matches, SplitBehavior behavior,
                 std::vector<Piece>& out);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits (empty ones dropped).
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The ids of one sequence as the post-processor returns them.
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
  // The special tokens it puts before and after a single sequence (to tell BOS and EOS).
  virtual void single_specials(std::vector<int32_t>& /*before*/, std::vector<int32_t>& /*after*/) const {}
};

// Each returns nullptr for a JSON null (the part is absent) and throws Error for what it does not know.
std::shared_ptr<const Normalizer> make_normalizer(const nlohmann::json& j, const JsonPath& at);
std::shared_ptr<const PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const JsonPath& at);
std::shared_ptr<const Decoder> make_decoder(const nlohmann::json& j, const JsonPath& at);
std::shared_ptr<const PostProcessor> make_post_processor(const nlohmann::json& j, const JsonPath& at);

// GPT-2's byte-to-character table of the ByteLevel parts: each byte as the UTF-8 of its printable stand-in.
const std::string& byte_char(uint8_t b);
// The byte a stand-in character stands for, or -1.
int char_byte(char32_t c);

// A post-processor that puts fixed ids around the sequence: load_dir's add_bos_token / add_eos_token.
std::shared_ptr<const PostProcessor> make_bos_eos_processor(std::optional<int32_t> bos, std::optional<int32_t> eos);

}  // namespace wgtrain::tok
