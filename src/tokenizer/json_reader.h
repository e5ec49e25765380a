// Reading tokenizer.json fast. Nearly all of a large tokenizer.json is the model's "vocab" object and "merges" list
// (Llama 3: 9 MB, 128k tokens, 280k merges); building a generic JSON tree of them takes most of a second. So a
// small dedicated scanner reads those two into plain vectors, and nlohmann::json parses the rest (the text with
// those two values replaced by {} and []).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgtrain::tok {

struct ModelTables {
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;       // in file order
  std::vector<std::pair<std::string, std::string>> merges;  // by rank: "a b" and ["a", "b"] alike
};

// The parsed file, with model.vocab and model.merges moved into `tables` (and left as {} / [] in the tree).
// Throws Error naming `origin` on text that is not valid JSON.
nlohmann::json parse_tokenizer_json(std::string_view text, const std::string& origin, ModelTables& tables);

}  // namespace wgtrain::tok
