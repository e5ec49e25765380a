// Added tokens (special or not) on top of the model's vocabulary, and how `tokenizers` finds them in a text:
// leftmost-longest matching of their contents, non-normalized tokens in the raw text and normalized ones in the
// normalized pieces, with the single_word, lstrip and rstrip rules applied to each match.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pipeline.h"

namespace wgtrain::tok {

struct AddedToken {
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
  bool operator==(const AddedToken&) const = default;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // The "added_tokens" list of tokenizer.json; ids are given as `tokenizers` gives them (the model's id of the same
  // content, else the next free id after the model's vocabulary), whatever the file's "id" fields say.
  AddedVocabulary(const nlohmann::json& list, const JsonPath& at, const BpeModel& model, const Normalizer* normalizer);

  // A part of a text: an added token's id, or -1 for text between tokens.
  struct Segment {
    Span span;
    int32_t id;
  };
  // The segments of `text`, covering it, for the tokens that match the raw text (normalized = false) or for those
  // that match normalized text.
  std::vector<Segment> split(std::string_view text, bool normalized_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  // The string decoding sees: the normalized form of a normalized token, else its content.
  const std::string* id_to_token(int32_t id) const;
  const AddedToken* token(int32_t id) const;
  bool is_special_token(std::string_view s) const { return special_.count(std::string(s)) != 0; }
  int64_t max_id() const { return max_id_; }
  const std::unordered_map<int32_t, AddedToken>& tokens() const { return by_id_; }

 private:
  // A byte trie of the token strings, for leftmost-longest matching.
  struct Trie {
    std::vector<std::unordered_map<unsigned char, int32_t>> next{1};
    std::vector<int32_t> value{-1};  // the token id ending at a node, or -1
    bool first_byte[256] = {};
    bool empty = true;
    void insert(std::string_view s, int32_t id);
  };
  Trie raw_, normalized_;
  std::unordered_map<std::string, int32_t> by_content_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> normalized_form_;
  std::unordered_set<std::string> special_;
  int64_t max_id_ = -1;
};

}  // namespace wgtrain::tok
