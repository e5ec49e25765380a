#include "cli/kernels.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "cli/backend.h"
#include "gpu/spirv.h"
#include "gpu/device_impl.h"
#include "gpu/kernels.h"
#include "ops/attention/attention_variants.h"
#include "wgtrain/adamw.h"
#include "wgtrain/attention.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/llama.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/registry.h"

namespace wgtrain::cli {

namespace {

// ---- the listing ----------------------------------------------------------------------------------------------

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

void list_kernels(bool verbose) {
  const auto wgsl = detail::embedded_kernels();
  std::printf("WGSL kernels (WebGPU): src/ops/<name>.wgsl, each variant rendered from it by substituting its\n"
              "fields (declared in its header as @variant lines; `wgtrain kernels --dump DIR` writes the variants\n"
              "compiled)\n");
  size_t width = 0;
  for (const auto& k : wgsl) width = std::max(width, std::string_view(k.name).size());
  for (const auto& k : wgsl) {
    if (detail::kernel_is_include(k.name)) {
      std::printf("  %-*s  (shared helpers, included by others)\n", static_cast<int>(width), k.name);
      continue;
    }
    const auto fields = detail::kernel_fields(k.name);
    std::vector<std::string> parts;
    for (const auto& f : fields) {
      std::string part = f.key;
      if (!f.values.empty()) part += "{" + joined(f.values, "|") + "}";
      if (!f.declared) part += "(undeclared)";
      parts.push_back(part);
    }
    const std::string listed = parts.empty() ? "(one variant)" : joined(parts, " ");
    std::printf("  %-*s  %s\n", static_cast<int>(width), k.name, listed.c_str());
    if (!verbose) continue;
    for (const auto& f : fields)
      std::printf("  %-*s    %-10s %s%s\n", static_cast<int>(width), "", f.key.c_str(),
                  f.declared ? f.meaning.c_str() : "(no @variant line)", f.used ? "" : " (not used by the text)");
  }

  const auto spirv = detail::embedded_spirv();
  std::printf("\nSPIR-V modules (the native Vulkan backend): src/ops/<kernel>.comp compiled by glslc at build time, "
              "once per\nline of the .variants file beside it (the -D options), serving the WGSL variant fields "
              "after \"serves\" (an op's\nhost code asks both backends for the same fields)\n");
  width = 0;
  for (const auto& m : spirv) width = std::max(width, std::string_view(m.name).size());
  for (const auto& m : spirv) {
    std::string fields = *m.defines ? m.defines : "-";
    for (const auto& v : detail::spirv_variants())
      if (std::string_view(v.module) == m.name) fields += std::string("  serves: ") + (*v.when ? v.when : "any");
    if (*m.spec) fields += std::string("  spec: ") + m.spec;
    std::printf("  %-*s  %-26s %s", static_cast<int>(width), m.name, m.source, fields.c_str());
    if (verbose) std::printf("  (%zu words)", m.words);
    std::printf("\n");
  }
  std::printf("\n%zu WGSL files, %zu SPIR-V modules\n", wgsl.size(), spirv.size());
}

// ---- the workload of --dump -----------------------------------------------------------------------------------

std::mt19937_64& rng() {
  static std::mt19937_64 g(20240613);
  return g;
}

Tensor random_floats(Device& dev, const Shape& shape, double lo, double hi) {
  std::uniform_real_distribution<float> d(static_cast<float>(lo), static_cast<float>(hi));
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = d(rng());
  return Tensor::from_host(dev, shape, v);
}

Tensor random_ints(Device& dev, const Shape& shape, int lo, int hi, DType dtype) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(numel(shape)));
  for (auto& x : v) x = d(rng());
  if (dtype == DType::Bool) {
    std::vector<uint8_t> b;
    for (int32_t x : v) b.push_back(x != 0 ? 1 : 0);
    return Tensor::from_host_bool(dev, shape, b);
  }
  return Tensor::from_host(dev, shape, v);
}

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

// Small inputs for one call of each registered op, as `wgtrain run-op` would get them (tests/run_op_test.cpp keeps
// the same kind of table, to check run-op against each op).
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
      {"rms_norm_backward", {{{"grad_output", {3, 5}}, {"input", {3, 5}}, {"weight", {5}}, {"rstd", {3}}}, {}}},
      {"rope", {{{"self", {2, 3, 2, 4}}, {"cos", {3, 2}}, {"sin", {3, 2}}}, {{"scale", "0.5"}}}},
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
      {"adamw_step", {{{"param", {7}}, {"grad", {7}}, {"m", {7}}, {"v", {7}}}, {{"lr", "0.01"}, {"step", "3"}}}},
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
    if (s.family == "select")
      e.inputs = {{s.inputs[0], {3, 4}, DType::F32, 0, 2}, {s.inputs[1], {4}, DType::F32, 0, 2}};
    for (const auto& a : s.args)
      if (a.name == "alpha") e.args["alpha"] = "0.5";
    return e;
  }
  if (s.family == "elementwise" && s.inputs.size() == 1) return Example{{{"self", {7}}}, {}};
  return std::nullopt;
}

Q4Weight random_q4(Device& dev, int64_t n, int64_t k, int64_t group) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * q4gsw::bytes_per_row(k)));
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng()));
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  std::vector<float> scales(static_cast<size_t>(q4gsw::groups(k, group) * n));
  for (auto& s : scales) s = sc(rng());
  return q4gsw::upload(dev, bytes, scales, n, k, group);
}

// The variants training at real sizes compiles that the small calls above do not: 128 x 128 GEMM tiles in each form
// of A and B, split-K (the GPU's policy for weight gradients), and fused_ce's streaming and in-place forms.
void larger_calls(Device& dev) {
  const Tensor a = random_floats(dev, {130, 136}, -1, 1), b = random_floats(dev, {136, 132}, -1, 1);
  ops::mm(a, b);                                                       // A and B as vec4s
  ops::mm(ops::contiguous(a.transpose(0, 1)).transpose(0, 1), b);      // A through a transposed view
  ops::linear(a, random_floats(dev, {132, 136}, -1, 1), std::nullopt);  // B = W^T, a strided view
  ops::mm(random_floats(dev, {130, 135}, -1, 1), random_floats(dev, {135, 130}, -1, 1));  // K, N not multiples of 4
  const Q4Weight w = random_q4(dev, 132, 136, 32);
  ops::linear_q4gsw(a, w);
  ops::linear_q4gsw_backward(random_floats(dev, {130, 132}, -1, 1), w);
  // Split-K, as a GPU splits weight gradients (a CPU rasteriser never does): with and without accumulation.
  int& split_k = dev.impl().split_k;
  const int saved = split_k;
  split_k = 1;
  try {
    const Tensor dy = random_floats(dev, {130, 132}, -1, 1);
    const Tensor grad = random_floats(dev, {132, 136}, -1, 1);
    ops::linear_dW(dy, a);
    ops::linear_dW(dy, a, &grad);
  } catch (...) {
    split_k = saved;
    throw;
  }
  split_k = saved;
  // Attention at base's head dim (64), forward and backward (the tiny training step below runs hd 32).
  {
    const Tensor q = random_floats(dev, {2, 70, 4, 64}, -1, 1), kv = random_floats(dev, {2, 70, 2, 64}, -1, 1);
    const ops::Attention a = ops::attention(q, kv, kv, 0.125);
    ops::attention_backward(random_floats(dev, {2, 70, 256}, -1, 1), q, kv, kv, a, 0.125);
    // The row kernels too (the fallback past hd 128 and where no tiled variant fits).
    ops::detail::attention_force = ops::detail::kRowKernels;
    try {
      const ops::Attention r = ops::attention(q, kv, kv, 0.125);
      ops::attention_backward(random_floats(dev, {2, 70, 256}, -1, 1), q, kv, kv, r, 0.125);
    } catch (...) {
      ops::detail::attention_force = ops::detail::kTableChoice;
      throw;
    }
    ops::detail::attention_force = ops::detail::kTableChoice;
  }
  // fused_ce with rows too long to keep in registers (scalar and vec4), and in place.
  for (int64_t v : {int64_t{8193}, int64_t{32772}}) {
    const Tensor logits = random_floats(dev, {2, v}, -3, 3);
    const Tensor labels = random_ints(dev, {2}, 0, static_cast<int>(v - 1), DType::I32);
    ops::fused_ce(logits, labels);
    ops::fused_ce(ops::contiguous(logits), labels, std::nullopt, true);
  }
}

// One training step of the tiny preset (forward, backward, AdamW, requantisation), recorded and replayed as the
// trainer runs it.
void training_step(Device& dev) {
  const LlamaConfig c = LlamaConfig::preset("tiny");
  const int64_t B = 2, T = 32;
  Llama model(dev, c, 1);
  const Tensor m = ops::full(dev, {model.arena_size()}, 0.0), v = ops::full(dev, {model.arena_size()}, 0.0);
  ops::AdamWOptions ao;
  ao.lr = 1e-3;
  ops::AdamW opt(model.adamw_params(m, v), ao);
  const Tensor tokens = random_ints(dev, {B, T}, 0, static_cast<int>(c.vocab_size - 1), DType::I32);
  const Tensor targets = random_ints(dev, {B * T}, 0, static_cast<int>(c.vocab_size - 1), DType::I32);
  Tensor loss;
  const Recording step = dev.record([&] { loss = model.train_step(tokens, targets, opt); });
  step.replay();
  (void)loss.to_host_f32();
}

int dump_kernels(const KernelsCliOptions& opt) {
  // The directory first: a bad one is reported before any device work.
  detail::set_kernel_dump_dir(opt.dump_dir);
  DeviceOptions dopt;
  dopt.backend = backend_for(opt.backend, "kernels --dump", false);
  // What is dumped is the WGSL a WebGPU backend compiles; the native backend's kernels are the .comp files as they are.
  if (dopt.backend == Backend::NativeVulkan)
    throw ArgumentError("kernels --dump writes the WGSL variants WebGPU compiles; the native-vulkan backend runs the "
                        ".comp files as written (`wgtrain kernels` lists its modules). Use a webgpu backend");
  Device dev = Device::open(dopt);
  std::printf("device: %s (%s)\n", dev.info().name.c_str(), dev.info().backend_label.c_str());

  std::vector<std::string> failed, skipped;
  auto attempt = [&](const std::string& what, const std::function<void()>& fn) {
    try {
      fn();
      dev.synchronize();
    } catch (const Error& e) {
      std::string msg = e.what();
      std::replace(msg.begin(), msg.end(), '\n', ' ');
      std::printf("%s failed: %s\n", what.c_str(), msg.c_str());
      failed.push_back(what);
    }
  };
  for (const OpSchema& s : Registry::global().all()) {
    const auto ex = example_for(s);
    if (!ex) {
      skipped.push_back(s.name);
      continue;
    }
    attempt(s.name, [&] {
      OpTensors inputs;
      for (const auto& in : ex->inputs)
        inputs.emplace(in.name, in.dtype == DType::F32 ? random_floats(dev, in.shape, in.lo, in.hi)
                                                       : random_ints(dev, in.shape, static_cast<int>(in.lo),
                                                                     static_cast<int>(in.hi), in.dtype));
      run_op(dev, s.name, inputs, OpArgs(ex->args));
    });
  }
  attempt("larger GEMM and fused_ce calls", [&] { larger_calls(dev); });
  attempt("a training step (tiny preset)", [&] { training_step(dev); });

  const std::vector<std::string> files = detail::dumped_kernel_files();
  std::printf("%zu kernel variants written to %s:\n", files.size(), opt.dump_dir.c_str());
  for (const auto& f : files) std::printf("  %s\n", f.c_str());
  if (!skipped.empty()) std::printf("ops with no example call here (not run): %s\n", joined(skipped, ", ").c_str());
  if (!failed.empty()) throw Error("kernels --dump: " + std::to_string(failed.size()) + " of the calls failed (" +
                                   joined(failed, ", ") + "); the variants they compiled are written");
  return 0;
}

}  // namespace

CLI::App* add_kernels_command(CLI::App& app, KernelsCliOptions& opt) {
  auto* cmd = app.add_subcommand("kernels", "list the GPU kernels and their variant fields; --dump DIR writes the "
                                            "variants a small workload compiles, as the GPU compiler got them");
  cmd->add_flag("-v,--verbose", opt.verbose, "each variant field's meaning");
  cmd->add_option("--dump", opt.dump_dir,
                  "run every op on small inputs and one training step, writing each WGSL variant compiled to this "
                  "directory (any command does so with WGTRAIN_DUMP_KERNELS=DIR)");
  cmd->add_option("--backend", opt.backend, "with --dump: auto, webgpu-vulkan, opengl or opengles");
  return cmd;
}

int run_kernels(const KernelsCliOptions& opt) {
  if (!opt.dump_dir.empty()) return dump_kernels(opt);
  list_kernels(opt.verbose);
  return 0;
}

}  // namespace wgtrain::cli
