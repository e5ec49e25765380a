// The op registry: every op of the foundation is there with what it supports, and runs by name.
#include <gtest/gtest.h>

#include <algorithm>

#include <set>

#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/registry.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::download;
using test::random_host;
using test::upload;

TEST(Registry, HasTheFoundationOpsWithTheirSchemas) {
  const auto& reg = Registry::global();
  for (const char* name : {"mm", "bmm", "linear", "_softmax", "_log_softmax", "add", "sub", "mul", "div",
                           "add.Scalar", "sub.Scalar", "mul.Scalar", "div.Scalar", "sum", "mean", "contiguous"})
    EXPECT_NE(reg.find(name), nullptr) << name;
  std::set<std::string> names;
  for (const auto& s : reg.all()) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate";
    EXPECT_FALSE(s.family.empty());
    EXPECT_FALSE(s.summary.empty());
    EXPECT_FALSE(s.dtypes.empty());
    EXPECT_FALSE(s.inputs.empty());
    EXPECT_FALSE(s.outputs.empty());
    EXPECT_TRUE(static_cast<bool>(s.run));
    EXPECT_LE(s.min_rank, s.max_rank);
  }
}

TEST(Registry, RunsOpsByName) {
  const auto a = random_host({4, 6}), b = random_host({6, 3});
  auto out = run_op(test::device(), "mm", {{"self", upload(a)}, {"mat2", upload(b)}});
  const auto scale = ref::mm_abs(a, b);
  EXPECT_TRUE(all_close(out.at("out"), ref::mm(a, b), 1e-6, 1e-5, &scale));

  OpArgs args;
  args.set("dim", "0, -1");
  args.set("keepdim", "true");
  auto s = run_op(test::device(), "sum", {{"self", upload(a)}}, args);
  EXPECT_EQ(s.at("out").shape(), (Shape{1, 1}));

  OpArgs scalar;
  scalar.set("other", "2.5");
  auto m = run_op(test::device(), "mul.Scalar", {{"self", upload(a)}}, scalar);
  EXPECT_TRUE(all_close(m.at("out"), ref::binary_scalar("mul", a, 2.5), 0, 1e-7));
}

TEST(Registry, ReportsBadCallsClearly) {
  const Tensor a = upload(random_host({2, 2}));
  EXPECT_THROW(run_op(test::device(), "no_such_op", {}), ArgumentError);
  try {
    run_op(test::device(), "mm", {{"self", a}});
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("mat2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_op(test::device(), "mm", {{"self", a}, {"mat2", a}, {"extra", a}}), ArgumentError);
  OpArgs bad;
  bad.set("dim", "zero");
  EXPECT_THROW(run_op(test::device(), "_softmax", {{"self", a}}, bad), ArgumentError);
  OpArgs unknown;
  unknown.set("dimension", "0");
  EXPECT_THROW(run_op(test::device(), "_softmax", {{"self", a}}, unknown), ArgumentError);
  EXPECT_THROW(run_op(test::device(), "mul.Scalar", {{"self", a}}), ArgumentError);  // missing other=
  EXPECT_THROW(run_op(test::device(), "mm", {{"self", upload(random_host({2}))}, {"mat2", a}}), ArgumentError);
}

TEST(Registry, SaysWhichBackendOffersWhichOp) {
  // The training kernels (the GEMMs, requantisation, the loss, AdamW and the fill a step needs) run on the native
  // Vulkan backend too; the rest on WebGPU only.
  const std::vector<std::string> both = {"linear_q4gsw", "linear_q4gsw_backward", "linear_dW", "q4gsw_requant",
                                         "fused_ce",     "adamw_step",            "fill",      "mm",
                                         "bmm",          "linear"};
  for (const auto& s : Registry::global().all()) {
    const bool vulkan = std::find(s.backends.begin(), s.backends.end(), "native-vulkan") != s.backends.end();
    const bool expected = std::find(both.begin(), both.end(), s.name) != both.end();
    EXPECT_EQ(vulkan, expected) << s.name;
    EXPECT_NE(std::find(s.backends.begin(), s.backends.end(), "webgpu"), s.backends.end()) << s.name;
  }
}

TEST(Registry, AnOpTheBackendLacksIsAnErrorNamingIt) {
  const Tensor a = Tensor::from_host(test::native_device(), {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  try {
    run_op(test::native_device(), "_softmax", {{"self", a}});
    ADD_FAILURE() << "_softmax ran on the native backend";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("_softmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("native-vulkan"), std::string::npos) << e.what();
  }
  // A command checks every op it needs first, and names all that are missing.
  try {
    require_ops(Backend::NativeVulkan, model_ops(), "wgtrain train");
    ADD_FAILURE() << "the native backend claims every model op";
  } catch (const UnsupportedError& e) {
    for (const char* op : {"embedding", "rms_norm", "rope"})
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("fused_ce"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_ops(Backend::WebGpu, model_ops(), "wgtrain train"));
  // What the registry lists runs: a GEMM on the native device, checked against the host.
  const Tensor b = Tensor::from_host(test::native_device(), {3, 2}, std::vector<float>{1, 0, 0, 1, 1, 1});
  const auto c = run_op(test::native_device(), "mm", {{"self", a}, {"mat2", b}}).at("out").to_host_f32();
  EXPECT_EQ(c, (std::vector<float>{4, 5, 10, 11}));
}

TEST(Registry, OpArgsParse) {
  OpArgs a({{"i", "-3"}, {"f", "1e-3"}, {"b", "false"}, {"l", "[1, -2,3]"}, {"e", ""}, {"x", "3.5"}});
  EXPECT_EQ(a.get_int("i", 0), -3);
  EXPECT_DOUBLE_EQ(a.get_float("f", 0), 1e-3);
  EXPECT_FALSE(a.get_bool("b", true));
  EXPECT_EQ(a.get_int_list("l", {}), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_TRUE(a.get_int_list("e", {7}).empty());
  EXPECT_EQ(a.get_int("missing", 42), 42);
  EXPECT_THROW(a.get_int("x", 0), ArgumentError);
  EXPECT_THROW(a.get_bool("i", false), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
