// `wgtrain devices` names WebGPU features from a table of its own: it must be the pinned library's numbering, as
// the JavaScript bindings of the same Dawn build spell it (their WGPUFeatureNameDef).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gpu/features.h"
#include "gpu/webgpu_abi.h"

namespace wgtrain {
namespace {

TEST(Features, NamesMatchTheLibrarysBindings) {
  std::ifstream in(WGTRAIN_DAWN_JS_PATH);
  if (!in) GTEST_SKIP() << "no " << WGTRAIN_DAWN_JS_PATH << " (scripts/setup.sh installs it)";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string js = ss.str();
  const auto begin = js.find("var WGPUFeatureNameDef = defineEnum({");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = js.substr(begin, js.find("\n}", begin) - begin);
  const std::regex entry(R"re("?([a-z0-9-]+)"?: (\d+))re");
  int checked = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), entry); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    const uint32_t value = static_cast<uint32_t>(std::stoul((*it)[2]));
    if (name == "force-32") continue;
    EXPECT_EQ(gpu::feature_name(value), name) << value;
    ++checked;
  }
  EXPECT_GT(checked, 50);
  EXPECT_EQ(gpu::feature_name(123456), "");
}

TEST(Features, TheOnesWgtrainUsesSayWhatFor) {
  using namespace webgpu;
  for (uint32_t f : {WGPUFeatureName_TimestampQuery, WGPUFeatureName_ShaderF16, WGPUFeatureName_Subgroups,
                     WGPUFeatureName_SubgroupMatrix})
    EXPECT_FALSE(gpu::feature_use(f).empty()) << gpu::feature_name(f);
  EXPECT_EQ(gpu::feature_use(1), "");  // depth-clip-control: rendering
}

}  // namespace
}  // namespace wgtrain
