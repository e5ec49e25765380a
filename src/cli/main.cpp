// wgtrain: the command-line interface.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "cli/backend.h"
#include "cli/bench.h"
#include "cli/checks.h"
#include "cli/kernels.h"
#include "cli/tokenize.h"
#include "cli/model.h"
#include "cli/train.h"
#include "gpu/dawn.h"
#include "gpu/features.h"
#include "gpu/kernels.h"
#include "gpu/webgpu_abi.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/lora.h"
#include "wgtrain/memory_estimate.h"
#include "gpu/backend.h"
#include "wgtrain/registry.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/tensor.h"

namespace {

using namespace wgtrain;


// The native backend: its device, and the physical devices to pick from.
int cmd_devices_native(const Device& dev) {
  const AdapterInfo& i = dev.info();
  const DeviceLimits& l = dev.limits();
  std::printf("backend:      native-vulkan (GLSL kernels for the training ops; `wgtrain ops` lists them)\n");
  std::printf("device:       %s (%s)\n", i.name.c_str(), i.adapter_type.c_str());
  std::printf("driver:       %s\n", i.driver.c_str());
  std::printf("subgroup:     %u lanes\n", i.subgroup_max);
  std::printf("storage buffer range  %s\n", format_bytes(l.max_storage_binding_size).c_str());
  std::printf("timestamps            %s\n", dev.features().timestamp_query ? "yes" : "no");
  std::printf("\nphysical devices (pick one with WGTRAIN_VULKAN_DEVICE=<index>):\n");
  const auto physical = detail::list_vulkan_devices();
  for (size_t k = 0; k < physical.size(); ++k)
    std::printf("  %zu  %s (%s)\n", k, physical[k].name.c_str(), physical[k].type.c_str());
  return 0;
}

int cmd_devices(const std::string& backend, bool subgroup_matrix) {
  DeviceOptions opt;
  opt.backend = cli::backend_for(backend, "devices", false);
  opt.subgroup_matrix = subgroup_matrix;
  Device dev = Device::open(opt);
  if (dev.info().backend == Backend::NativeVulkan) return cmd_devices_native(dev);
  const AdapterInfo& i = dev.info();
  const DeviceLimits& l = dev.limits();
  const DeviceFeatures& f = dev.features();
  std::printf("adapter:      %s\n", i.name.c_str());
  // llvmpipe reports no vendor: say so, and what the adapter is, rather than print an empty field.
  std::string vendor = i.vendor;
  if (vendor.empty()) vendor = i.software ? "(none reported; a CPU rasteriser)" : "(none reported)";
  if (!i.architecture.empty()) vendor += " / " + i.architecture;
  std::printf("vendor:       %s\n", vendor.c_str());
  std::printf("driver:       %s\n", i.driver.c_str());
  std::printf("backend:      %s%s\n", i.backend_label.c_str(), i.compatibility_mode ? " (compatibility mode)" : "");
  std::printf("type:         %s\n", i.adapter_type.c_str());
  // The adapter reports a subgroup size even where shaders cannot use subgroups (llvmpipe's OpenGL backend).
  if (i.subgroup_max && f.subgroups)
    std::printf("subgroups:    %u..%u lanes\n", i.subgroup_min, i.subgroup_max);
  else
    std::printf("subgroups:    not available to shaders (the subgroups feature is not offered)\n");
  std::printf("library:      %s\n", gpu::dawn_library_path().c_str());
  std::printf("\nlimits granted to the device:\n");
  std::printf("  max buffer size                 %s\n", format_bytes(l.max_buffer_size).c_str());
  std::printf("  max storage buffer binding      %s  (the largest tensor a kernel reads whole; the trainable "
              "weights are one)\n",
              format_bytes(l.max_storage_binding_size).c_str());
  std::printf("  max uniform buffer binding      %s\n", format_bytes(l.max_uniform_binding_size).c_str());
  std::printf("  storage buffers per stage       %u\n", l.max_storage_buffers_per_stage);
  std::printf("  workgroup storage               %s\n", format_bytes(l.max_workgroup_storage).c_str());
  std::printf("  invocations per workgroup       %u\n", l.max_invocations_per_workgroup);
  std::printf("  workgroup size x / y / z        %u / %u / %u\n", l.max_workgroup_size_x, l.max_workgroup_size_y,
              l.max_workgroup_size_z);
  std::printf("  workgroups per dimension        %u\n", l.max_workgroups_per_dim);
  std::printf("  uniform / storage offset align  %u / %u\n", l.min_uniform_offset_alignment,
              l.min_storage_offset_alignment);
  std::printf("\nfeatures wgtrain can use:\n");
  const std::pair<uint32_t, bool> used[] = {{webgpu::WGPUFeatureName_TimestampQuery, f.timestamp_query},
                                            {webgpu::WGPUFeatureName_ShaderF16, f.shader_f16},
                                            {webgpu::WGPUFeatureName_Subgroups, f.subgroups},
                                            {webgpu::WGPUFeatureName_SubgroupMatrix, f.subgroup_matrix}};
  for (const auto& [feature, enabled] : used) {
    const bool offered = std::find(f.adapter_raw.begin(), f.adapter_raw.end(), feature) != f.adapter_raw.end();
    std::string name = gpu::feature_name(feature);
    if (name.rfind("chromium-experimental-", 0) == 0) name = name.substr(22);  // to fit the column
    std::printf("  %-16s  %-11s  %s\n", name.c_str(), enabled ? "enabled" : offered ? "offered" : "not offered",
                gpu::feature_use(feature).c_str());
  }
  if (!f.subgroup_matrix_configs.empty()) {
    std::printf("subgroup-matrix shapes the adapter offers (%s):\n",
                f.subgroup_matrix ? "enabled" : "enable with --subgroup-matrix");
    for (const auto& c : f.subgroup_matrix_configs)
      std::printf("  %s x %s -> %s  M %u  N %u  K %u\n", c.component_type.c_str(), c.component_type.c_str(),
                  c.result_type.c_str(), c.m, c.n, c.k);
  }
  // The rest, by name, wrapped: rendering and Dawn's own features, which training has no use for.
  std::printf("other features the adapter offers (rendering, texture formats, Dawn internals: unused here):\n");
  std::string line;
  for (uint32_t raw : f.adapter_raw) {
    if (!gpu::feature_use(raw).empty()) continue;
    std::string name = gpu::feature_name(raw);
    if (name.empty()) name = "feature " + std::to_string(raw) + " (unknown to this build)";
    if (!line.empty() && line.size() + name.size() + 2 > 100) {
      std::printf("  %s,\n", line.c_str());
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + name;
  }
  std::printf("  %s\n", line.empty() ? "none" : line.c_str());
  return 0;
}

int cmd_ops(bool verbose) {
  const auto& ops = Registry::global().all();
  std::printf("%-22s %-12s %-14s %-22s %s\n", "op", "family", "backends", "dtypes", "summary");
  for (const auto& s : ops) {
    std::string dtypes, backends;
    for (DType d : s.dtypes) dtypes += (dtypes.empty() ? "" : ",") + std::string(dtype_name(d));
    for (const auto& b : s.backends) backends += (backends.empty() ? "" : ",") + b;
    std::printf("%-22s %-12s %-14s %-22s %s%s\n", s.name.c_str(), s.family.c_str(), backends.c_str(), dtypes.c_str(),
                s.summary.c_str(), s.training_only ? " [training]" : "");
    if (!verbose) continue;
    std::string ins, outs;
    for (const auto& i : s.inputs) ins += (ins.empty() ? "" : ", ") + i;
    for (const auto& o : s.outputs) outs += (outs.empty() ? "" : ", ") + o;
    std::printf("    inputs: %s -> outputs: %s; rank %d..%d\n", ins.c_str(), outs.c_str(), s.min_rank, s.max_rank);
    for (const auto& a : s.args)
      std::printf("    arg %s (%s%s%s): %s\n", a.name.c_str(), a.type.c_str(), a.default_value.empty() ? "" : " = ",
                  a.default_value.c_str(), a.help.c_str());
    for (const auto& c : s.constraints) std::printf("    requires: %s\n", c.c_str());
  }
  std::printf("%zu ops\n", ops.size());
  return 0;
}

int cmd_run_op(const std::string& op, const std::string& in_path, const std::string& out_path,
               const std::vector<std::string>& arg_list, const std::string& backend) {
  const OpSchema& schema = Registry::global().get(op);  // an unknown op fails before any device work
  OpArgs args;
  for (const auto& kv : arg_list) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ArgumentError("--arg '" + kv + "' is not of the form key=value");
    args.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  DeviceOptions opt;
  opt.backend = cli::backend_for(backend, "run-op", false);
  require_ops(opt.backend, {schema.name}, "wgtrain run-op");
  const safetensors::Contents in = safetensors::load(in_path);
  Device dev = Device::open(opt);
  OpTensors inputs;
  for (const auto& [name, array] : in.tensors) inputs.emplace(name, safetensors::to_tensor(dev, array, name));
  const OpTensors outputs = run_op(dev, schema.name, inputs, args);
  safetensors::Contents out;
  out.metadata["op"] = schema.name;
  for (const auto& [k, v] : args.values()) out.metadata["arg." + k] = v;
  for (const auto& [name, t] : outputs) {
    out.tensors.emplace(name, safetensors::from_tensor(t));
    std::printf("%s: %s %s\n", name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
  }
  safetensors::save(out_path, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wgtrain: train and fine-tune small transformer language models on the GPU through WebGPU"};
  app.require_subcommand(1);

  std::string backend = "auto";
  auto* devices = app.add_subcommand("devices", "show the adapter wgtrain picks, its limits and features");
  devices->add_option("--backend", backend, cli::backend_help());
  bool subgroup_matrix = false;
  devices->add_flag("--subgroup-matrix", subgroup_matrix,
                    "open the device with Dawn's experimental subgroup-matrix feature (and allow_unsafe_apis), "
                    "where the adapter offers it");

  bool verbose = false;
  auto* ops = app.add_subcommand("ops", "list the registered ops and what each supports");
  ops->add_flag("-v,--verbose", verbose, "inputs, arguments and constraints of each op");

  std::string op_name, in_path, out_path;
  std::vector<std::string> op_args;
  auto* runop = app.add_subcommand("run-op", "run one registered op on tensors read from a safetensors file");
  runop->add_option("op", op_name, "the op's name, as `wgtrain ops` lists it")->required();
  runop->add_option("--in", in_path, "safetensors file holding the op's input tensors, by input name")->required();
  runop->add_option("--out", out_path, "safetensors file to write the outputs to")->required();
  runop->add_option("--arg", op_args, "an argument key=value (repeatable)");
  runop->add_option("--backend", backend, cli::backend_help());

  cli::KernelsCliOptions kernels_opt;
  auto* kernels = cli::add_kernels_command(app, kernels_opt);

  cli::BenchOptions bench_opt;
  auto* bench = app.add_subcommand("bench", "time each kernel at training sizes: GFLOP/s, GB/s");
  std::string bench_backend = "auto";
  bench->add_option("--backend", bench_backend, cli::backend_help());
  bench->add_flag("--coopmat", bench_opt.cooperative_matrix,
                  "native Vulkan: cooperative-matrix GEMMs (fp16 operands) where the device offers them");
  bench->add_flag("--subgroup-matrix", bench_opt.subgroup_matrix,
                  "WebGPU: open the device with Dawn's experimental subgroup matrices and their toggles, where offered "
                  "(for comparing the kernels' times with those toggles on)");
  bench->add_option("--precision", bench_opt.precision,
                    "GEMM arithmetic: fp32, or mixed (f16 products on the GPU's matrix units; an error where the "
                    "device has none)")
      ->capture_default_str();
  bench->add_option("--only", bench_opt.only, "run only benchmarks whose name contains this");
  bench->add_option("--json", bench_opt.json_path, "also write the results as JSON lines to this file");
  bench->add_flag("--quick", bench_opt.quick, "small sizes, to check the command anywhere");
  bench->add_option("--train-config", bench_opt.train_config, "train_step: the model preset")->capture_default_str();
  bench->add_option("--train-batch", bench_opt.train_batch, "train_step: sequences per step")
      ->capture_default_str()
      ->check(cli::integer_at_least(1));
  bench->add_option("--train-seq", bench_opt.train_seq, "train_step: tokens per sequence")
      ->capture_default_str()
      ->check(cli::integer_at_least(1));
  bench->add_option("--mm-shapes", bench_opt.mm_shapes,
                    "also time mm at these shapes, MxNxK[,MxNxK...] (a [M, K] times b [K, N], f32, row-major; "
                    "rows named 'mm (shape)', run whatever --only says)");
  bench->add_option("--dump", bench_opt.dump_dir,
                    "train_step: write its initial weights, batch and first losses here (for bench/torch_llama.py)");

  cli::TrainCliOptions train_opt;
  train_opt.train.out_dir.clear();  // default: runs/<model>-<data>
  TrainOptions& t = train_opt.train;
  auto* train = app.add_subcommand("train", "train (or fine-tune) a Llama-style model with q4gsw linears on a corpus");
  // Zero and negative values are errors, not defaults: a default is spelled by leaving the option out.
  using cli::integer_at_least;
  using cli::number_in;
  const double inf = std::numeric_limits<double>::infinity();
  train->add_option("--config", t.model, "model: a preset (tiny, small, base) or a JSON file such as configs/small.json")
      ->capture_default_str();
  train->add_option("--data", t.data, "corpus: brown, fortunes, or a UTF-8 text file")->capture_default_str();
  train->add_option("--steps", t.steps, "train up to this step (default 600; a resumed run: its own)")
      ->check(integer_at_least(1, "leave --steps out for the default"));
  train->add_option("--out", t.out_dir, "run directory (default runs/<config>-<data>)");
  auto* resume = train->add_flag("--resume", t.resume, "continue the run in --out from its checkpoint, bit for bit");
  train->add_flag("--overwrite", t.overwrite, "start over in an --out that holds a run (deletes that run)")
      ->excludes(resume);
  train->add_option("--init-from", t.init_from, "fine-tune: start from the model in this run directory");
  train->add_option("--batch-size", t.batch_size, "sequences per step (default: 16 on a GPU, 8 on a CPU)")
      ->check(integer_at_least(1, "leave --batch-size out for the default"));
  train->add_option("--seq-len", t.seq_len, "tokens per sequence (default: max_seq_len on a GPU, 64 on a CPU)")
      ->check(integer_at_least(1, "leave --seq-len out for the default"));
  train->add_option("--lr", t.lr, "peak learning rate")->capture_default_str()->check(number_in(0, inf, true));
  train->add_option("--min-lr-ratio", t.min_lr_ratio, "final learning rate / peak (cosine decay)")
      ->capture_default_str()
      ->check(number_in(0, 1));
  train->add_option("--warmup", t.warmup, "linear warm-up steps")->capture_default_str()->check(integer_at_least(0));
  train->add_option("--weight-decay", t.weight_decay, "AdamW weight decay on matrices")
      ->capture_default_str()
      ->check(number_in(0, inf));
  train->add_option("--eval-every", t.eval_every, "validation loss every N steps")
      ->capture_default_str()
      ->check(integer_at_least(1));
  train->add_option("--eval-batches", t.eval_batches, "validation batches")
      ->capture_default_str()
      ->check(integer_at_least(1));
  train->add_option("--save-every", t.save_every, "checkpoint every N steps")
      ->capture_default_str()
      ->check(integer_at_least(1));
  train->add_option("--seed", t.seed, "initialisation and batch order")
      ->capture_default_str()
      ->check(cli::unsigned_integer());
  train->add_option("--precision", t.precision,
                    "GEMM arithmetic: fp32, or mixed (f16 products, f32 sums, on the GPU's matrix units through "
                    "Dawn's subgroup matrices; a resumed run keeps its own)")
      ->capture_default_str();
  train->add_option("--backend", train_opt.backend, cli::backend_help());

  cli::GenerateCliOptions gen_opt;
  auto* generate = app.add_subcommand("generate", "generate text from a trained run or a Hugging Face model directory");
  generate->add_option("--model,--ckpt", gen_opt.model,
                       "a run directory (checkpoint.safetensors, tokenizer.json) or a Hugging Face model directory")
      ->required();
  generate->add_option("--prompt", gen_opt.generate.prompt, "text to continue (with --chat: the user's message)");
  generate->add_flag("--chat", gen_opt.generate.chat, "format the prompt with the model's chat template");
  generate->add_option("--system", gen_opt.generate.system, "with --chat: a system message");
  generate->add_option("--max-tokens", gen_opt.generate.max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(integer_at_least(0));
  generate->add_option("--temperature", gen_opt.generate.temperature, "0: greedy")
      ->capture_default_str()
      ->check(number_in(0, inf));
  generate->add_option("--top-k", gen_opt.generate.top_k, "sample among the k likeliest (0: all)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  generate->add_option("--seed", gen_opt.generate.seed, "sampling seed")
      ->capture_default_str()
      ->check(cli::unsigned_integer());
  generate->add_flag("--no-quantize", gen_opt.no_quantize, "a Hugging Face model: keep its linears float32 (not q4gsw)");
  generate->add_option("--group-size", gen_opt.import.group_size, "a Hugging Face model: q4gsw group size (32, 64, 128)")
      ->capture_default_str();
  generate->add_option("--backend", gen_opt.backend, cli::backend_help());

  cli::TokenizeCliOptions tokenize_opt;
  auto* tokenize = cli::add_tokenize_command(app, tokenize_opt);
  generate->add_option("--adapter", gen_opt.adapter, "LoRA adapters (a peft directory, e.g. a finetune run)");

  // finetune: train's machinery on a pretrained model, MLX-LM's flag names where they exist.
  cli::TrainCliOptions ft_opt;
  ft_opt.train.out_dir.clear();
  TrainOptions& f = ft_opt.train;
  f.fine_tune = "lora";
  f.lr = 1e-4;
  f.warmup = 10;
  f.weight_decay = 0.0;
  f.steps = 0;
  f.eval_every = 50;
  f.save_every = 100;
  std::string targets;
  auto* finetune = app.add_subcommand("finetune", "adapt a pretrained model (Hugging Face or a run) to your data, with "
                                                  "LoRA on its frozen 4-bit weights or fully");
  finetune->add_option("--model", f.model, "a Hugging Face model directory or a run directory")->required();
  finetune->add_option("--data", f.data,
                       "a directory with train.jsonl and valid.jsonl, one .jsonl file, or a text corpus")->required();
  finetune->add_option("--fine-tune-type", f.fine_tune, "lora or full")->capture_default_str();
  finetune->add_option("--iters,--steps", f.steps, "train up to this step (default 600)")
      ->check(integer_at_least(1, "leave --iters out for the default"));
  finetune->add_option("--adapter-path,--out", f.out_dir, "run directory for adapters, checkpoints and curves "
                                                          "(default runs/<model>-<data>-<type>)");
  auto* ft_resume =
      finetune->add_flag("--resume", f.resume, "continue the run in --adapter-path from its checkpoint, bit for bit");
  finetune->add_flag("--overwrite", f.overwrite, "start over in an --adapter-path that holds a run (deletes that run)")
      ->excludes(ft_resume);
  finetune->add_option("--batch-size", f.batch_size, "sequences per step (default: 16 on a GPU, 8 on a CPU)")
      ->check(integer_at_least(1, "leave --batch-size out for the default"));
  finetune->add_option("--seq-len,--max-seq-length", f.seq_len,
                       "tokens per sequence (default: 512 on a GPU, 64 on a CPU)")
      ->check(integer_at_least(1, "leave --seq-len out for the default"));
  finetune->add_option("--lora-rank", f.lora.rank, "LoRA rank r")->capture_default_str()->check(integer_at_least(1));
  finetune->add_option("--lora-alpha", f.lora.alpha, "LoRA alpha: adapters scale by alpha / r")
      ->capture_default_str()
      ->check(number_in(0, inf, true));
  finetune->add_option("--lora-dropout", f.lora.dropout, "dropout on the adapters' input")
      ->capture_default_str()
      ->check(number_in(0, 1));
  finetune->add_option("--lora-layers,--num-layers", f.lora.layers, "adapt the last N layers (-1: all)")
      ->capture_default_str();
  finetune->add_option("--targets", targets, "comma-separated linears (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,"
                                             "down_proj) or all (default q_proj,v_proj)");
  finetune->add_flag("--train-norms", f.train_norms, "LoRA: train the RMSNorm gains too");
  finetune->add_flag("--mask-prompt", f.mask_prompt, "loss on completions / assistant turns only");
  finetune->add_flag("--pack", f.pack, "pack several examples into each row (else one padded example a row)");
  finetune->add_flag("!--no-quantize", f.quantize, "keep a Hugging Face model's linears float32 (not q4gsw)");
  finetune->add_option("--group-size", f.group_size, "q4gsw group size (32, 64, 128)")->capture_default_str();
  finetune->add_option("--lr,--learning-rate", f.lr, "peak learning rate")
      ->capture_default_str()
      ->check(number_in(0, inf, true));
  finetune->add_option("--warmup", f.warmup, "linear warm-up steps")->capture_default_str()->check(integer_at_least(0));
  finetune->add_option("--min-lr-ratio", f.min_lr_ratio, "final learning rate / peak (cosine decay)")
      ->capture_default_str()
      ->check(number_in(0, 1));
  finetune->add_option("--weight-decay", f.weight_decay, "AdamW weight decay")
      ->capture_default_str()
      ->check(number_in(0, inf));
  finetune->add_option("--eval-every,--steps-per-eval", f.eval_every, "validation loss every N steps")
      ->capture_default_str()
      ->check(integer_at_least(1));
  finetune->add_option("--eval-batches,--val-batches", f.eval_batches, "validation batches")
      ->capture_default_str()
      ->check(integer_at_least(1));
  finetune->add_option("--save-every", f.save_every, "checkpoint every N steps")
      ->capture_default_str()
      ->check(integer_at_least(1));
  finetune->add_option("--seed", f.seed, "adapter initialisation, dropout and batch order")
      ->capture_default_str()
      ->check(cli::unsigned_integer());
  finetune->add_option("--backend", ft_opt.backend, cli::backend_help());

  cli::FuseCliOptions fuse_opt;
  auto* fuser = app.add_subcommand("fuse", "merge LoRA adapters into their base model and write a Hugging Face directory");
  fuser->add_option("--model", fuse_opt.model, "the base: a Hugging Face model directory or a run directory")->required();
  fuser->add_option("--adapter", fuse_opt.adapter, "the adapters (a peft directory)")->required();
  fuser->add_option("--out", fuse_opt.out, "the Hugging Face directory to write")->required();
  fuser->add_flag("--no-quantize", fuse_opt.no_quantize,
                  "merge into the float weights (default: into the q4gsw weights the adapters were trained on)");
  fuser->add_option("--group-size", fuse_opt.import.group_size, "q4gsw group size")->capture_default_str();
  fuser->add_option("--dtype", fuse_opt.export_options.dtype, "weights as bf16, f16 or f32")->capture_default_str();
  fuser->add_flag("--overwrite", fuse_opt.overwrite, "replace --out if it exists");
  fuser->add_option("--backend", fuse_opt.backend, cli::backend_help());

  cli::ExportCliOptions export_opt;
  auto* exporter = app.add_subcommand("export", "write a trained run as a Hugging Face model directory");
  exporter->add_option("run", export_opt.source, "the run directory (or a Hugging Face model directory)")->required();
  exporter->add_option("--out", export_opt.out, "the Hugging Face directory to write")->required();
  exporter->add_option("--dtype", export_opt.export_options.dtype, "weights as bf16, f16 or f32")->capture_default_str();
  exporter->add_flag("--overwrite", export_opt.overwrite, "replace --out if it exists");
  exporter->add_option("--backend", export_opt.backend, cli::backend_help());

  // CLI11 reports an unknown command only as an unexpected argument: name it, and the commands there are.
  const std::function<bool(CLI::App*)> every = [](CLI::App*) { return true; };
  const std::vector<CLI::App*> commands = app.get_subcommands(every);
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](CLI::App* c) { return c->check_name(argv[1]); })) {
    std::string names;
    for (const auto* sub : commands) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "wgtrain: unknown command '%s' (commands: %s; wgtrain --help describes them)\n", argv[1],
                 names.c_str());
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Which options were given (by each of their names), for what --resume may and may not change.
  for (auto [command, options] : {std::pair{train, &train_opt}, std::pair{finetune, &ft_opt}})
    for (const auto* opt : command->get_options())
      if (opt->count() > 0)
        for (const auto& name : opt->get_lnames()) options->given.insert(name);
  try {
    // WGTRAIN_DUMP_KERNELS=DIR: every command writes the kernels it compiles there; a bad DIR fails here, before any
    // work (kernels --dump names its own directory).
    if (!(*kernels && !kernels_opt.dump_dir.empty())) detail::init_kernel_dump_from_env();
    if (*devices) return cmd_devices(backend, subgroup_matrix);
    if (*ops) return cmd_ops(verbose);
    if (*runop) return cmd_run_op(op_name, in_path, out_path, op_args, backend);
    if (*bench) {
      bench_opt.backend = cli::backend_for(bench_backend, "bench", false);
      return cli::run_bench(bench_opt);
    }
    if (*train) return cli::run_train(train_opt);
    if (*generate) return cli::run_generate(gen_opt);
    if (*tokenize) return cli::run_tokenize(tokenize_opt);
    if (*kernels) return cli::run_kernels(kernels_opt);
    if (*exporter) return cli::run_export(export_opt);
    if (*fuser) return cli::run_fuse(fuse_opt);
    if (*finetune) {
      if (!targets.empty()) {
        f.lora.targets.clear();
        if (targets == "all") {
          f.lora.targets = LoraConfig::module_names();
        } else {
          std::stringstream ss(targets);
          for (std::string t; std::getline(ss, t, ',');)
            if (!t.empty()) f.lora.targets.push_back(t);
        }
      }
      return cli::run_train(ft_opt);
    }
  } catch (const wgtrain::Error& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');  // one line, whatever the source
    std::fprintf(stderr, "wgtrain: %s\n", msg.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgtrain: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
