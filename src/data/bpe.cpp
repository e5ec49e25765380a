#include "wgtrain/bpe.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "wgtrain/error.h"

namespace wgtrain {

namespace {

enum class Class { Space, Letter, Digit, Other };

Class class_of(unsigned char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') return Class::Space;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80 || c == '\'') return Class::Letter;
  if (c >= '0' && c <= '9') return Class::Digit;
  return Class::Other;
}

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

}  // namespace

std::vector<std::string_view> bpe_pieces(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && class_of(static_cast<unsigned char>(text[i])) == Class::Space) ++i;
    if (i == text.size()) {  // trailing spaces form a piece of their own
      out.push_back(text.substr(start));
      break;
    }
    const Class c = class_of(static_cast<unsigned char>(text[i]));
    while (i < text.size() && class_of(static_cast<unsigned char>(text[i])) == c) ++i;
    out.push_back(text.substr(start, i - start));
  }
  return out;
}

BpeTokenizer BpeTokenizer::train(std::string_view text, int vocab_size) {
  if (vocab_size < 256) throw ArgumentError("BPE vocab_size must be at least 256, got " + std::to_string(vocab_size));
  // Distinct pieces with their counts; each is a sequence of ids that merges rewrite in place.
  std::unordered_map<std::string_view, int64_t> freq;
  for (auto p : bpe_pieces(text)) ++freq[p];
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  std::vector<std::pair<std::string_view, int64_t>> sorted(freq.begin(), freq.end());
  std::sort(sorted.begin(), sorted.end());  // a fixed order: training does not depend on hashing
  for (const auto& [piece, n] : sorted) {
    std::vector<int32_t> w;
    for (unsigned char ch : piece) w.push_back(ch);
    words.push_back(std::move(w));
    counts.push_back(n);
  }
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

  BpeTokenizer tok;
  while (tok.vocab_size() < vocab_size && !ranked.empty()) {
    const auto [neg, key] = *ranked.begin();
    if (-neg < 2) break;
    const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xffffffffu);
    const int32_t id = tok.vocab_size();
    tok.merges_.emplace_back(a, b);
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
  tok.rebuild();
  return tok;
}

void BpeTokenizer::rebuild() {
  bytes_.assign(256, {});
  for (int i = 0; i < 256; ++i) bytes_[i] = std::string(1, static_cast<char>(i));
  for (const auto& [a, b] : merges_) {
    if (a < 0 || b < 0 || a >= static_cast<int32_t>(bytes_.size()) || b >= static_cast<int32_t>(bytes_.size()))
      throw Error("BPE merge (" + std::to_string(a) + ", " + std::to_string(b) + ") refers to an id not yet made");
    bytes_.push_back(bytes_[a] + bytes_[b]);
  }
  rank_.clear();
  for (size_t i = 0; i < merges_.size(); ++i)
    rank_[pair_key(merges_[i].first, merges_[i].second)] = static_cast<int32_t>(i);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  for (auto piece : bpe_pieces(text)) {
    auto hit = cache.find(piece);
    if (hit == cache.end()) {
      std::vector<int32_t> w;
      for (unsigned char ch : piece) w.push_back(ch);
      // Apply the earliest-learned merge present, until none is.
      while (w.size() > 1) {
        int32_t best = -1;
        for (size_t k = 0; k + 1 < w.size(); ++k) {
          auto r = rank_.find(pair_key(w[k], w[k + 1]));
          if (r != rank_.end() && (best < 0 || r->second < best)) best = r->second;
        }
        if (best < 0) break;
        const auto [a, b] = merges_[best];
        std::vector<int32_t> merged;
        for (size_t k = 0; k < w.size(); ++k) {
          if (k + 1 < w.size() && w[k] == a && w[k + 1] == b) {
            merged.push_back(256 + best);
            ++k;
          } else {
            merged.push_back(w[k]);
          }
        }
        w = std::move(merged);
      }
      hit = cache.emplace(piece, std::move(w)).first;
    }
    out.insert(out.end(), hit->second.begin(), hit->second.end());
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw ArgumentError("token id " + std::to_string(id) + " is outside the vocabulary of " +
                          std::to_string(vocab_size()));
    out += bytes_[id];
  }
  return out;
}

void BpeTokenizer::save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "wgtrain-bpe-1";
  j["pieces"] = "letters|digits|other, with leading spaces";
  j["merges"] = nlohmann::json::array();
  for (const auto& [a, b] : merges_) j["merges"].push_back({a, b});
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump() << "\n";
    if (!f) throw Error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot rename " + tmp + " to " + path);
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error("cannot open tokenizer '" + path + "'");
  BpeTokenizer tok;
  try {
    const auto j = nlohmann::json::parse(f);
    if (j.value("format", "") != "wgtrain-bpe-1") throw Error("not a wgtrain-bpe-1 file");
    for (const auto& m : j.at("merges")) tok.merges_.emplace_back(m.at(0).get<int32_t>(), m.at(1).get<int32_t>());
  } catch (const nlohmann::json::exception& e) {
    throw Error("tokenizer '" + path + "' is malformed: " + e.what());
  } catch (const Error& e) {
    throw Error("tokenizer '" + path + "' is malformed: " + e.what());
  }
  tok.rebuild();
  return tok;
}

}  // namespace wgtrain
