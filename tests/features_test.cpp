// `wgtrain devices` names WebGPU features from a table of its own: it must be the pinned library's numbering, as
// the JavaScript bindings of the same Dawn build spell it (their WGPUFeatureNameDef).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gpu/features.h"
#include "gpu/webgpu_abi.h"
#include "support/test_support.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

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

// Subgroup matrices: never enabled unless asked for; asked for, enabled exactly where the adapter offers them, with
// their shapes listed; elsewhere (llvmpipe) the device opens without them and runs kernels as before.
TEST(Features, SubgroupMatricesOnRequestAndOnlyWhereOffered) {
  const Device& shared = test::device();
  const auto& raw = shared.features().adapter_raw;
  const bool offered =
      std::find(raw.begin(), raw.end(), webgpu::WGPUFeatureName_SubgroupMatrix) != raw.end();
  EXPECT_FALSE(shared.features().subgroup_matrix);
  EXPECT_EQ(shared.features().subgroup_matrix_configs.empty(), !offered);
  DeviceOptions o;
  o.backend = shared.info().backend;
  o.subgroup_matrix = true;
  Device dev = Device::open(o);
  EXPECT_EQ(dev.features().subgroup_matrix, offered);
  EXPECT_EQ(dev.features().subgroup_matrix_configs.empty(), !offered);
  for (const auto& c : dev.features().subgroup_matrix_configs) {
    for (const std::string& t : {c.component_type, c.result_type})
      EXPECT_TRUE(t == "f16" || t == "f32" || t == "u32" || t == "i32") << t;
    EXPECT_GT(c.m * c.n * c.k, 0u);
  }
  const std::vector<float> x = {1, 2, 3};
  EXPECT_EQ(ops::add(Tensor::from_host(dev, {3}, x), 1.0f).to_host_f32(), (std::vector<float>{2, 3, 4}));
}

}  // namespace
}  // namespace wgtrain
