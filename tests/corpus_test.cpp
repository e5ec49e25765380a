// Corpora: the Brown corpus loader, text files, and the train/validation split.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "wgtrain/corpus.h"
#include "wgtrain/data.h"
#include "wgtrain/error.h"

namespace wgtrain {
namespace {

TEST(Corpus, StripsTagsAndJoinsPunctuation) {
  const std::string tagged =
      "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ,/, "
      "that/cs it/pps didn't/dod* (/( see/vb )/) it's/pps+bez ./.\n\n\n\tIt/pps is/bez 1/cd ./.\n";
  EXPECT_EQ(untag_brown(tagged),
            "The Fulton County Grand Jury said \"no evidence\", that it didn't (see) it's.\nIt is 1.\n");
}

TEST(Corpus, LoadsTheInstalledBrownCorpus) {
  const std::string text = load_brown(WGTRAIN_BROWN_DIR);
  EXPECT_GT(text.size(), 5u << 20) << "about 6 MB of text once the tags are stripped";
  EXPECT_EQ(text.find("/nn"), std::string::npos) << "tags left in the text";
  EXPECT_EQ(text.rfind("The Fulton County Grand Jury said Friday", 0), 0u) << text.substr(0, 80);
  EXPECT_THROW(load_brown("/nonexistent"), Error);
}

std::string message_of(const std::string& corpus) {
  try {
    load_corpus(corpus);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Corpus, ADirectoryOrABinaryFileIsNamedForWhatItIs) {
  const auto dir = std::filesystem::temp_directory_path() / ("wgtrain_corpus_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_NE(message_of(dir.string()).find("is a directory"), std::string::npos) << message_of(dir.string());
  const auto bin = dir / "data.bin";
  {
    std::ofstream out(bin, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(i * 37 % 256));
  }
  EXPECT_NE(message_of(bin.string()).find("is not text"), std::string::npos) << message_of(bin.string());
  const auto latin1 = dir / "latin1.txt";
  {
    std::ofstream out(latin1, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << "caf\xe9 ";
  }
  EXPECT_NE(message_of(latin1.string()).find("not UTF-8"), std::string::npos) << message_of(latin1.string());
  const auto empty = dir / "empty.txt";
  std::ofstream(empty).close();
  EXPECT_NE(message_of(empty.string()).find("is empty"), std::string::npos);
  const auto ok = dir / "ok.txt";
  std::ofstream(ok) << "plain text, caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87\n";
  EXPECT_EQ(load_corpus(ok.string()), "plain text, caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87\n");
  std::filesystem::remove_all(dir);
}

TEST(Split, TextWithoutNewlinesStillHoldsOutValidation) {
  // 200 KB of words and no line break: a validation share near 5%, blocks cut at spaces.
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) text += "word" + std::to_string(i % 977) + " ";
  const data::TextSplit s = data::split_text(text);
  EXPECT_EQ(s.train.size() + s.val.size(), text.size());
  EXPECT_GT(s.val.size(), text.size() / 25);
  EXPECT_LT(s.val.size(), text.size() / 15);
  // Nor spaces: blocks end on character boundaries (never inside a UTF-8 sequence).
  std::string cjk;
  while (cjk.size() < 300000) cjk += "\xe4\xb8\xad\xe6\x96\x87";
  const data::TextSplit c = data::split_text(cjk);
  EXPECT_GT(c.val.size(), 0u);
  EXPECT_EQ(c.val.size() % 3, 0u);
  EXPECT_EQ(c.train.size() % 3, 0u);
}

}  // namespace
}  // namespace wgtrain
