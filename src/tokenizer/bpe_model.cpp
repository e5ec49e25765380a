#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/unicode.h"
#include "wgtrain/error.h"

namespace wgtrain::tok {

using nlohmann::json;

namespace {

constexpr size_t kMaxCachedWordBytes = 256;  // longer words are rare and not worth keeping
constexpr size_t kMaxCachedWords = 1 << 20;

}  // namespace

std::shared_ptr<const BpeModel> BpeModel::from_json(const json& j, const JsonPath& at, ModelTables* tables) {
  if (!j.is_object()) at.fail("expected the model object");
  const std::string type = j.contains("type") ? get_string(j, at, "type") : "BPE";
  if (type != "BPE")
    at.fail("model type \"" + type + "\" is not supported (wgtrain reads BPE models only)");
  check_fields(j, at,
               {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (j.contains("dropout") && !j["dropout"].is_null())
    (at / "dropout").fail("BPE dropout " + j["dropout"].dump() + " is not supported (it makes encoding random)");
  Options opt;
  opt.unk_token = get_optional_string(j, at, "unk_token");
  opt.continuing_subword_prefix = get_optional_string(j, at, "continuing_subword_prefix");
  opt.end_of_word_suffix = get_optional_string(j, at, "end_of_word_suffix");
  opt.fuse_unk = get_bool(j, at, "fuse_unk", false);
  opt.byte_fallback = get_bool(j, at, "byte_fallback", false);
  opt.ignore_merges = get_bool(j, at, "ignore_merges", false);

  auto bad_id = [&](const std::string& token, const std::string& id) {
    (at / "vocab").fail("token \"" + token + "\" has a bad id " + id);
  };
  TokenMap vocab;
  if (tables && tables->has_vocab) {
    vocab.reserve(tables->vocab.size());
    for (auto& [token, id] : tables->vocab) {
      if (id < 0 || id > INT32_MAX) bad_id(token, std::to_string(id));
      vocab.insert_or_assign(token, static_cast<int32_t>(id));
    }
  } else {
    if (!j.contains("vocab") || !j["vocab"].is_object()) at.fail("missing the \"vocab\" object");
    vocab.reserve(j["vocab"].size());
    for (const auto& [token, id] : j["vocab"].items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) bad_id(token, id.dump());
      vocab.insert_or_assign(token, id.get<int32_t>());
    }
  }

  std::vector<std::pair<std::string, std::string>> merges;
  if (tables && tables->has_merges) {
    merges = std::move(tables->merges);
  } else {
    if (!j.contains("merges") || !j["merges"].is_array()) at.fail("missing the \"merges\" list");
    const json& m = j["merges"];
    merges.reserve(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      const json& e = m[i];
      if (e.is_string()) {  // "a b"
        const std::string& s = e.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          (at / "merges")[i].fail("merge \"" + s + "\" is not two tokens separated by one space");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        (at / "merges")[i].fail("expected \"a b\" or [\"a\", \"b\"], got " + e.dump().substr(0, 80));
      }
    }
  }
  return std::make_shared<BpeModel>(std::move(vocab), merges, std::move(opt), at);
}

BpeModel::BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   Options options, const JsonPath& at)
    : vocab_(std::move(vocab)), opt_(std::move(options)) {
  int32_t max_id = -1;
  vocab_.for_each([&](std::string_view, int32_t id) { max_id = std::max(max_id, id); });
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  vocab_.for_each([&](std::string_view token, int32_t id) {
    // Two tokens with one id: keep the smaller string, so the choice does not depend on hashing.
    if (has_id_[id] && id_to_token_[id] < token) return;
    id_to_token_[id] = token;
    has_id_[id] = true;
  });

  const size_t prefix_len = opt_.continuing_subword_prefix ? opt_.continuing_subword_prefix->size() : 0;
  merges_.reserve(merges.size());
  std::string joined;
  int32_t last_joined = -2;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia < 0) (at / "merges")[rank].fail("token \"" + a + "\" of a merge is not in the vocabulary");
    if (ib < 0) (at / "merges")[rank].fail("token \"" + b + "\" of a merge is not in the vocabulary");
    // The merged token: b loses the continuing-subword prefix.
    joined.assign(a);
    joined.append(b, std::min(prefix_len, b.size()), std::string::npos);
    // Trained vocabularies mostly number merged tokens in merge order: try the id after the last one first.
    const int32_t guess = last_joined + 1;
    const int32_t ij = guess >= 0 && static_cast<size_t>(guess) < id_to_token_.size() && has_id_[guess] &&
                               id_to_token_[guess] == joined
                           ? guess
                           : vocab_.find(joined);
    last_joined = ij;
    if (ij < 0) (at / "merges")[rank].fail("token \"" + joined + "\" made by a merge is not in the vocabulary");
    // A pair listed twice takes its later rank, as in `tokenizers` (a map built in order).
    merges_.insert_or_assign(ia, ib, PairMap::Value{static_cast<int32_t>(rank), ij});
  }

  if (opt_.byte_fallback) {
    byte_ids_.assign(256, -1);
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      byte_ids_[b] = vocab_.find(name);
    }
  }
  if (opt_.unk_token)
    if (const int32_t id = vocab_.find(*opt_.unk_token); id >= 0) unk_id_ = id;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const int32_t id = vocab_.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    if (const int32_t id = vocab_.find(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_->mutex);
    if (const auto it = cache_->words.find(word); it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_->mutex);
    if (cache_->words.size() < kMaxCachedWords)
      cache_->words.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t c;
    int32_t prev, next;
    uint32_t len;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(w.size());
  auto add = [&](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back(Symbol{id, n - 1, -1, static_cast<uint32_t>(len)});
  };

  // One symbol per character (or its byte tokens, or unk), as BPE::merge_word builds it.
  // A pending unk token and the bytes it covers (fuse_unk grows it).
  bool has_unk = false;
  int32_t unk_id = 0;
  size_t unk_len = 0;
  std::string s;
  size_t i = 0;
  while (i < w.size()) {
    const size_t begin = i;
    i = std::min(i + utf8_length(static_cast<unsigned char>(w[i])), w.size());
    const size_t byte_len = i - begin;
    s.assign(w.substr(begin, byte_len));
    if (begin != 0 && opt_.continuing_subword_prefix) s.insert(0, *opt_.continuing_subword_prefix);
    if (i == w.size() && opt_.end_of_word_suffix) s += *opt_.end_of_word_suffix;

    if (const int32_t id = vocab_.find(s); id >= 0) {
      if (has_unk) {
        add(unk_id, unk_len);
        has_unk = false;
      }
      add(id, byte_len);
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (unsigned char b : s) all &= byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : s) add(byte_ids_[b], 1);
        continue;
      }
    }
    if (opt_.unk_token) {
      if (!unk_id_) throw Error("BPE unk_token \"" + *opt_.unk_token + "\" is not in the vocabulary");
      if (has_unk && opt_.fuse_unk) {
        unk_len += byte_len;
      } else {
        if (has_unk) add(unk_id, unk_len);
        has_unk = true;
        unk_id = *unk_id_;
        unk_len = byte_len;
      }
    }
    // Without an unk token an unknown character is dropped, as in `tokenizers`.
  }
  if (has_unk) add(unk_id, unk_len);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t k = 0; k + 1 < symbols.size(); ++k)
    if (const PairMap::Value* m = merges_.find(symbols[k].c, symbols[k + 1].c))
      queue.push(Candidate{m->rank, static_cast<int32_t>(k), m->id});

  const auto n = static_cast<int32_t>(symbols.size());
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = symbols[next_pos];
    // A stale entry: the pair at this place changed since it was queued.
    const PairMap::Value* m = merges_.find(cur.c, right.c);
    if (!m || m->id != top.id) continue;
    cur.c = top.id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && right.next < n) symbols[right.next].prev = top.pos;
    if (cur.prev >= 0)
      if (const PairMap::Value* pm = merges_.find(symbols[cur.prev].c, cur.c)) queue.push(Candidate{pm->rank, cur.prev, pm->id});
    if (cur.next > -1 && cur.next < n)
      if (const PairMap::Value* nm = merges_.find(cur.c, symbols[cur.next].c)) queue.push(Candidate{nm->rank, top.pos, nm->id});
  }
  for (const Symbol& sym : symbols)
    if (sym.len != 0) out.push_back(sym.c);
}

}  // namespace wgtrain::tok
