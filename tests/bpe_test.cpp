// The byte-level BPE tokenizer: pieces, deterministic training, exact round trips, save and load.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "wgtrain/bpe.h"
#include "wgtrain/error.h"

namespace wgtrain {
namespace {

const char* kText =
    "The jury further said in term-end presentments that the City Executive Committee, which had over-all "
    "charge of the election, deserves the praise and thanks of the City of Atlanta for the manner in which the "
    "election was conducted. The September-October term jury had been charged by Fulton Superior Court Judge "
    "Durwood Pye to investigate reports of possible irregularities in the hard-fought primary which was won by "
    "Mayor-nominate Ivan Allen Jr. Only a relative handful of such reports was received, the jury said, 1961.";

TEST(Bpe, PiecesKeepLeadingSpaces) {
  const auto p = bpe_pieces("  The cat's 1999 bill, paid!\n");
  const std::vector<std::string_view> want = {"  The", " cat's", " 1999", " bill", ",", " paid", "!", "\n"};
  EXPECT_EQ(p, want);
  EXPECT_TRUE(bpe_pieces("").empty());
  std::string joined;
  for (auto s : bpe_pieces(kText)) joined += s;
  EXPECT_EQ(joined, kText);
}

TEST(Bpe, TrainsDeterministicallyAndCompresses) {
  const BpeTokenizer a = BpeTokenizer::train(kText, 400), b = BpeTokenizer::train(kText, 400);
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_GT(a.vocab_size(), 256);
  EXPECT_LE(a.vocab_size(), 400);
  const auto ids = a.encode(kText);
  EXPECT_LT(ids.size(), std::string(kText).size() / 2) << "BPE should at least halve the bytes of its own corpus";
  EXPECT_EQ(a.decode(ids), kText);
}

TEST(Bpe, FirstMergeIsTheMostFrequentPair) {
  // "ab" occurs 6 times, "bc" 3: the first merge joins a and b; ties go to the smaller ids.
  const BpeTokenizer t = BpeTokenizer::train("ab ab ab abc abc abc", 258);
  ASSERT_GE(t.merges().size(), 1u);
  EXPECT_EQ(t.merges()[0], std::make_pair(int32_t{'a'}, int32_t{'b'}));
  // Stops when no pair occurs twice.
  EXPECT_EQ(BpeTokenizer::train("abcdef", 1000).vocab_size(), 256);
}

TEST(Bpe, AnyBytesRoundTrip) {
  const BpeTokenizer t = BpeTokenizer::train(kText, 350);
  std::mt19937 g(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::string s(g() % 200, '\0');
    for (auto& c : s) c = static_cast<char>(g() & 0xff);
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
  const std::string utf8 = "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82";
  EXPECT_EQ(t.decode(t.encode(utf8)), utf8);
  EXPECT_THROW(t.decode({t.vocab_size()}), ArgumentError);
  EXPECT_THROW(t.decode({-1}), ArgumentError);
}

TEST(Bpe, SavesAndLoads) {
  const BpeTokenizer t = BpeTokenizer::train(kText, 320);
  const auto path = (std::filesystem::temp_directory_path() / "wgtrain_bpe_test.json").string();
  t.save(path);
  const BpeTokenizer u = BpeTokenizer::load(path);
  EXPECT_EQ(u.merges(), t.merges());
  EXPECT_EQ(u.encode(kText), t.encode(kText));
  {
    std::ofstream f(path);
    f << R"({"format": "wgtrain-bpe-1", "merges": [[300, 1]]})";
  }
  EXPECT_THROW(BpeTokenizer::load(path), Error);
  {
    std::ofstream f(path);
    f << "not json";
  }
  EXPECT_THROW(BpeTokenizer::load(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(BpeTokenizer::load(path), Error);
}

}  // namespace
}  // namespace wgtrain
