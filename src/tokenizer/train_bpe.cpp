// wgtrain's own byte-level BPE trainer, writing a standard tokenizer.json.
//
// Text is cut into pieces by a Split regex: a run of letters (ASCII letters, the apostrophe, and every non-ASCII
// character), a run of digits, or a run of other characters, each with the ASCII whitespace before it; whitespace at
// the very end is a piece of its own. Then ByteLevel (no regex) maps each piece's bytes to GPT-2's printable
// stand-ins, and BPE merges within pieces. Ids 0..255 are the bytes, so a piece that no merge touches encodes as its
// bytes. Training repeatedly merges the most frequent adjacent pair across the corpus, ties broken by the smaller
// pair of ids, so it is deterministic.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "tokenizer/pipeline.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "wgtrain/error.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {

namespace {

// The pieces of train_bpe's tokenizers, as an Oniguruma (and PCRE2) pattern. Only \x escapes, so that both engines
// (and Rust's regex, should `tokenizers` be built with it) read it alike.
constexpr const char* kPieceRegex =
    "[\\x09-\\x0D\\x20]*(?:[\\x27\\x41-\\x5A\\x61-\\x7A\\x{80}-\\x{10FFFF}]+|[\\x30-\\x39]+|"
    "[\\x00-\\x08\\x0E-\\x1F\\x21-\\x26\\x28-\\x2F\\x3A-\\x40\\x5B-\\x60\\x7B-\\x7F]+)|[\\x09-\\x0D\\x20]+";

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

}  // namespace

Tokenizer train_bpe(std::string_view raw_text, int vocab_size, const std::vector<std::string>& special_tokens) {
  const int specials = static_cast<int>(special_tokens.size());
  if (vocab_size - specials < 256)
    throw ArgumentError("BPE vocab_size must be at least 256 plus the " + std::to_string(specials) +
                        " special tokens, got " + std::to_string(vocab_size));
  vocab_size -= specials;  // the special tokens take the last ids
  const std::string text = tok::utf8_lossy(raw_text);  // what Hugging Face's library would be given

  // Distinct pieces with their counts; each is a sequence of ids that merges rewrite in place.
  const tok::Regex piece_re(kPieceRegex);
  std::unordered_map<std::string_view, int64_t> freq;
  for (const auto& [span, is_match] : tok::find_matches(piece_re, text))
    ++freq[std::string_view(text).substr(span.first, span.second - span.first)];
  std::vector<std::pair<std::string_view, int64_t>> sorted(freq.begin(), freq.end());
  std::sort(sorted.begin(), sorted.end());  // a fixed order: training does not depend on hashing
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [piece, n] : sorted) {
    words.emplace_back(piece.begin(), piece.end());
    for (auto& id : words.back()) id = static_cast<unsigned char>(id);
    counts.push_back(n);
  }

  // The vocabulary: the 256 bytes as their ByteLevel stand-ins, then what merges make.
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int32_t> token_id;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(tok::byte_char(static_cast<uint8_t>(b)));
    token_id.emplace(tokens.back(), b);
  }
  std::vector<std::pair<int32_t, int32_t>> merges;

  // Pair counts, ranked (highest count first, then the smaller pair of ids), and which words hold each pair.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::set<std::pair<int64_t, uint64_t>> ranked;  // (-count, pair)
  std::unordered_map<uint64_t, std::set<size_t>> where;
  auto bump = [&](uint64_t key, int64_t delta) {
    int64_t& n = pair_count[key];
    if (n > 0) ranked.erase({-n, key});
    n += delta;
    if (n > 0) ranked.insert({-n, key});
  };
  auto add_word = [&](size_t wi, int64_t sign) {
    const auto& w = words[wi];
    for (size_t k = 0; k + 1 < w.size(); ++k) {
      const uint64_t key = pair_key(w[k], w[k + 1]);
      bump(key, sign * counts[wi]);
      if (sign > 0) where[key].insert(wi);
    }
  };
  for (size_t wi = 0; wi < words.size(); ++wi) add_word(wi, +1);

  while (static_cast<int>(tokens.size()) < vocab_size && !ranked.empty()) {
    const auto [neg, key] = *ranked.begin();
    if (-neg < 2) break;
    const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xffffffffu);
    // A merge whose string some other merge already made reuses that id (tokenizer.json maps strings to ids).
    const std::string joined = tokens[a] + tokens[b];
    int32_t id;
    if (const auto it = token_id.find(joined); it != token_id.end()) {
      id = it->second;
    } else {
      id = static_cast<int32_t>(tokens.size());
      tokens.push_back(joined);
      token_id.emplace(joined, id);
    }
    merges.emplace_back(a, b);
    const std::set<size_t> affected = std::move(where[key]);
    where.erase(key);
    for (size_t wi : affected) {
      add_word(wi, -1);
      auto& w = words[wi];
      std::vector<int32_t> merged;
      for (size_t k = 0; k < w.size(); ++k) {
        if (k + 1 < w.size() && w[k] == a && w[k + 1] == b) {
          merged.push_back(id);
          ++k;
        } else {
          merged.push_back(w[k]);
        }
      }
      w = std::move(merged);
      add_word(wi, +1);
    }
  }

  using ojson = nlohmann::ordered_json;
  ojson vocab = ojson::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  ojson added = ojson::array();
  for (const std::string& t : special_tokens) {
    if (token_id.count(t)) throw ArgumentError("train_bpe: the special token '" + t + "' is an ordinary token too");
    const size_t id = tokens.size();
    tokens.push_back(t);
    token_id.emplace(t, static_cast<int32_t>(id));
    vocab[t] = id;
    added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  ojson merge_list = ojson::array();
  for (const auto& [a, b] : merges) merge_list.push_back(ojson::array({tokens[a], tokens[b]}));
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                            {"use_regex", false}};
  ojson j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         ojson::array({{{"type", "Split"},
                        {"pattern", {{"Regex", kPieceRegex}}},
                        {"behavior", "Isolated"},
                        {"invert", false}},
                       byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merge_list)}}},
  };
  return Tokenizer::from_json(j.dump(), "train_bpe tokenizer.json");
}

}  // namespace wgtrain
