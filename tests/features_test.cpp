// `wgtrain devices` names WebGPU features from a table of its own: it must be the pinned library's numbering, as
// Dawn's header of the same commit (third_party/dawn/webgpu.h) has it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
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

TEST(Features, NamesMatchTheLibrarysHeader) {
  // Every WGPUFeatureName_X of Dawn's header at the pinned commit: our name is X in lower case with hyphens between
  // words ("ShaderF16": "shader-f16"); hyphens dropped and case ignored, the two spell the same.
  // At its compiled-in path, or relative to a copy of the source tree (as on the GPU machine).
  const std::string path =
      std::ifstream(WGTRAIN_DAWN_HEADER).good() ? WGTRAIN_DAWN_HEADER : "third_party/dawn/webgpu.h";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string h = ss.str();
  const auto begin = h.find("typedef enum WGPUFeatureName {");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = h.substr(begin, h.find("} WGPUFeatureName", begin) - begin);
  const std::regex entry(R"(WGPUFeatureName_(\w+) = (0x[0-9A-Fa-f]+))");
  auto squash = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  int checked = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), entry); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    const uint32_t value = static_cast<uint32_t>(std::stoul((*it)[2], nullptr, 16));
    if (name == "Force32") continue;
    EXPECT_EQ(squash(gpu::feature_name(value)), squash(name)) << value;
    ++checked;
  }
  EXPECT_GT(checked, 80);
  EXPECT_EQ(gpu::feature_name(123456), "");
  EXPECT_EQ(gpu::feature_name(webgpu::WGPUFeatureName_ShaderF16), "shader-f16");
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
  // Dawn lists the feature only on an instance with allow_unsafe_apis, which the request turns on: whether the
  // adapter offers it is read from the device opened with the request (the shared device's list may lack it).
  auto offers = [](const Device& d) {
    const auto& raw = d.features().adapter_raw;
    return std::find(raw.begin(), raw.end(), webgpu::WGPUFeatureName_SubgroupMatrix) != raw.end();
  };
  const Device& shared = test::device();
  EXPECT_FALSE(shared.features().subgroup_matrix);
  EXPECT_EQ(shared.features().subgroup_matrix_configs.empty(), !offers(shared));
  DeviceOptions o;
  o.backend = shared.info().backend;
  o.subgroup_matrix = true;
  Device dev = Device::open(o);
  const bool offered = offers(dev);
  EXPECT_EQ(dev.features().subgroup_matrix, offered);
  EXPECT_EQ(dev.features().subgroup_matrix_configs.empty(), !offered);
  for (const auto& c : dev.features().subgroup_matrix_configs) {
    for (const std::string& t : {c.component_type, c.result_type})
      EXPECT_TRUE(t == "f16" || t == "f32" || t == "u32" || t == "i32" || t == "u8" || t == "i8") << t;
    EXPECT_GT(c.m * c.n * c.k, 0u);
  }
  const std::vector<float> x = {1, 2, 3};
  EXPECT_EQ(ops::add(Tensor::from_host(dev, {3}, x), 1.0f).to_host_f32(), (std::vector<float>{2, 3, 4}));
}

}  // namespace
}  // namespace wgtrain
