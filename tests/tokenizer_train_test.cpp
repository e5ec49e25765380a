// train_bpe: wgtrain's own byte-level BPE, trained on a corpus and written as a standard tokenizer.json. Also writes
// a tokenizer and its ids for tests/fixtures/tokenizers/check_own_bpe.py, which checks them against Hugging Face's
// library where it is installed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "wgtrain/corpus.h"
#include "wgtrain/error.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using Ids = std::vector<int32_t>;

const char* kText =
    "The jury further said in term-end presentments that the City Executive Committee, which had over-all "
    "charge of the election, deserves the praise and thanks of the City of Atlanta for the manner in which the "
    "election was conducted. The September-October term jury had been charged by Fulton Superior Court Judge "
    "Durwood Pye to investigate reports of possible irregularities in the hard-fought primary which was won by "
    "Mayor-nominate Ivan Allen Jr. Only a relative handful of such reports was received, the jury said, 1961.";

TEST(TokenizerTrain, DeterministicAndCompressing) {
  const Tokenizer a = train_bpe(kText, 400), b = train_bpe(kText, 400);
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_GT(a.vocab_size(), 256);
  EXPECT_LE(a.vocab_size(), 400);
  const Ids ids = a.encode(kText);
  EXPECT_LT(ids.size(), std::string(kText).size() / 2) << "BPE should at least halve the bytes of its own corpus";
  EXPECT_EQ(a.decode(ids), kText);
  EXPECT_THROW(train_bpe(kText, 255), ArgumentError);
}

TEST(TokenizerTrain, MostFrequentPairFirstAndBytesAsIds) {
  // "ab" occurs 6 times, "bc" 3: the first merge joins a and b, and makes id 256.
  const Tokenizer t = train_bpe("ab ab ab abc abc abc", 257);
  EXPECT_EQ(t.vocab_size(), 257);
  EXPECT_EQ(t.encode("ab"), Ids{256});
  EXPECT_EQ(t.id_to_token(256), "ab");
  // Ties go to the smaller pair of ids: in "xyxy yxyx" (pieces "xyxy", " yxyx") xy and yx occur 3 times each.
  EXPECT_EQ(train_bpe("xyxy yxyx", 257).id_to_token(256), "xy");
  // No pair twice: no merge.
  EXPECT_EQ(train_bpe("abcdef", 1000).vocab_size(), 256);
  // Ids below 256 are bytes.
  EXPECT_EQ(t.encode("\x01"), Ids{1});
  EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{0xC3, 0xA9}));
}

TEST(TokenizerTrain, MergesStayInsidePieces) {
  // Letters and digits are separate pieces, so "a1" is never a pair; spaces lead the piece after them.
  EXPECT_EQ(train_bpe("a1a1a1a1a1", 300).vocab_size(), 256);
  const Tokenizer t = train_bpe(" the the the the", 300);
  EXPECT_EQ(t.encode(" the"), Ids{t.token_to_id("\xC4\xA0the").value()});  // "Ġthe": one token
  // Trailing whitespace is a piece of its own.
  EXPECT_EQ(t.decode(t.encode(" the  ")), " the  ");
}

TEST(TokenizerTrain, AnyTextRoundTrips) {
  const Tokenizer t = train_bpe(kText, 350);
  std::mt19937 g(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string s(g() % 200, '\0');
    for (auto& c : s) c = static_cast<char>(g() & 0x7f);
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
  const std::string utf8 = "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82\r\n\t 12,345.6";
  EXPECT_EQ(t.decode(t.encode(utf8)), utf8);
  // Bytes that are not UTF-8 come back as U+FFFD, as Hugging Face's library reads them.
  EXPECT_EQ(t.decode(t.encode("a\xff" "b")), "a\xEF\xBF\xBD" "b");
}

TEST(TokenizerTrain, SavesAStandardTokenizerJson) {
  const Tokenizer t = train_bpe(kText, 320);
  const auto path = (fs::temp_directory_path() / "wgtrain_train_bpe_test.json").string();
  t.save(path);
  const Tokenizer u = Tokenizer::load(path);
  EXPECT_EQ(u.encode(kText), t.encode(kText));
  EXPECT_EQ(u.to_json(), t.to_json());
  const auto j = nlohmann::json::parse(t.to_json());
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["type"], "Split");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][1]["type"], "ByteLevel");
  EXPECT_EQ(j["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(j["model"]["vocab"].size(), static_cast<size_t>(t.vocab_size()));
  fs::remove(path);
}

// Writes <dir>/tokenizer.json and <dir>/ids.json ({"texts": [...], "ids": [[...], ...]}) for
// tests/fixtures/tokenizers/check_own_bpe.py; dir is $WGTRAIN_OWN_BPE_DIR, else <temp>/wgtrain_own_bpe.
TEST(TokenizerTrain, WritesIdsForTheHuggingFaceCheck) {
  const char* env = std::getenv("WGTRAIN_OWN_BPE_DIR");
  const fs::path dir = env && *env ? fs::path(env) : fs::temp_directory_path() / "wgtrain_own_bpe";
  std::string corpus = kText;
  if (fs::exists(WGTRAIN_BROWN_DIR)) corpus = load_brown(WGTRAIN_BROWN_DIR).substr(0, 400000);
  const Tokenizer t = train_bpe(corpus, 1000);
  std::vector<std::string> texts = {
      corpus.substr(0, 20000),
      "Hello world! It's 2024-01-02, isn't it? \"Quotes\" and (parens) [brackets] {braces}.",
      "  leading spaces, trailing spaces   ",
      "tabs\tand\r\nCRLF\n\n\nblank lines\n",
      "\x0b\x0c vertical tab, form feed, NUL \0 inside"s,
      "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
      "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
      "def f(x):\n    return x**2  # squared\n",
      "1234567890 3.14159 -42 1e-9 $100 50% a1b2c3",
      "don't won't it's we're they've I'm you'll he'd",
      "",
      " ",
      "\n",
  };
  nlohmann::json out = {{"texts", nlohmann::json::array()}, {"ids", nlohmann::json::array()}};
  for (const auto& s : texts) {
    const Ids ids = t.encode(s);
    ASSERT_EQ(t.decode(ids), s);
    out["texts"].push_back(s);
    out["ids"].push_back(ids);
  }
  fs::create_directories(dir);
  t.save((dir / "tokenizer.json").string());
  std::ofstream((dir / "ids.json").string()) << out.dump() << "\n";
  std::printf("wrote %s: check with python3 tests/fixtures/tokenizers/check_own_bpe.py %s\n", dir.c_str(),
              dir.c_str());
}

}  // namespace
}  // namespace wgtrain
