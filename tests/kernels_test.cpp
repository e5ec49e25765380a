// The kernel templates (gpu/kernels.h): the rendering rules, every kernel's declared variant fields, the dump of
// compiled variants (WGTRAIN_DUMP_KERNELS, wgtrain kernels --dump) and the listing (wgtrain kernels).
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gpu/device_impl.h"
#include "gpu/kernels.h"
#include "support/test_support.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using detail::KernelDefs;
using detail::render_kernel;

TEST(KernelTemplate, SubstitutesValues) {
  EXPECT_EQ(render_kernel("k", "a {{X}} b {{X}} {{Y}}", {{"X", "1"}, {"Y", "f32"}}), "a 1 b 1 f32");
  EXPECT_THROW(render_kernel("k", "a {{X}} b", {}), Error);              // a placeholder without a value
  EXPECT_THROW(render_kernel("k", "a b", {{"X", "1"}}), Error);          // a value without a placeholder
  EXPECT_THROW(render_kernel("k", "a {{X b", {{"X", "1"}}), Error);      // unterminated
}

TEST(KernelTemplate, SectionsKeepOrDropTheirText) {
  const std::string t = "x{{#V}}[on]{{/V}}{{^V}}[off]{{/V}}y";
  EXPECT_EQ(render_kernel("k", t, {{"V", "true"}}), "x[on]y");
  EXPECT_EQ(render_kernel("k", t, {{"V", "false"}}), "x[off]y");
  // A section's key takes true or false only.
  try {
    render_kernel("k", t, {{"V", "1"}});
    FAIL() << "a section took the value 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("true or false"), std::string::npos) << e.what();
  }
}

TEST(KernelTemplate, SectionTagsAloneOnTheirLinesTakeTheLine) {
  const std::string t = "a\n  {{#V}}\nkept {{N}}\n  {{/V}}\n{{^V}}\ndropped\n{{/V}}\nb\n";
  EXPECT_EQ(render_kernel("k", t, {{"V", "true"}, {"N", "3"}}), "a\nkept 3\nb\n");
  EXPECT_EQ(render_kernel("k", t, {{"V", "false"}, {"N", "3"}}), "a\ndropped\nb\n");
}

TEST(KernelTemplate, SectionsNestAndCheckEveryKey) {
  const std::string t = "{{#A}}a{{#B}}b{{/B}}{{^B}}{{N}}{{/B}}{{/A}}.";
  EXPECT_EQ(render_kernel("k", t, {{"A", "true"}, {"B", "true"}, {"N", "n"}}), "ab.");
  EXPECT_EQ(render_kernel("k", t, {{"A", "true"}, {"B", "false"}, {"N", "n"}}), "an.");
  EXPECT_EQ(render_kernel("k", t, {{"A", "false"}, {"B", "true"}, {"N", "n"}}), ".");
  // A key inside a dropped section still needs its value: every variant names every field.
  EXPECT_THROW(render_kernel("k", t, {{"A", "false"}, {"B", "true"}}), Error);
  EXPECT_THROW(render_kernel("k", "{{#A}}x", {{"A", "true"}}), Error);              // not closed
  EXPECT_THROW(render_kernel("k", "x{{/A}}", {{"A", "true"}}), Error);              // closes nothing
  EXPECT_THROW(render_kernel("k", "{{#A}}{{^A}}{{/A}}{{/A}}", {{"A", "true"}}), Error);  // one key nested in itself
}

TEST(KernelTemplate, ValuesMustBeAmongThoseDeclared) {
  const std::string t =
      "// @variant TM {4|8} outputs per thread\n// @variant T {*} any type\nconst TM = {{TM}}u; {{T}}";
  EXPECT_NO_THROW(render_kernel("k", t, {{"TM", "8"}, {"T", "whatever"}}));
  try {
    render_kernel("k", t, {{"TM", "5"}, {"T", "f32"}});
    FAIL() << "TM=5 passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TM=5"), std::string::npos) << e.what();
  }
}

// Every kernel names its variant fields in its header (@variant), and uses each it names: `wgtrain kernels` lists
// them, and a value outside a declared set is refused.
TEST(KernelTemplate, EveryKernelDeclaresItsVariantFields) {
  for (const auto& k : detail::embedded_kernels()) {
    SCOPED_TRACE(k.name);
    if (detail::kernel_is_include(k.name)) continue;
    for (const auto& f : detail::kernel_fields(k.name)) {
      EXPECT_TRUE(f.declared) << "{{" << f.key << "}} has no @variant line in " << k.name << ".wgsl";
      EXPECT_TRUE(f.used) << "@variant " << f.key << " is not used by " << k.name << ".wgsl";
      EXPECT_FALSE(f.meaning.empty()) << "@variant " << f.key << " says nothing";
    }
  }
}

TEST(KernelTemplate, TheGemmAndFusedCeKernelsAreWholeFiles) {
  // What used to be C++ strings spliced in (the unrolled bodies, accessors, passes) is in the files: their only
  // fields are small values.
  for (const char* name : {"matmul/gemm", "fused_ce/rows"})
    for (const auto& f : detail::kernel_fields(name)) {
      SCOPED_TRACE(std::string(name) + " " + f.key);
      EXPECT_FALSE(f.values.empty()) << "an open-ended field";
      for (const auto& v : f.values) EXPECT_LE(v.size(), 10u);
    }
}

}  // namespace
}  // namespace wgtrain
