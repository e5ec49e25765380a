// The Hugging Face tokenizer: hand-checkable encodings of small tokenizer.json files and of the real Llama 2, Llama 3,
// Qwen3 and Qwen2.5 vocabularies, added-token matching, decoding (U+FFFD for broken UTF-8), streaming, the model
// directory's config files, errors for what is not supported, and speed.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <atomic>
#include <random>
#include <thread>
#include <sys/wait.h>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "wgtrain/corpus.h"
#include "wgtrain/error.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// Where scripts/setup.sh put a real tokenizer ("llama2", "llama3", "qwen3", "qwen2_5").
fs::path real_dir(const std::string& name) {
  const fs::path base = fs::path(WGTRAIN_TOKENIZERS_DIR) / ("tokenizer-" + name);
  for (const fs::path& d : {base / "models", base / "package" / "models"})
    if (fs::exists(d / "tokenizer.json")) return d;
  return {};
}

// The real tokenizers are large; each is loaded once.
const Tokenizer& real(const std::string& name) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const fs::path d = real_dir(name);
    if (d.empty()) throw Error("real tokenizer " + name + " not installed (run scripts/setup.sh)");
    it = cache.emplace(name, Tokenizer::load_dir(d.string())).first;
  }
  return it->second;
}

#define REQUIRE_REAL(name)                                                                  \
  if (real_dir(name).empty()) GTEST_SKIP() << "tokenizer-" name " not installed: run scripts/setup.sh"

// A byte-level BPE tokenizer.json in the shape of GPT-2's: the 256 byte stand-ins (ids 0..255, in byte order), a few
// merged tokens, and one special token.
json byte_level_json() {
  json vocab = json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[tok::byte_char(static_cast<uint8_t>(b))] = id++;
  // "Ġ" (U+0120) stands for the space.
  for (const char* t : {"he", "ll", "llo", "hello", "\xC4\xA0w", "\xC4\xA0wo", "\xC4\xA0wor", "\xC4\xA0worl",
                        "\xC4\xA0world"}) vocab[t] = id++;
  return {
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", id}, {"content", "<|end|>"}, {"special", true}, {"normalized", false},
                                     {"lstrip", false}, {"rstrip", false}, {"single_word", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                         {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", json::array({"h e", "l l", "ll o", "he llo", "\xC4\xA0 w", "\xC4\xA0w o", "\xC4\xA0wo r",
                                "\xC4\xA0wor l", "\xC4\xA0worl d"})}}},
  };
}

TEST(TokenizerUnicode, LossyUtf8LikeRust) {
  using tok::utf8_lossy;
  EXPECT_EQ(utf8_lossy("abc"), "abc");
  // One U+FFFD per maximal invalid subpart: a cut 3-byte sequence is one, a stray continuation byte is one each.
  EXPECT_EQ(utf8_lossy("a\xE2\x82"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98x"), "\xEF\xBF\xBDx");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate: 3 subparts
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(tok::complete_utf8_prefix("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(tok::complete_utf8_prefix("ab\xF0\x9F\x98\x80"), 6u);
}

TEST(TokenizerUnicode, NormalFormsAndLowercase) {
  EXPECT_EQ(tok::normalize("e\xCC\x81", tok::NormalForm::NFC), "\xC3\xA9");  // e + combining acute -> é
  EXPECT_EQ(tok::normalize("\xC3\xA9", tok::NormalForm::NFD), "e\xCC\x81");
  EXPECT_EQ(tok::normalize("\xEF\xAC\x81", tok::NormalForm::NFKC), "fi");  // the ligature ﬁ
  EXPECT_EQ(tok::lowercase("ÀB\xCE\xA3x"), "àb\xCF\x83x");                  // Σ alone -> σ, no final-sigma rule
  EXPECT_EQ(tok::lowercase("\xC4\xB0"), "i\xCC\x87");                        // İ -> i + combining dot
}

TEST(TokenizerRegex, OnigurumaSemantics) {
  std::vector<tok::Span> m;
  // \s is Oniguruma's (no U+180E), \p{L} letters of any script.
  tok::Regex("\\s+").find_all("a \xE1\xA0\x8E b", m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], tok::Span(1, 2));
  tok::Regex("\\p{L}+").find_all("héllo мир 42", m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1], tok::Span(7, 13));
  // Empty matches as the onig crate yields them: the one right after a non-empty match is dropped.
  tok::Regex("a*").find_all("baab", m);
  const std::vector<tok::Span> want = {{0, 0}, {1, 3}, {4, 4}};
  EXPECT_EQ(m, want);
  EXPECT_EQ(tok::Regex::translate("[^\\s\\p{L}]"), "[^\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}\\p{L}]");
  EXPECT_THROW(tok::Regex("(unclosed"), Error);
}

TEST(TokenizerBasic, ByteLevelEncodeAndDecode) {
  const Tokenizer t = Tokenizer::from_json(byte_level_json().dump());
  const auto id = [&](const char* s) { return t.token_to_id(s).value(); };
  EXPECT_EQ(t.encode("hello world"), (Ids{id("hello"), id("\xC4\xA0world")}));
  // Merges apply lowest rank first: "hell" has no merge for "he"+"ll", so it stays he, ll.
  EXPECT_EQ(t.encode("hell"), (Ids{id("he"), id("ll")}));
  EXPECT_EQ(t.encode("hello<|end|>hello"), (Ids{id("hello"), id("<|end|>"), id("hello")}));
  EXPECT_EQ(t.decode(t.encode("hello world\nhe!")), "hello world\nhe!");
  EXPECT_TRUE(t.is_special(id("<|end|>")));
  EXPECT_EQ(t.decode(t.encode("hello<|end|>"), true), "hello");
  EXPECT_EQ(t.vocab_size(), id("<|end|>") + 1);
  EXPECT_EQ(t.eos_token(), "");  // "<|end|>" is not a conventional name, and no post-processor says
  EXPECT_THROW(t.decode(Ids{static_cast<int32_t>(t.vocab_size())}), ArgumentError);
  EXPECT_THROW(t.decode(Ids{-1}), ArgumentError);
  EXPECT_EQ(t.encode(""), Ids{});
}

TEST(TokenizerBasic, MergesInPairFormAndIgnoreMerges) {
  json j = byte_level_json();
  json pairs = json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["model"]["merges"] = pairs;
  const Tokenizer a = Tokenizer::from_json(j.dump());
  EXPECT_EQ(a.encode("hello world"), Tokenizer::from_json(byte_level_json().dump()).encode("hello world"));
  // With ignore_merges a word that is a token is that token, even where merges would not make it.
  j["model"]["vocab"]["hell"] = 999;
  EXPECT_NE(Tokenizer::from_json(j.dump()).encode("hell"), Ids{999});
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("hell"), Ids{999});
}

TEST(TokenizerBasic, AddedTokenRules) {
  json j = byte_level_json();
  const int next = j["model"]["vocab"].size() + 1;
  auto added = [](int id, const char* content, bool single_word, bool lstrip, bool rstrip) {
    return json{{"id", id},         {"content", content}, {"special", false},      {"normalized", false},
                {"lstrip", lstrip}, {"rstrip", rstrip},   {"single_word", single_word}};
  };
  j["added_tokens"].push_back(added(next, "wor", true, false, false));
  j["added_tokens"].push_back(added(next + 1, "[L]", false, true, false));
  j["added_tokens"].push_back(added(next + 2, "[R]", false, false, true));
  const Tokenizer t = Tokenizer::from_json(j.dump());
  const auto id = [&](const char* s) { return t.token_to_id(s).value(); };
  EXPECT_EQ(t.encode("wor"), Ids{next});
  // single_word: "wor" inside "world" is no match.
  EXPECT_EQ(t.encode("world").size(), 5u);
  // lstrip eats the spaces before, rstrip the spaces after.
  EXPECT_EQ(t.encode("he  [L]"), (Ids{id("he"), next + 1}));
  EXPECT_EQ(t.encode("[R]  he"), (Ids{next + 2, id("he")}));
  // The longest token at the leftmost place wins.
  json k = byte_level_json();
  k["added_tokens"].push_back(added(next, "<|e", false, false, false));
  const Tokenizer u = Tokenizer::from_json(k.dump());
  EXPECT_EQ(u.encode("<|end|><|e"), (Ids{u.token_to_id("<|end|>").value(), next}));
}

// The two passes of AddedVocabulary::extract_and_normalize: tokens in the raw text, then (after normalizing each
// part between them) tokens in the normalized parts. Returns each part with its token id, or -1.
std::vector<std::pair<std::string, int>> extract(const json& added, const json& normalizer, const std::string& text) {
  const tok::JsonPath at("t", "");
  const auto norm = tok::make_normalizer(normalizer, at);
  const tok::BpeModel model(tok::TokenMap{}, {}, {}, at);
  const tok::AddedVocabulary v(added, at, model, norm.get());
  std::vector<std::pair<std::string, int>> out;
  for (const auto& seg : v.split(text, false)) {
    std::string part = text.substr(seg.span.first, seg.span.second - seg.span.first);
    if (seg.id >= 0) {
      out.emplace_back(part, seg.id);
      continue;
    }
    if (norm) norm->normalize(part);
    for (const auto& seg2 : v.split(part, true))
      out.emplace_back(part.substr(seg2.span.first, seg2.span.second - seg2.span.first), seg2.id);
  }
  return out;
}

json added_token(const char* content, bool special, bool lstrip = false, bool rstrip = false,
                 bool single_word = false) {
  // As AddedToken::from(content, special): special tokens are not normalized, the others are.
  return {{"content", content}, {"special", special}, {"normalized", !special}, {"lstrip", lstrip},
          {"rstrip", rstrip},   {"single_word", single_word}};
}

// The cases of tokenizers' own added_vocabulary tests, with their expected splits.
TEST(TokenizerBasic, AddedTokenCasesOfTokenizers) {
  using Parts = std::vector<std::pair<std::string, int>>;
  const json lower = {{"type", "Lowercase"}};
  EXPECT_EQ(extract(json::array({added_token("my", false, true, true), added_token("name", false),
                                 added_token("ony", false, false, false, true), added_token("[CLS]", true),
                                 added_token("[SEP]", true)}),
                    lower, "[CLS] My name is Anthony [SEP]"),
            (Parts{{"[CLS]", 3}, {" my ", 0}, {"name", 1}, {" is anthony ", -1}, {"[SEP]", 4}}));
  const json mask = json::array({added_token("<mask>", false, false, false, true)});
  EXPECT_EQ(extract(mask, lower, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
            (Parts{{"<mask>", 0}, {" my name ", -1}, {"<mask>", 0}, {" a<mask> <mask>ony ", -1}, {"<mask>", 0}}));
  EXPECT_EQ(extract(mask, lower, "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>"),
            (Parts{{"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- \xE2\x97\x8C\xCC\xB0<mask>", -1}}));
  const json strip_mask = json::array({added_token("<mask>", false, true, true, true)});
  EXPECT_EQ(extract(strip_mask, lower, "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
            (Parts{{"hi", -1}, {" <mask> ", 0}, {"there", -1}, {"\t<mask>\t", 0}, {"<mask>\xE2\x80\x80", 0}}));
}

// The BPE cases of tokenizers' own model tests: unk fusion, byte fallback, continuing-subword prefix, ignore_merges.
TEST(TokenizerBasic, BpeCasesOfTokenizers) {
  const tok::JsonPath at("t", "");
  auto model = [&](std::vector<std::pair<const char*, int>> vocab, std::vector<std::pair<std::string, std::string>> merges,
                   tok::BpeModel::Options opt) {
    tok::TokenMap v;
    for (const auto& [s, id] : vocab) v.insert_or_assign(s, id);
    return std::make_unique<tok::BpeModel>(std::move(v), merges, opt, at);
  };
  auto ids = [](const tok::BpeModel& m, const char* word) {
    Ids out;
    m.tokenize(word, out);
    return out;
  };
  tok::BpeModel::Options unk;
  unk.unk_token = "<unk>";
  const auto not_fused = model({{"<unk>", 0}, {"a", 1}, {"b", 2}}, {}, unk);
  EXPECT_EQ(ids(*not_fused, "c"), Ids{0});
  EXPECT_EQ(ids(*not_fused, "cc"), (Ids{0, 0}));
  EXPECT_EQ(ids(*not_fused, "accb"), (Ids{1, 0, 0, 2}));
  unk.fuse_unk = true;
  const auto fused = model({{"<unk>", 0}, {"a", 1}, {"b", 2}}, {}, unk);
  EXPECT_EQ(ids(*fused, "cc"), Ids{0});
  EXPECT_EQ(ids(*fused, "accb"), (Ids{1, 0, 2}));

  tok::BpeModel::Options fallback;
  fallback.unk_token = "<unk>";
  fallback.byte_fallback = true;
  const auto fb = model({{"<unk>", 0}, {"<0x61>", 1}, {"<0x0A>", 2}}, {}, fallback);
  EXPECT_EQ(ids(*fb, "c"), Ids{0});
  EXPECT_EQ(ids(*fb, "a"), Ids{1});
  EXPECT_EQ(ids(*fb, "\n"), Ids{2});

  tok::BpeModel::Options prefix;
  prefix.unk_token = "[UNK]";
  prefix.continuing_subword_prefix = "##";
  const auto pre = model({{"a", 0}, {"##b", 1}, {"##c", 2}, {"ab", 3}, {"abc", 4}}, {{"a", "##b"}, {"ab", "##c"}}, prefix);
  EXPECT_EQ(ids(*pre, "ab"), Ids{3});
  EXPECT_EQ(ids(*pre, "abc"), Ids{4});

  const std::vector<std::pair<const char*, int>> vocab = {
      {".:.:", 0}, {"\xC4\xA0" "belirtilen", 1}, {".", 2}, {":", 3}, {"bel", 4}, {"irtilen", 5}, {"\xC4\xA0", 6},
      {".:", 7}, {"belirtilen", 8}, {".:.", 9}, {"be", 10}, {"l", 11}, {"ir", 12}, {"ti", 13}, {"en", 14},
      {"irtil", 15}, {"irti", 16}, {"i", 17}, {"r", 18}, {"t", 19}, {"b", 20}, {"e", 21}, {"n", 22}};
  const std::vector<std::pair<std::string, std::string>> merges = {
      {".", ":"}, {"b", "e"}, {"be", "l"}, {"i", "r"}, {"t", "i"}, {"ir", "ti"}, {"e", "n"}, {"irti", "l"}};
  tok::BpeModel::Options ignore;
  ignore.ignore_merges = true;
  const auto with = model(vocab, merges, ignore);
  EXPECT_EQ(ids(*with, ".:.:"), Ids{0});
  EXPECT_EQ(ids(*with, "\xC4\xA0" "belirtilen"), Ids{1});
  const auto without = model(vocab, merges, {});
  EXPECT_EQ(ids(*without, ".:.:"), (Ids{7, 7}));
  EXPECT_EQ(ids(*without, "\xC4\xA0" "belirtilen"), (Ids{6, 4, 15, 14}));
}

// The ByteFallback and Strip cases of tokenizers' own decoder tests.
TEST(TokenizerBasic, DecoderCasesOfTokenizers) {
  using V = std::vector<std::string>;
  auto chain = [](const json& decoder, V tokens) {
    tok::make_decoder(decoder, tok::JsonPath("t", ""))->decode_chain(tokens);
    return tokens;
  };
  const json fb = {{"type", "ByteFallback"}};
  const std::string bad = "\xEF\xBF\xBD";
  EXPECT_EQ(chain(fb, {"Hey", "friend!"}), (V{"Hey", "friend!"}));
  EXPECT_EQ(chain(fb, {"<0x61>"}), V{"a"});
  EXPECT_EQ(chain(fb, {"<0xE5>"}), V{bad});
  EXPECT_EQ(chain(fb, {"<0xE5>", "<0x8f>"}), (V{bad, bad}));
  EXPECT_EQ(chain(fb, {"<0xE5>", "<0x8f>", "<0xab>"}), V{"\xE5\x8F\xAB"});  // 叫
  EXPECT_EQ(chain(fb, {"<0xE5>", "<0x8f>", "<0xab>", "a"}), (V{"\xE5\x8F\xAB", "a"}));
  EXPECT_EQ(chain(fb, {"<0xE5>", "<0x8f>", "a"}), (V{bad, bad, "a"}));
  EXPECT_EQ(chain({{"type", "Strip"}, {"content", "H"}, {"start", 1}, {"stop", 0}}, {"Hey", " friend!", "HHH"}),
            (V{"ey", " friend!", "HH"}));
  EXPECT_EQ(chain({{"type", "Strip"}, {"content", "y"}, {"start", 0}, {"stop", 1}}, {"Hey", " friend!"}),
            (V{"He", " friend!"}));
}

// Metaspace's prepend schemes, on the cases of tokenizers' own tests (pieces as the added-token split leaves them).
TEST(TokenizerBasic, MetaspaceCasesOfTokenizers) {
  auto run = [](const json& pre, std::vector<tok::Piece> pieces) {
    tok::make_pre_tokenizer(pre, tok::JsonPath("t", ""))->pre_tokenize(pieces);
    std::vector<std::string> out;
    for (const auto& p : pieces) out.push_back(p.text);
    return out;
  };
  using V = std::vector<std::string>;
  const std::string m = "\xE2\x96\x81";  // ▁
  const json first = {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}, {"split", false}};
  const json always = {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(run(first, {{"Hey my friend ", true}, {"<s>", false}, {"how" + m + "are you", false}}),
            (V{m + "Hey" + m + "my" + m + "friend" + m, "<s>", "how" + m + "are" + m + "you"}));
  EXPECT_EQ(run(first, {{" Hey ", true}, {"<s>", false}, {"how", false}}), (V{m + "Hey" + m, "<s>", "how"}));
  EXPECT_EQ(run(always, {{"Hey   friend!", true}}), (V{m + "Hey", m, m, m + "friend!"}));
  EXPECT_EQ(run(always, {{m + "Hey" + m + "my" + m + "friend" + m, true}, {"<s>", false}}),
            (V{m + "Hey", m + "my", m + "friend", m, m + "<s>"}));
  // The decoder drops the replacement of the first token unless the scheme is "never".
  auto decode = [](const char* scheme) {
    std::vector<std::string> t = {"\xE2\x96\x81Hey", "\xE2\x96\x81" "friend!"};
    tok::make_decoder({{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}},
                      tok::JsonPath("t", ""))
        ->decode_chain(t);
    return t;
  };
  EXPECT_EQ(decode("always"), (V{"Hey", " friend!"}));
  EXPECT_EQ(decode("never"), (V{" Hey", " friend!"}));
}

TEST(TokenizerBasic, SentencePieceStyleWithByteFallback) {
  // A Llama-2-shaped tokenizer.json: Prepend + Replace normalizers, byte fallback, the SentencePiece decoders.
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const char* t : {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi"}) vocab[t] = id++;
  const json j = {
      {"version", "1.0"},
      {"added_tokens", json::array({
                           {{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
                           {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
                           {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}},
                       })},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", json::array({"\xE2\x96\x81 h", "\xE2\x96\x81h i"})}}},
  };
  const Tokenizer t = Tokenizer::from_json(j.dump());
  // "hi hi" -> "▁hi▁hi" -> ▁hi ▁hi; BOS in front.
  EXPECT_EQ(t.encode("hi hi"), (Ids{1, 263, 263}));
  EXPECT_EQ(t.encode("hi hi", false), (Ids{263, 263}));
  // "é" is not in the vocabulary: its bytes C3 A9.
  EXPECT_EQ(t.encode("hé", false), (Ids{262, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(t.encode("hi hé"), true), "hi hé");
  EXPECT_EQ(t.decode(t.encode("hi hé")), "<s> hi hé");
  // Byte tokens that are not UTF-8: one U+FFFD per byte token, as ByteFallback does.
  EXPECT_EQ(t.decode(Ids{263, 3 + 0xC3}), "hi\xEF\xBF\xBD");
  EXPECT_EQ(t.decode(Ids{3 + 0xE2, 3 + 0x82}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.eos_id(), 2);  // by its name: the template adds none
  // Between added tokens each part is normalized alone: "<s>hi" gives "▁hi" after the token.
  EXPECT_EQ(t.encode("<s>hi", false), (Ids{1, 263}));
}

TEST(TokenizerBasic, UnsupportedPartsAreErrorsNamingThem) {
  auto expect_error = [](json j, const std::string& want) {
    try {
      Tokenizer::from_json(j.dump(), "my/tokenizer.json");
      ADD_FAILURE() << "no error, expected one mentioning " << want;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("my/tokenizer.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find(want), std::string::npos) << msg;
    }
  };
  json j = byte_level_json();
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_error(j, "Precompiled");
  j = byte_level_json();
  j["model"]["dropout"] = 0.1;
  expect_error(j, "dropout");
  j = byte_level_json();
  j["pre_tokenizer"]["frobnicate"] = true;
  expect_error(j, "frobnicate");
  j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}, {"invert", false}};
  expect_error(j, "Sideways");
  j = byte_level_json();
  j["model"]["type"] = "Unigram";
  expect_error(j, "Unigram");
  j = byte_level_json();
  j["model"]["merges"].push_back("x zzz");
  expect_error(j, "\"zzz\"");
  j = byte_level_json();
  j["truncation"] = {{"max_length", 5}};
  expect_error(j, "truncation");
  EXPECT_THROW(Tokenizer::from_json("{not json"), Error);
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), Error);
}

TEST(TokenizerBasic, SplitBehaviors) {
  // NormalizedString::split's examples: "the-final--countdown" split on "-".
  auto split = [](const char* behavior, bool invert) {
    const tok::Regex dash = tok::Regex::literal("-");
    auto matches = tok::find_matches(dash, "the-final--countdown");
    if (invert)
      for (auto& m : matches) m.second = !m.second;
    std::vector<tok::Piece> out;
    tok::split_piece(tok::Piece{"the-final--countdown", true}, matches,
                     tok::parse_behavior(json{{"behavior", behavior}}, tok::JsonPath("t", "")), out);
    std::string joined;
    for (const auto& p : out) joined += p.text + "|";
    return joined;
  };
  EXPECT_EQ(split("Removed", false), "the|final|countdown|");
  EXPECT_EQ(split("Isolated", false), "the|-|final|-|-|countdown|");
  EXPECT_EQ(split("MergedWithPrevious", false), "the-|final-|-|countdown|");
  EXPECT_EQ(split("MergedWithNext", false), "the|-final|-|-countdown|");
  EXPECT_EQ(split("Contiguous", false), "the|-|final|--|countdown|");
  EXPECT_EQ(split("Removed", true), "-|-|-|");
  EXPECT_EQ(split("MergedWithPrevious", true), "the|-final|-|-countdown|");
}

TEST(TokenizerBasic, StreamingNeverSplitsACharacter) {
  const Tokenizer t = Tokenizer::from_json(byte_level_json().dump());
  const std::string text = "he\xF0\x9F\x98\x80llo \xE2\x82\xAC!";  // 😀 and € are bytes of this vocabulary
  const Ids ids = t.encode(text);
  StreamingDecoder sd(t);
  std::string all;
  for (int32_t id : ids) {
    const std::string piece = sd.push(id);
    EXPECT_TRUE(tok::is_valid_utf8(piece));
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a broken character was emitted";
    all += piece;
  }
  all += sd.finish();
  EXPECT_EQ(all, text);
  // A sequence that ends in the middle of a character: finish() gives its U+FFFD.
  StreamingDecoder cut(t);
  std::string out;
  for (int32_t id : t.encode("a\xF0\x9F\x98\x80")) {
    if (t.id_to_token(id) == tok::byte_char(0x80)) break;  // the emoji's last byte, as its stand-in
    out += cut.push(id);
  }
  EXPECT_EQ(out, "a");
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
}

// ---- the real vocabularies ---------------------------------------------------------------------------------------

TEST(TokenizerReal, Llama3KnownIds) {
  REQUIRE_REAL("llama3");
  const Tokenizer& t = real("llama3");
  EXPECT_EQ(t.vocab_size(), 128256);
  EXPECT_EQ(t.encode("Hello world"), (Ids{9906, 1917}));  // the base tokenizer.json adds no BOS
  EXPECT_EQ(t.encode(" Hello world!"), (Ids{22691, 1917, 0}));
  EXPECT_EQ(t.encode("<|begin_of_text|>Hello"), (Ids{128000, 9906}));
  EXPECT_EQ(t.bos_id(), 128000);
  EXPECT_EQ(t.eos_id(), 128001);
  EXPECT_EQ(t.bos_token(), "<|begin_of_text|>");
  EXPECT_TRUE(t.is_special(128009));
  EXPECT_EQ(t.id_to_token(128009), "<|eot_id|>");
  EXPECT_FALSE(t.chat_template().empty());
  // Digits go by three.
  EXPECT_EQ(t.encode("1234567").size(), 3u);
  EXPECT_EQ(t.decode(t.encode("1234567")), "1234567");
  // "âĢ" (378) is the first two bytes of U+2014 and friends: alone it decodes to one U+FFFD.
  EXPECT_EQ(t.decode(Ids{378}), "\xEF\xBF\xBD");
}

TEST(TokenizerReal, QwenKnownIds) {
  for (const char* name : {"qwen3", "qwen2_5"}) {
    if (real_dir(name).empty()) GTEST_SKIP() << name << " not installed";
    const Tokenizer& t = real(name);
    EXPECT_EQ(t.encode("Hello world"), (Ids{9707, 1879})) << name;
    // Single digits, and the chat markers as single tokens.
    EXPECT_EQ(t.encode("123").size(), 3u) << name;
    const Ids chat = t.encode("<|im_start|>user\nhi<|im_end|>");
    EXPECT_EQ(chat.front(), 151644) << name;
    EXPECT_EQ(chat.back(), 151645) << name;
    EXPECT_EQ(t.eos_token(), "<|im_end|>") << name;
    EXPECT_EQ(t.pad_id(), 151643) << name;
    EXPECT_FALSE(t.bos_id().has_value()) << name;
    // NFC: a decomposed é encodes as the composed one.
    EXPECT_EQ(t.encode("caf" "e\xCC\x81"), t.encode("caf\xC3\xA9")) << name;
  }
}

TEST(TokenizerReal, Llama2KnownIds) {
  REQUIRE_REAL("llama2");
  const Tokenizer& t = real("llama2");
  const Ids ids = t.encode("Hello world");
  EXPECT_EQ(ids, (Ids{1, t.token_to_id("\xE2\x96\x81Hello").value(), t.token_to_id("\xE2\x96\x81world").value()}));
  EXPECT_EQ(t.decode(ids, true), "Hello world");
  EXPECT_EQ(t.decode(ids), "<s> Hello world");
  // A newline is the byte token <0x0A>.
  EXPECT_EQ(t.encode("\n", false), (Ids{t.token_to_id("\xE2\x96\x81").value(), 13}));
  EXPECT_EQ(t.eos_token(), "</s>");
}

TEST(TokenizerReal, RoundTrips) {
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "  leading and trailing spaces  ",
      "tabs\tand\r\nCRLF\n\n\nnewlines",
      "naïve café — “quotes” … 東京は晴れ 🙂👍🏽 مرحبا",
      "def f(x):\n    return x**2  # squared\n",
      "1234567890 3.14159 -42 1e-9",
  };
  for (const char* name : {"llama2", "llama3", "qwen3", "qwen2_5"}) {
    if (real_dir(name).empty()) continue;
    const Tokenizer& t = real(name);
    for (const auto& s : texts) {
      const Ids ids = t.encode(s, false);
      // (Llama 2's decoder strips the one space its normalizer prepends.)
      EXPECT_EQ(t.decode(ids), s) << name << ": " << s;
    }
  }
}

TEST(TokenizerReal, AnyBytesEncodeAndStreamBack) {
  // Random bytes (mostly not UTF-8) and random code points: encoding never fails, decoding gives the text as
  // from_utf8_lossy reads it, and streaming gives the same text in pieces that are whole characters.
  std::mt19937 g(11);
  for (const char* name : {"llama2", "llama3", "qwen3"}) {
    if (real_dir(name).empty()) continue;
    const Tokenizer& t = real(name);
    for (int trial = 0; trial < 40; ++trial) {
      std::string s;
      const int n = static_cast<int>(g() % 60);
      for (int k = 0; k < n; ++k) {
        if (trial % 2 == 0) {
          s.push_back(static_cast<char>(g() & 0xff));
        } else {
          char32_t c = g() % 5 == 0 ? 0x1F300 + g() % 0x300 : g() % 3 == 0 ? 0x80 + g() % 0x3000 : 0x20 + g() % 0x60;
          tok::append_utf8(s, c);
        }
      }
      std::string want = tok::utf8_lossy(s);
      if (std::string(name) == "qwen3") want = tok::normalize(want, tok::NormalForm::NFC);  // its normalizer
      const Ids ids = t.encode(s, false);
      EXPECT_EQ(t.decode(ids), want) << name << " trial " << trial;
      StreamingDecoder sd(t, false);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = sd.push(id);
        EXPECT_TRUE(tok::is_valid_utf8(piece));
        streamed += piece;
      }
      streamed += sd.finish();
      EXPECT_EQ(streamed, want) << name << " trial " << trial;
    }
  }
}

TEST(TokenizerReal, StreamingEqualsDecode) {
  std::string text = "Stra\xC3\x9F" "e \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 <s> x";
  if (fs::exists(WGTRAIN_BROWN_DIR)) text += load_brown(WGTRAIN_BROWN_DIR).substr(0, 30000);
  for (const char* name : {"llama2", "llama3", "qwen3"}) {
    if (real_dir(name).empty()) continue;
    const Tokenizer& t = real(name);
    const Ids ids = t.encode(text);
    for (bool skip : {false, true}) {
      StreamingDecoder sd(t, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += sd.push(id);
      streamed += sd.finish();
      EXPECT_EQ(streamed, t.decode(ids, skip)) << name << (skip ? " skipping special tokens" : "");
    }
  }
}

TEST(TokenizerReal, EncodesFromSeveralThreads) {
  REQUIRE_REAL("llama3");
  const Tokenizer& t = real("llama3");
  std::vector<std::string> texts;
  for (int k = 0; k < 200; ++k) texts.push_back("text number " + std::to_string(k * 7919) + " with words like w" + std::to_string(k));
  std::vector<Ids> want;
  for (const auto& s : texts) want.push_back(Tokenizer(t).encode(s));  // a copy: its own empty cache
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (size_t k = th; k < texts.size() * 4; k += 3)
        if (t.encode(texts[k % texts.size()]) != want[k % texts.size()]) ++mismatches;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerReal, LoadDirConfigs) {
  REQUIRE_REAL("llama2");
  const fs::path dir = fs::temp_directory_path() / "wgtrain_tokenizer_load_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(real_dir("llama2") / "tokenizer.json", dir / "tokenizer.json");
  {
    std::ofstream f(dir / "tokenizer_config.json");
    f << R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "pad_token": null,
             "add_bos_token": true, "add_eos_token": true,
             "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})";
  }
  {
    std::ofstream f(dir / "generation_config.json");
    f << R"({"eos_token_id": [2, 0]})";
  }
  const Tokenizer t = Tokenizer::load_dir(dir.string());
  Ids want = {1};
  for (int32_t id : t.encode("hi", false)) want.push_back(id);
  want.push_back(2);  // add_eos_token puts </s> at the end
  EXPECT_EQ(t.encode("hi"), want);
  EXPECT_EQ(t.chat_template(), "D");
  EXPECT_EQ(t.eos_ids(), (Ids{2, 0}));
  EXPECT_FALSE(t.pad_id().has_value());
  {
    std::ofstream f(dir / "tokenizer_config.json");
    f << R"({"eos_token": "<nope>"})";
  }
  EXPECT_THROW(Tokenizer::load_dir(dir.string()), Error);
  {
    // A token transformers would add on top of tokenizer.json: not silently left out.
    std::ofstream f(dir / "tokenizer_config.json");
    f << R"({"added_tokens_decoder": {"32000": {"content": "<pad>", "special": true}}})";
  }
  EXPECT_THROW(Tokenizer::load_dir(dir.string()), Error);
  fs::remove_all(dir);
  EXPECT_THROW(Tokenizer::load_dir(dir.string()), Error);
}

// ---- the CLI ------------------------------------------------------------------------------------------------------

std::pair<int, std::string> run_cli(const std::string& args) {
  const std::string cmd = std::string("'") + WGTRAIN_CLI_PATH + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(TokenizerCli, PrintsIdsAndPieces) {
  REQUIRE_REAL("llama2");
  const std::string dir = real_dir("llama2").string();
  auto [st, out] = run_cli("tokenize --model '" + dir + "' --text 'Hello world'");
  ASSERT_EQ(st, 0) << out;
  EXPECT_EQ(out, "[1, 22557, 1526]\n");
  std::tie(st, out) = run_cli("tokenize --tokenizer '" + dir + "/tokenizer.json' --text 'Hello world' --no-special --pieces");
  ASSERT_EQ(st, 0) << out;
  EXPECT_EQ(out, " 22557 -> 'Hello'\n  1526 -> ' world'\n");
  const fs::path f = fs::temp_directory_path() / "wgtrain_tokenize_cli.txt";
  std::ofstream(f) << "a\nb";
  std::tie(st, out) = run_cli("tokenize --model '" + dir + "' --file '" + f.string() + "' --pieces --no-special");
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("    13 -> '\\n'"), std::string::npos) << out;
  fs::remove(f);
  std::tie(st, out) = run_cli("tokenize --text x");
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("--model or --tokenizer"), std::string::npos) << out;
  std::tie(st, out) = run_cli("tokenize --model /nonexistent --text x");
  EXPECT_EQ(st, 1);
  EXPECT_NE(out.find("/nonexistent"), std::string::npos) << out;
}

// ---- parity with Hugging Face's `tokenizers`, on the reference ids the library itself produced -----------------

std::string show(const Ids& ids, size_t from, size_t to) {
  std::string s = "[";
  for (size_t i = from; i < std::min(to, ids.size()); ++i) s += (i > from ? " " : "") + std::to_string(ids[i]);
  return s + (to < ids.size() ? " ...]" : "]");
}

// "" when equal, else where and how they differ.
std::string diff(const Ids& got, const Ids& want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i >= 4 ? i - 4 : 0;
  return "first difference at position " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " ids, want " + std::to_string(want.size()) + "): got " + show(got, from, i + 8) + " want " +
         show(want, from, i + 8);
}

// tests/fixtures/tokenizers/reference.json (made by make_reference.py with the real libraries), or null when absent.
const json& reference() {
  static const json ref = [] {
    const fs::path f = fs::path(WGTRAIN_FIXTURES_DIR) / "tokenizers" / "reference.json";
    if (!fs::exists(f)) return json();
    std::ifstream in(f);
    return json::parse(in);
  }();
  return ref;
}

const std::vector<std::string>& reference_texts() {
  static const std::vector<std::string> texts = [] {
    const fs::path f = fs::path(WGTRAIN_FIXTURES_DIR) / "tokenizers" / "texts.json";
    if (!fs::exists(f)) return std::vector<std::string>();
    std::ifstream in(f);
    return json::parse(in).get<std::vector<std::string>>();
  }();
  return texts;
}

class TokenizerParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (reference().is_null() || reference_texts().empty()) {
      GTEST_SKIP() << "no reference ids (tests/fixtures/tokenizers/reference.json and texts.json)";
    }
    if (!reference().contains(GetParam())) {
      GTEST_SKIP() << "reference.json has no " << GetParam();
    }
    if (real_dir(GetParam()).empty()) {
      FAIL() << "tokenizer-" << GetParam() << " is not installed: run scripts/setup.sh";
    }
  }
  const json& ref() const { return reference()[GetParam()]; }
  static std::string label(size_t i) {
    return "text " + std::to_string(i) + " " + json(reference_texts()[i].substr(0, 50)).dump();
  }
};

// What `tokenizers` gives on tokenizer.json alone: encode with and without special tokens, decode with and without
// them, the token strings, the vocabulary size.
TEST_P(TokenizerParity, TokenizersLibrary) {
  const Tokenizer t = Tokenizer::load((real_dir(GetParam()) / "tokenizer.json").string());
  const auto& texts = reference_texts();
  if (ref().contains("vocab_size")) {
    EXPECT_EQ(t.vocab_size(), ref()["vocab_size"].get<int64_t>());
  }
  int failures = 0;
  auto fail = [&](size_t i, const std::string& what) {
    ADD_FAILURE() << GetParam() << " " << label(i) << " " << what;
    ++failures;
  };
  for (size_t i = 0; i < texts.size() && failures < 30; ++i) {
    const Ids enc = ref().at("encode")[i].get<Ids>(), plain = ref().at("encode_plain")[i].get<Ids>();
    std::string d;
    if (!(d = diff(t.encode(texts[i]), enc)).empty()) fail(i, "encode: " + d);
    if (!(d = diff(t.encode(texts[i], false), plain)).empty()) fail(i, "encode (no special tokens): " + d);
    const std::string dec = t.decode(plain), want_dec = ref().at("decode")[i].get<std::string>();
    if (dec != want_dec) fail(i, "decode: got " + json(dec).dump() + " want " + json(want_dec).dump());
    const std::string skip = t.decode(enc, true), want_skip = ref().at("decode_skip")[i].get<std::string>();
    if (skip != want_skip) fail(i, "decode (skip special): got " + json(skip).dump() + " want " + json(want_skip).dump());
    if (ref().contains("pieces") && i < ref()["pieces"].size()) {
      std::vector<std::string> pieces;
      for (int32_t id : plain) pieces.push_back(t.id_to_token(id));
      const auto want = ref()["pieces"][i].get<std::vector<std::string>>();
      if (pieces != want) fail(i, "tokens: got " + json(pieces).dump() + " want " + json(want).dump());
    }
  }
  if (failures >= 30) ADD_FAILURE() << "stopped after 30 differences";
}

// decode([id]) alone, for ids across the vocabulary: partial UTF-8 characters, byte tokens, added tokens.
TEST_P(TokenizerParity, SingleTokenDecode) {
  if (!ref().contains("single_ids")) GTEST_SKIP() << "no single_ids";
  const Tokenizer t = Tokenizer::load((real_dir(GetParam()) / "tokenizer.json").string());
  const Ids singles = ref()["single_ids"].get<Ids>();
  int failures = 0;
  for (size_t k = 0; k < singles.size() && failures < 30; ++k) {
    const std::string want = ref().at("single_decode")[k].get<std::string>();
    const std::string got = t.decode(Ids{singles[k]});
    if (got != want) {
      ADD_FAILURE() << GetParam() << " decode([" << singles[k] << "]): got " << json(got).dump() << " want "
                    << json(want).dump();
      ++failures;
    }
  }
}

// What transformers' AutoTokenizer gives on the whole directory (tokenizer_config.json included): load_dir.
TEST_P(TokenizerParity, TransformersEncode) {
  if (!ref().contains("hf_encode")) GTEST_SKIP() << "no hf_encode";
  const Tokenizer t = Tokenizer::load_dir(real_dir(GetParam()).string());
  const auto& texts = reference_texts();
  int failures = 0;
  // transformers 5 does not run Llama 2's tokenizer.json pipeline as written: it rebuilds the SentencePiece
  // tokenizer with a Metaspace pre-tokenizer that adds no "▁" to a piece already starting with a space, where the
  // file's Prepend normalizer (and SentencePiece, and the tokenizers library) always adds one. wgtrain follows the
  // file; the texts where a piece of text starts with a space (the text's start, or after a special token) differ
  // there, and are left out for llama2 only.
  auto piece_starts_with_space = [](const std::string& text) {
    return (!text.empty() && text[0] == ' ') || text.find("> ") != std::string::npos;
  };
  int left_out = 0;
  for (size_t i = 0; i < texts.size() && failures < 30; ++i) {
    if (GetParam() == "llama2" && piece_starts_with_space(texts[i])) {
      ++left_out;
      continue;
    }
    const std::string d = diff(t.encode(texts[i]), ref()["hf_encode"][i].get<Ids>());
    if (!d.empty()) {
      ADD_FAILURE() << GetParam() << " " << label(i) << " load_dir encode: " << d;
      ++failures;
    }
  }
  if (GetParam() == "llama2") {
    EXPECT_LT(left_out, 8) << "most texts are compared";
  }
  // transformers' decode also applies clean_up_tokenization_spaces where the config asks; wgtrain's decode is the
  // library's (lossless) one, so differences there are only reported.
  if (ref().contains("hf_decode_skip")) {
    int differ = 0;
    for (size_t i = 0; i < texts.size(); ++i)
      differ += t.decode(ref()["encode"][i].get<Ids>(), true) != ref()["hf_decode_skip"][i].get<std::string>();
    std::printf("%s: transformers' decode differs from tokenizers' on %d of %zu texts\n", GetParam().c_str(), differ,
                texts.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerParity, ::testing::Values("llama2", "llama3", "qwen3", "qwen2_5"),
                         [](const auto& info) { return info.param; });

// ---- speed ---------------------------------------------------------------------------------------------------------

TEST(TokenizerSpeed, LoadLlama3AndEncodeBrown) {
  REQUIRE_REAL("llama3");
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer t = Tokenizer::load((real_dir("llama3") / "tokenizer.json").string());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("load Llama 3 tokenizer.json (9 MB): %.3f s\n", load_s);
  EXPECT_LT(load_s, 3.0);  // the goal is well under a second; the margin is for a loaded machine

  if (!fs::exists(WGTRAIN_BROWN_DIR)) GTEST_SKIP() << "Brown corpus not installed";
  const std::string brown = load_brown(WGTRAIN_BROWN_DIR);
  const auto t1 = std::chrono::steady_clock::now();
  const Ids ids = t.encode(brown, false);
  const double enc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("encode Brown (%.1f MB) with Llama 3: %.2f s, %zu tokens, %.1f MB/s\n", brown.size() / 1e6, enc_s,
              ids.size(), brown.size() / 1e6 / enc_s);
  EXPECT_LT(enc_s, 30.0);
  EXPECT_EQ(t.decode(ids), brown);
}

}  // namespace
}  // namespace wgtrain
