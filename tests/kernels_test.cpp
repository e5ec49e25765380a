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
#include "gpu/webgpu_backend.h"
#include "gpu/kernels.h"
#include "ops/matmul/gemm_tiling.h"
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

TEST(KernelDump, FileNamesNameKernelAndVariant) {
  EXPECT_EQ(detail::kernel_dump_file_name("matmul/gemm", {{"A_TYPE", "vec4<f32>"}, {"TM", "8"}}),
            "matmul.gemm.A_TYPE-vec4_f32.TM-8.wgsl");
  // Expressions keep what they can, and a hash keeps their names apart.
  const std::string a = detail::kernel_dump_file_name("elementwise/map", {{"EXPR", "x0 + x1"}});
  const std::string b = detail::kernel_dump_file_name("elementwise/map", {{"EXPR", "x0 * x1"}});
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("elementwise.map.EXPR-x0plusx1.h", 0), 0u) << a;
  EXPECT_EQ(detail::kernel_dump_file_name("elementwise/map", {{"EXPR", "bool_word(x0 < x1)"}}).rfind(
                "elementwise.map.EXPR-bool_word_x0ltx1.h", 0),
            0u);
  EXPECT_EQ(std::string(a.substr(a.size() - 5)), ".wgsl");
}

struct DumpDir {
  fs::path path = fs::temp_directory_path() / ("wgtrain_kernel_dump_" + std::to_string(::getpid()));
  DumpDir() {
    fs::remove_all(path);
    detail::set_kernel_dump_dir(path.string());
  }
  ~DumpDir() {
    detail::set_kernel_dump_dir("");
    fs::remove_all(path);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(KernelDump, HoldsTheGemmVariantsARunCompiledAsTheDeviceBuiltThem) {
  DumpDir dir;
  // A device of its own, so that its pipeline cache starts empty and every variant is compiled (and dumped) here.
  DeviceOptions opt;
  opt.poison = true;
  Device dev = Device::open(opt);
  auto up = [&](const ref::HostTensor& h) {
    return Tensor::from_host(dev, h.shape, std::vector<float>(h.data.begin(), h.data.end()));
  };
  const auto host = [](const Shape& s) { return test::random_host(s); };
  // gemm.wgsl's variants, named below: its entry of the fp32 tiling table forced (the table's choice takes
  // gemm_tiled.wgsl for an f32 B), restored at the end of the scope.
  struct ForceGemm {
    ForceGemm() { ops::detail::gemm_force = 0; }
    ~ForceGemm() { ops::detail::gemm_force = ops::detail::kGemmTableChoice; }
  } force_gemm;
  const Tensor a = up(host({130, 136})), b = up(host({136, 132}));
  ops::mm(a, b);                                                    // TM 8, A and B as vec4s
  ops::mm(ops::contiguous(a.transpose(0, 1)).transpose(0, 1), b);   // A through a strided view
  ops::mm(up(host({3, 5})), up(host({5, 7})));                      // TM 4, nothing as vec4s
  ops::fused_ce(up(host({3, 40})), Tensor::from_host(dev, {3}, std::vector<int32_t>{1, -1, 39}));
  dev.synchronize();

  const std::vector<std::string> files = detail::dumped_kernel_files();
  const std::set<std::string> on_disk = [&] {
    std::set<std::string> s;
    for (const auto& e : fs::directory_iterator(dir.path)) s.insert(e.path().filename().string());
    return s;
  }();
  EXPECT_EQ(std::set<std::string>(files.begin(), files.end()), on_disk);

  // The variants, by name, holding exactly what the template renders for them.
  auto expect_variant = [&](const std::string& kernel, const KernelDefs& defs) {
    const std::string name = detail::kernel_dump_file_name(kernel, defs);
    SCOPED_TRACE(name);
    ASSERT_TRUE(on_disk.count(name));
    EXPECT_EQ(read_file(dir.path / name), render_kernel(kernel, detail::kernel_source(kernel), defs));
  };
  expect_variant("matmul/gemm", {{"A_TYPE", "vec4<f32>"}, {"A_VEC", "true"}, {"B_MODE", "0"},
                                 {"B_TYPE", "vec4<f32>"}, {"B_VEC", "true"}, {"TM", "8"}});
  expect_variant("matmul/gemm", {{"A_TYPE", "f32"}, {"A_VEC", "false"}, {"B_MODE", "0"},
                                 {"B_TYPE", "vec4<f32>"}, {"B_VEC", "true"}, {"TM", "8"}});
  expect_variant("matmul/gemm", {{"A_TYPE", "f32"}, {"A_VEC", "false"}, {"B_MODE", "0"}, {"B_TYPE", "f32"},
                                 {"B_VEC", "false"}, {"TM", "4"}});
  int rows = 0;
  for (const auto& f : on_disk) rows += f.rfind("fused_ce.rows.", 0) == 0;
  EXPECT_EQ(rows, 1);

  // Each file compiles as it stands (the text the device was given; no placeholder left).
  for (const auto& f : on_disk) {
    SCOPED_TRACE(f);
    const std::string text = read_file(dir.path / f);
    EXPECT_EQ(text.find("{{"), std::string::npos);
    try {
      auto& web = detail::webgpu_backend(*dev.impl().backend);
      const detail::Pipeline built = web.build_pipeline("dumped " + f, text);
      web.api.ComputePipelineRelease(static_cast<webgpu::WGPUComputePipeline>(built.native));
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }

  // Compiled once per variant: a second device adds no files and rewrites none.
  const auto before = fs::last_write_time(dir.path / *on_disk.begin());
  Device dev2 = Device::open(opt);
  ops::mm(Tensor::from_host(dev2, {3, 5}, std::vector<float>(15, 1.0f)),
          Tensor::from_host(dev2, {5, 7}, std::vector<float>(35, 1.0f)));
  dev2.synchronize();
  EXPECT_EQ(detail::dumped_kernel_files(), files);
  EXPECT_EQ(fs::last_write_time(dir.path / *on_disk.begin()), before);
}

TEST(KernelDump, AnUnwritableDirectoryIsAnErrorBeforeAnyWork) {
  EXPECT_THROW(detail::set_kernel_dump_dir("/proc/wgtrain-no-such-dir"), Error);
  const fs::path file = fs::temp_directory_path() / ("wgtrain_kernel_dump_file_" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  try {
    detail::set_kernel_dump_dir(file.string());
    ADD_FAILURE() << "a file passed as the dump directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  fs::remove(file);
  detail::set_kernel_dump_dir("");
  EXPECT_EQ(detail::kernel_dump_dir(), "");
}

// ---- the CLI ----------------------------------------------------------------------------------------------------

struct CliRun {
  int status;
  std::string output;
};

CliRun run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " '" + WGTRAIN_CLI_PATH + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t k;
  while ((k = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), k);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(KernelsCli, ListsTheWgslKernelsAndTheSpirvModulesWithTheirFields) {
  const CliRun r = run_cli("kernels");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("matmul/gemm "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TM{4|8}"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CHUNKS{0|1|2|3|4|5|6|7|8}"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matmul/gemm_tm8_b0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-DTM=8 -DB_MODE=0"), std::string::npos) << r.output;
  // Each native module says which WGSL variant fields it serves.
  EXPECT_NE(r.output.find("serves: WG=1024 VEC4=true IN_PLACE=true"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("undeclared"), std::string::npos) << r.output;
  const CliRun v = run_cli("kernels -v");
  ASSERT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("outputs per thread per side"), std::string::npos) << v.output;
}

TEST(KernelsCli, ABadDumpDirectoryIsAOneLineErrorBeforeAnyWork) {
  for (const auto& [args, env] :
       {std::pair<std::string, std::string>{"kernels --dump /proc/wgtrain-nope", ""},
        {"ops", "WGTRAIN_DUMP_KERNELS=/proc/wgtrain-nope"}}) {
    SCOPED_TRACE(args + " " + env);
    const CliRun r = run_cli(args, env);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output.rfind("wgtrain: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("/proc/wgtrain-nope"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "more than one line: " << r.output;
  }
}

TEST(KernelsCli, AnyCommandDumpsThroughTheEnvironment) {
  const fs::path dir = fs::temp_directory_path() / ("wgtrain_kernel_env_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path in = dir.string() + ".in.safetensors", out = dir.string() + ".out.safetensors";
  {
    // mm of a [3, 4] and a [4, 5] through run-op.
    safetensors::Contents c;
    for (const auto& [name, shape] : {std::pair<std::string, Shape>{"self", {3, 4}}, {"mat2", {4, 5}}}) {
      safetensors::Array x;
      x.dtype = "F32";
      x.shape = shape;
      const std::vector<float> v(static_cast<size_t>(numel(shape)), 0.5f);
      x.bytes.resize(v.size() * 4);
      std::memcpy(x.bytes.data(), v.data(), x.bytes.size());
      c.tensors[name] = x;
    }
    safetensors::save(in.string(), c);
  }
  const CliRun r = run_cli("run-op mm --in '" + in.string() + "' --out '" + out.string() + "'",
                        "WGTRAIN_DUMP_KERNELS='" + dir.string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  // The fp32 GEMM the op took (gemm.wgsl or, by the tiling table's choice, gemm_tiled.wgsl), each file whole.
  // (Which variant a process compiles, name by name: KernelDump.HoldsTheGemmVariantsARunCompiledAsTheDeviceBuiltThem.)
  int gemms = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("matmul.gemm", 0) != 0) continue;
    ++gemms;
    EXPECT_NE(f.find(".B_MODE-0."), std::string::npos) << f;
    const std::string text = read_file(e.path());
    EXPECT_NE(text.find("@compute"), std::string::npos) << f;
    EXPECT_EQ(text.find("{{"), std::string::npos) << f;
  }
  EXPECT_EQ(gemms, 1);
  fs::remove_all(dir);
  fs::remove(in);
  fs::remove(out);
}

// WGTRAIN_KERNEL_OVERRIDES: a file named after a kernel replaces its text (for timing a changed kernel without a
// rebuild), only while the variable is set; names that are not kernels stay errors.
TEST(KernelOverride, AFileNamedAfterAKernelReplacesItsTextWhileTheVariableIsSet) {
  const fs::path dir = fs::temp_directory_path() / ("wgtrain-override-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string embedded(detail::kernel_source("fused_ce/count"));
  const std::string text = "// replaced\n" + embedded;
  std::ofstream(dir / "fused_ce.count.wgsl") << text;
  ASSERT_EQ(::setenv(detail::kKernelOverridesEnv, dir.c_str(), 1), 0);
  testing::internal::CaptureStderr();
  const std::string got(detail::kernel_source("fused_ce/count"));
  const std::string said = testing::internal::GetCapturedStderr();
  const std::string other(detail::kernel_source("fused_ce/finish"));  // no file: the embedded text
  EXPECT_THROW(detail::kernel_source("fused_ce/none"), Error);
  ::unsetenv(detail::kKernelOverridesEnv);
  EXPECT_EQ(got, text);
  EXPECT_NE(said.find("fused_ce/count from " + (dir / "fused_ce.count.wgsl").string()), std::string::npos) << said;
  EXPECT_EQ(other, std::string(detail::kernel_source("fused_ce/finish")));
  EXPECT_EQ(std::string(detail::kernel_source("fused_ce/count")), embedded);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wgtrain

