#include "tokenizer/added_vocab.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace wgtrain::tok {

using nlohmann::json;

void AddedVocabulary::Trie::insert(std::string_view s, int32_t id) {
  if (s.empty()) return;
  int32_t node = 0;
  for (unsigned char b : s) {
    const auto it = next[node].find(b);
    if (it != next[node].end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(next.size());
      next[node].emplace(b, child);
      next.emplace_back();
      value.push_back(-1);
      node = child;
    }
  }
  value[node] = id;
  first_byte[static_cast<unsigned char>(s[0])] = true;
  empty = false;
}

AddedVocabulary::AddedVocabulary(const json& list, const JsonPath& at, const BpeModel& model,
                                 const Normalizer* normalizer) {
  if (list.is_null()) return;
  if (!list.is_array()) at.fail("expected a list of added tokens");
  const auto model_size = static_cast<int64_t>(model.size());
  int64_t next_id = model_size;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const JsonPath here = at[i];
    check_fields(t, here, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken tok;
    tok.content = get_string(t, here, "content");
    tok.single_word = get_bool(t, here, "single_word", false);
    tok.lstrip = get_bool(t, here, "lstrip", false);
    tok.rstrip = get_bool(t, here, "rstrip", false);
    tok.normalized = get_bool(t, here, "normalized", true);
    tok.special = get_bool(t, here, "special", false);
    if (tok.content.empty()) continue;
    if (const auto it = by_content_.find(tok.content); it != by_content_.end() && by_id_[it->second] == tok) continue;

    int64_t id;
    if (const auto known = token_to_id(tok.content))
      id = *known;
    else if (const auto in_model = model.token_to_id(tok.content))
      id = *in_model;
    else
      id = next_id++;
    if (id > INT32_MAX) here.fail("too many added tokens");
    const auto id32 = static_cast<int32_t>(id);
    if (tok.normalized && normalizer) {
      std::string normed = tok.content;
      normalizer->normalize(normed);
      if (normed != tok.content) normalized_form_[id32] = std::move(normed);
    }
    by_content_[tok.content] = id32;
    if (tok.special) special_.insert(tok.content);
    by_id_[id32] = std::move(tok);
    max_id_ = std::max(max_id_, id);
  }
  for (const auto& [id, tok] : by_id_) {
    if (tok.normalized) {
      const auto n = normalized_form_.find(id);
      normalized_.insert(n != normalized_form_.end() ? std::string_view(n->second) : std::string_view(tok.content), id);
    } else {
      raw_.insert(tok.content, id);
    }
  }
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const std::string* AddedVocabulary::id_to_token(int32_t id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  const auto n = normalized_form_.find(id);
  return n != normalized_form_.end() ? &n->second : &it->second.content;
}

const AddedToken* AddedVocabulary::token(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

namespace {

// The last character of s is a \w character (the single_word rule's test).
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  return is_word_char(next_code_point(s, i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(next_code_point(s, i));
}

// Where the whitespace that ends s begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_whitespace(next_code_point(s, i))) break;
    end = start;
  }
  return end;
}

// How many bytes of whitespace start s.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_whitespace(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text, bool normalized_tokens) const {
  std::vector<Segment> out;
  const Trie& trie = normalized_tokens ? normalized_ : raw_;
  if (trie.empty || text.empty()) {
    out.push_back({{0, text.size()}, -1});
    return out;
  }
  size_t start_offset = 0;  // where the text not yet given to a segment begins
  size_t pos = 0;           // where the search for the next match begins
  while (pos < text.size()) {
    // The longest token starting at the leftmost position that starts one.
    size_t match_start = pos, match_len = 0;
    int32_t match_id = -1;
    for (; match_start < text.size(); ++match_start) {
      if (!trie.first_byte[static_cast<unsigned char>(text[match_start])]) continue;
      int32_t node = 0;
      for (size_t k = match_start; k < text.size(); ++k) {
        const auto it = trie.next[node].find(static_cast<unsigned char>(text[k]));
        if (it == trie.next[node].end()) break;
        node = it->second;
        if (trie.value[node] >= 0) {
          match_len = k + 1 - match_start;
          match_id = trie.value[node];
        }
      }
      if (match_id >= 0) break;
    }
    if (match_id < 0) break;
    pos = match_start + match_len;  // the search goes on after the match, whatever the rules below make of it

    size_t start = match_start, stop = match_start + match_len;
    const AddedToken& tok = by_id_.at(match_id);
    if (tok.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({{start_offset, start}, -1});
    out.push_back({{start, stop}, match_id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({{start_offset, text.size()}, -1});
  return out;
}

}  // namespace wgtrain::tok
