// The Brown corpus loader.
#include <gtest/gtest.h>

#include "wgtrain/corpus.h"
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

}  // namespace
}  // namespace wgtrain
