// `wgtrain run-op`: every registered op round-trips through safetensors files and gives what the op gives in
// process, bit for bit; bad input is a one-line error and a non-zero exit.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>
#include <filesystem>
#include <optional>
#include <sstream>

#include "support/test_support.h"
#include "wgtrain/registry.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {
namespace {

namespace st = safetensors;
namespace fs = std::filesystem;

struct InputSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  double lo = 0.1, hi = 2.0;  // floats inside every unary op's domain; ints are drawn from [lo, hi]
};
struct Example {
  std::vector<InputSpec> inputs;
  std::map<std::string, std::string> args;
};

// One small call per op. Rules cover the table-driven families; the rest are spelled out. An op with neither fails
// the test, so a new op cannot ship without a run-op check.
std::optional<Example> example_for(const OpSchema& s) {
  const std::string& n = s.name;
  const DType I = DType::I32, B = DType::Bool;
  static const std::map<std::string, Example> explicit_examples = {
      {"contiguous", {{{"self", {3, 4}}}, {}}},
      {"permute", {{{"self", {2, 3, 4}}}, {{"dims", "2,0,1"}}}},
      {"transpose", {{{"self", {3, 5}}}, {{"dim0", "1"}, {"dim1", "0"}}}},
      {"reshape", {{{"self", {2, 6}}}, {{"shape", "3,-1"}}}},
      {"slice", {{{"self", {10, 3}}}, {{"dim", "0"}, {"start", "1"}, {"end", "9"}, {"step", "3"}}}},
      {"expand_copy", {{{"self", {3, 1}}}, {{"size", "2,3,4"}}}},
      {"fill", {{{"self", {2, 3}}}, {{"value", "1.5"}}}},
      {"cat", {{{"t0", {2, 3}}, {"t1", {1, 3}}, {"t2", {4, 3}}}, {{"dim", "0"}}}},
      {"where", {{{"condition", {3, 1}, B, 0, 1}, {"self", {3, 4}}, {"other", {4}}}, {}}},
      {"masked_fill.Scalar", {{{"self", {3, 4}}, {"mask", {4}, B, 0, 1}}, {{"value", "-1"}}}},
      {"logical_not", {{{"self", {5}, B, 0, 1}}, {}}},
      {"gather", {{{"self", {4, 3}}, {"index", {2, 3}, I, 0, 3}}, {{"dim", "0"}}}},
      {"embedding", {{{"weight", {10, 4}}, {"indices", {5}, I, 0, 9}}, {}}},
      {"rms_norm", {{{"input", {3, 5}}, {"weight", {5}}}, {{"eps", "1e-5"}}}},
      {"rms_norm_backward",
       {{{"grad_output", {3, 5}}, {"input", {3, 5}}, {"weight", {5}}, {"rstd", {3}}}, {}}},
      {"rope", {{{"self", {2, 3, 2, 4}}, {"cos", {3, 2}}, {"sin", {3, 2}}}, {{"scale", "0.5"}}}},
      {"swiglu", {{{"gate", {3, 5}, DType::F32, -4, 4}, {"up", {3, 5}}}, {}}},
      {"swiglu_backward", {{{"grad_output", {2, 6}}, {"gate", {2, 6}, DType::F32, -4, 4}, {"up", {2, 6}}}, {}}},
      {"embedding_backward", {{{"grad_output", {2, 5, 3}}, {"indices", {2, 5}, I, 0, 6}}, {{"num_weights", "7"}}}},
      {"mm", {{{"self", {3, 4}}, {"mat2", {4, 5}}}, {}}},
      {"bmm", {{{"self", {2, 3, 4}}, {"mat2", {2, 4, 5}}}, {}}},
      {"linear", {{{"input", {2, 3, 4}}, {"weight", {5, 4}}, {"bias", {5}}}, {}}},
      {"_softmax", {{{"self", {2, 7, 7}}}, {{"dim", "-1"}, {"causal", "true"}}}},
      {"_log_softmax", {{{"self", {3, 7}}}, {{"dim", "0"}}}},
      {"_softmax_backward_data", {{{"grad_output", {3, 7}}, {"output", {3, 7}}}, {{"dim", "-1"}}}},
      {"sum", {{{"self", {3, 4, 5}}}, {{"dim", "0,2"}, {"keepdim", "true"}}}},
      {"mean", {{{"self", {3, 4, 5}}}, {{"dim", "1"}}}},
      {"pow.Scalar", {{{"self", {7}}}, {{"exponent", "3"}}}},
      {"linear_q4gsw",
       {{{"input", {3, 20}}, {"weight", {6, 10}, I, 0, 255}, {"scales", {1, 6}, DType::F32, 0.01, 0.1}},
        {{"group_size", "32"}}}},
      {"linear_q4gsw_backward",
       {{{"grad_output", {3, 6}}, {"weight", {6, 10}, I, 0, 255}, {"scales", {1, 6}, DType::F32, 0.01, 0.1}},
        {{"group_size", "32"}, {"in_features", "20"}}}},
      {"linear_dW", {{{"grad_output", {4, 6}}, {"input", {4, 5}}, {"grad", {6, 5}}}, {}}},
      {"attention", {{{"q", {2, 5, 4, 8}, DType::F32, -1, 1}, {"k", {2, 7, 2, 8}, DType::F32, -1, 1},
                      {"v", {2, 7, 2, 8}, DType::F32, -1, 1}}, {{"scale", "0.4"}}}},
      {"attention_backward",
       {{{"grad_output", {2, 5, 32}, DType::F32, -1, 1}, {"q", {2, 5, 4, 8}, DType::F32, -1, 1},
         {"k", {2, 7, 2, 8}, DType::F32, -1, 1}, {"v", {2, 7, 2, 8}, DType::F32, -1, 1},
         {"out", {2, 5, 32}, DType::F32, -1, 1}, {"lse", {2, 4, 5}, DType::F32, 1, 3}},
        {}}},
      {"fused_ce", {{{"logits", {5, 11}, DType::F32, -3, 3}, {"labels", {5}, I, -1, 10}}, {}}},
      {"adamw_step",
       {{{"param", {7}}, {"grad", {7}}, {"m", {7}}, {"v", {7}}}, {{"lr", "0.01"}, {"step", "3"}}}},
      {"dropout", {{{"self", {3, 5}}, {"key", {4}, I, 0, 1000}}, {{"p", "0.3"}, {"stream", "7"}}}},
      {"dropout_mask", {{{"key", {4}, I, 0, 1000}}, {{"p", "0.3"}, {"shape", "2,3,5"}}}},
      {"q4gsw_requant",
       {{{"latent", {6, 20}}, {"scales", {1, 6}}}, {{"group_size", "32"}, {"recompute_scales", "true"}}}},
  };
  if (auto it = explicit_examples.find(n); it != explicit_examples.end()) return it->second;
  const bool scalar = n.size() > 7 && n.substr(n.size() - 7) == ".Scalar";
  if ((s.family == "elementwise" || s.family == "select") && scalar && s.inputs.size() == 1)
    return Example{{{"self", {5}}}, {{"other", "2"}}};
  if ((s.family == "elementwise" || s.family == "select") && s.inputs.size() == 2) {
    Example e{{{s.inputs[0], {3, 4}}, {s.inputs[1], {4}}}, {}};
    if (s.family == "select") e.inputs = {{s.inputs[0], {3, 4}, DType::F32, 0, 2}, {s.inputs[1], {4}, DType::F32, 0, 2}};
    for (const auto& a : s.args)
      if (a.name == "alpha") e.args["alpha"] = "0.5";
    return e;
  }
  if (s.family == "elementwise" && s.inputs.size() == 1) return Example{{{"self", {7}}}, {}};
  return std::nullopt;
}

st::Array random_array(const InputSpec& in) {
  const int64_t n = numel(in.shape);
  st::Array a;
  a.shape = in.shape;
  if (in.dtype == DType::F32) {
    const auto h = test::random_host(in.shape, in.lo, in.hi);
    std::vector<float> v(h.data.begin(), h.data.end());
    a.dtype = "F32";
    a.bytes.resize(n * 4);
    std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  } else {
    const auto h = test::random_ints(in.shape, static_cast<int>(in.lo), static_cast<int>(in.hi));
    if (in.dtype == DType::Bool) {
      a.dtype = "BOOL";
      for (double v : h.data) a.bytes.push_back(v != 0);
    } else {
      std::vector<int32_t> v(h.data.begin(), h.data.end());
      a.dtype = "I32";
      a.bytes.resize(n * 4);
      std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
    }
  }
  return a;
}

struct Result {
  int status;
  std::string output;
};

Result run_cli(const std::string& args) {
  const std::string cmd = std::string("'") + WGTRAIN_CLI_PATH + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t k;
  while ((k = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), k);
  const int stt = pclose(p);
  return {WIFEXITED(stt) ? WEXITSTATUS(stt) : -1, out};
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("wgtrain_run_op_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const auto& s : Registry::global().all()) v.push_back(s.name);
  return v;
}

class RunOp : public ::testing::TestWithParam<std::string> {};

TEST_P(RunOp, RoundTripsThroughSafetensorsLikeTheOpInProcess) {
  const OpSchema& schema = Registry::global().get(GetParam());
  const auto ex = example_for(schema);
  ASSERT_TRUE(ex.has_value()) << "no run-op example for '" << schema.name << "': add one to tests/run_op_test.cpp";
  st::Contents in;
  for (const auto& spec : ex->inputs) in.tensors[spec.name] = random_array(spec);
  std::string file_safe = schema.name;
  for (char& c : file_safe)
    if (c == '.') c = '_';
  const fs::path in_path = scratch(file_safe + ".in.safetensors"), out_path = scratch(file_safe + ".out.safetensors");
  st::save(in_path.string(), in);
  std::string cmd = "run-op " + schema.name + " --in '" + in_path.string() + "' --out '" + out_path.string() + "'";
  OpArgs args;
  for (const auto& [k, v] : ex->args) {
    cmd += " --arg '" + k + "=" + v + "'";
    args.set(k, v);
  }
  const Result r = run_cli(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  const st::Contents out = st::load(out_path.string());

  OpTensors inputs;
  for (const auto& [name, a] : in.tensors) inputs.emplace(name, st::to_tensor(test::device(), a, name));
  const OpTensors want = run_op(test::device(), schema.name, inputs, args);
  ASSERT_EQ(out.tensors.size(), want.size());
  for (const auto& [name, t] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(out.tensors.count(name));
    const st::Array w = st::from_tensor(t);
    EXPECT_EQ(out.tensors.at(name).dtype, w.dtype);
    EXPECT_EQ(out.tensors.at(name).shape, w.shape);
    EXPECT_EQ(out.tensors.at(name).bytes, w.bytes) << "the CLI's result differs from the op's";
  }
  EXPECT_EQ(out.metadata.at("op"), schema.name);
  fs::remove(in_path);
  fs::remove(out_path);
}

INSTANTIATE_TEST_SUITE_P(EveryOp, RunOp, ::testing::ValuesIn(op_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

void expect_one_line_error(const std::string& args, const std::string& needle) {
  const Result r = run_cli(args);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "not one line: " << r.output;
  EXPECT_EQ(r.output.rfind("wgtrain: ", 0), 0u) << r.output;
}

TEST(RunOpErrors, BadInputIsAOneLineError) {
  st::Contents c;
  c.tensors["self"] = random_array({"self", {3, 4}});
  c.tensors["mat2"] = random_array({"mat2", {5, 2}});
  const std::string bad_shape = scratch("bad_shape.safetensors").string();
  st::save(bad_shape, c);
  const std::string out = scratch("never.safetensors").string();
  expect_one_line_error("run-op no_such_op --in '" + bad_shape + "' --out '" + out + "'", "unknown op");
  expect_one_line_error("run-op mm --in '" + bad_shape + "' --out '" + out + "'", "cannot be multiplied");

  st::Contents missing;
  missing.tensors["self"] = c.tensors["self"];
  const std::string missing_path = scratch("missing.safetensors").string();
  st::save(missing_path, missing);
  expect_one_line_error("run-op mm --in '" + missing_path + "' --out '" + out + "'", "missing input tensor 'mat2'");

  st::Contents ints;
  ints.tensors["self"] = random_array({"self", {3, 4}, DType::I32, 0, 3});
  ints.tensors["mat2"] = random_array({"mat2", {4, 2}, DType::I32, 0, 3});
  const std::string ints_path = scratch("ints.safetensors").string();
  st::save(ints_path, ints);
  expect_one_line_error("run-op mm --in '" + ints_path + "' --out '" + out + "'", "expected float32");

  // Corrupt and truncated files.
  auto bytes = st::serialize(c);
  const std::string trunc = scratch("truncated.safetensors").string();
  {
    std::ofstream f(trunc, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size() - 5));
  }
  expect_one_line_error("run-op mm --in '" + trunc + "' --out '" + out + "'", "truncated");
  const std::string longhdr = scratch("long_header.safetensors").string();
  {
    auto b = bytes;
    b[0] = 0xff;
    b[1] = 0xff;
    std::ofstream f(longhdr, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  expect_one_line_error("run-op mm --in '" + longhdr + "' --out '" + out + "'", "longer than");
  const std::string garbage = scratch("garbage.safetensors").string();
  {
    std::ofstream f(garbage, std::ios::binary);
    f << "not a safetensors file at all";
  }
  expect_one_line_error("run-op mm --in '" + garbage + "' --out '" + out + "'", "safetensors");
  expect_one_line_error("run-op sum --in '" + missing_path + "' --out '" + out + "' --arg dim=x", "not a valid");
  EXPECT_FALSE(fs::exists(out)) << "no output file after a failure";
  fs::remove_all(fs::path(out).parent_path());
}

}  // namespace
}  // namespace wgtrain
