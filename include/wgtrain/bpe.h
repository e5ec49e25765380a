// A byte-level BPE tokenizer: trained on a corpus by the project, saved and loaded as JSON.
//
// Text is split into pieces before merging: a run of letters, a run of digits, or a run of other non-space bytes,
// each with the spaces before it attached (" the", " 1999", " ,"). Bytes >= 0x80 count as letters, so UTF-8 words
// stay whole. Every piece starts as its bytes (ids 0..255); training repeatedly merges the most frequent adjacent
// pair across the corpus (ties broken by the smaller pair of ids, so training is deterministic) into a new id.
// Encoding applies the merges in the order they were learned. Any byte string encodes, and decodes back exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wgtrain {

class BpeTokenizer {
 public:
  // Learns merges until the vocabulary holds vocab_size ids (>= 256), or no pair occurs twice.
  static BpeTokenizer train(std::string_view text, int vocab_size);
  static BpeTokenizer load(const std::string& path);  // throws Error on a malformed file
  void save(const std::string& path) const;           // atomic: temporary file, then rename

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // throws ArgumentError on an unknown id
  int vocab_size() const { return 256 + static_cast<int>(merges_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  std::vector<std::pair<int32_t, int32_t>> merges_;  // merges_[i] makes id 256 + i
  std::vector<std::string> bytes_;                   // the bytes of each id
  std::unordered_map<uint64_t, int32_t> rank_;       // (a << 32 | b) -> merge index
  void rebuild();
};

// Splits text into the pieces BPE merges within (see above).
std::vector<std::string_view> bpe_pieces(std::string_view text);

}  // namespace wgtrain
