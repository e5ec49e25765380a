// The BPE model of tokenizer.json: a vocabulary, ranked merges, and the options of `tokenizers`' BPE
// (unk_token, fuse_unk, byte_fallback, continuing_subword_prefix, end_of_word_suffix, ignore_merges).
// Words are merged as `tokenizers` merges them: the lowest-ranked pair first, the leftmost among equals, through a
// priority queue (no rescans of long words), and each word's result is cached.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_map.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/pipeline.h"

namespace wgtrain::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    std::optional<std::string> unk_token;
    std::optional<std::string> continuing_subword_prefix;
    std::optional<std::string> end_of_word_suffix;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
  };

  // The "model" object of tokenizer.json; its vocab and merges from `tables` where the reader took them out.
  static std::shared_ptr<const BpeModel> from_json(const nlohmann::json& j, const JsonPath& at,
                                                   ModelTables* tables = nullptr);
  // A vocabulary (token -> id) and merges (pairs of tokens, by rank).
  BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, Options options,
           const JsonPath& at);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when no token has this id
  size_t size() const { return vocab_.size(); }       // entries, as `tokenizers`' get_vocab_size
  int64_t max_id() const { return static_cast<int64_t>(id_to_token_.size()) - 1; }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  TokenMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  PairMap merges_;
  Options opt_;
  std::optional<int32_t> unk_id_;
  std::vector<int32_t> byte_ids_;  // ids of "<0x00>".."<0xFF>" (byte_fallback), -1 where absent

  // Results per word: encoding a corpus meets the same words again and again.
  struct Cache {
    std::shared_mutex mutex;
    StringMap<std::vector<int32_t>> words;
  };
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace wgtrain::tok
