// wgtrain generate and wgtrain export.
#include "cli/model.h"

#include <cstdio>
#include <filesystem>

#include "cli/backend.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/lora.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain::cli {

void print_import_report(const hf::ImportReport& r, const LlamaConfig& c) {
  if (r.files == 0) return;
  std::fprintf(stderr, "loaded %s: %lld tensors (%s) from %lld file%s, %lld parameters\n", c.architecture.c_str(),
               static_cast<long long>(r.tensors), r.dtypes.c_str(), static_cast<long long>(r.files),
               r.files == 1 ? "" : "s", static_cast<long long>(c.parameter_count()));
  if (r.quantisation_error.empty()) return;
  std::string line;
  for (const auto& [kind, err] : r.quantisation_error) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.4f", line.empty() ? "" : ", ", kind.c_str(), err);
    line += buf;
  }
  std::fprintf(stderr, "q4gsw (group %lld) relative error ||W - Q(W)|| / ||W||: %s\n",
               static_cast<long long>(c.group_size), line.c_str());
}

int run_generate(const GenerateCliOptions& cli) {
  DeviceOptions dopt;
  dopt.backend = backend_for(cli.backend, "generate", true);
  Device device = Device::open(dopt);
  hf::ImportOptions import = cli.import;
  import.quantize = !cli.no_quantize;
  Generator gen(device, cli.model, import, cli.adapter);
  print_import_report(gen.import_report(), gen.model().config());
  if (!cli.generate.chat) std::printf("%s", cli.generate.prompt.c_str());
  std::fflush(stdout);
  gen.generate(cli.generate, [](const std::string& piece) {
    std::printf("%s", piece.c_str());
    std::fflush(stdout);
  });
  std::printf("\n");
  const GenerateStats& s = gen.stats();
  std::fprintf(stderr, "prompt %lld tokens in %.3f s (%.1f tokens/s); generated %lld tokens in %.3f s (%.1f tokens/s)%s\n",
               static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
               s.prefill_seconds > 0 ? static_cast<double>(s.prompt_tokens) / s.prefill_seconds : 0.0,
               static_cast<long long>(s.new_tokens), s.decode_seconds,
               s.decode_seconds > 0 ? static_cast<double>(s.new_tokens) / s.decode_seconds : 0.0,
               s.stopped_at_eos ? ", stopped at end-of-sequence" : "");
  return 0;
}

int run_export(const ExportCliOptions& cli) {
  namespace fs = std::filesystem;
  if (cli.out.empty()) throw ArgumentError("export: --out is required");
  if (fs::exists(cli.out) && !cli.overwrite)
    throw ArgumentError("export: '" + cli.out + "' already exists (choose another --out, or add --overwrite)");
  DeviceOptions dopt;
  dopt.backend = backend_for(cli.backend, "export", true);
  Device device = Device::open(dopt);
  if (hf::is_model_dir(cli.source)) {
    hf::ImportOptions import;
    import.quantize = false;  // as it is: nothing gained by quantising on the way through
    const auto model = hf::load_model(device, cli.source, import);
    hf::export_model(*model, cli.out, cli.export_options, nullptr, cli.source, cli.overwrite);
  } else {
    const auto model = load_run_model(device, cli.source, Trainable::None);
    const Tokenizer tok = Tokenizer::load_dir(cli.source);
    hf::export_model(*model, cli.out, cli.export_options, &tok, "", cli.overwrite);
  }
  std::printf("exported %s to %s (%s); load it with transformers' AutoModelForCausalLM.from_pretrained(\"%s\")\n",
              cli.source.c_str(), cli.out.c_str(), cli.export_options.dtype.c_str(), cli.out.c_str());
  return 0;
}

int run_fuse(const FuseCliOptions& cli) {
  namespace fs = std::filesystem;
  if (fs::exists(cli.out) && !cli.overwrite)
    throw ArgumentError("fuse: '" + cli.out + "' already exists (choose another --out, or add --overwrite)");
  DeviceOptions dopt;
  dopt.backend = backend_for(cli.backend, "fuse", true);
  Device device = Device::open(dopt);
  hf::ImportOptions import = cli.import;
  import.quantize = !cli.no_quantize;  // the base as the adapters were trained on it (QLoRA: its q4 weights)
  std::unique_ptr<Llama> base;
  std::string tokenizer_dir = cli.model;
  if (hf::is_model_dir(cli.model)) {
    hf::ImportReport report;
    base = hf::load_model(device, cli.model, import, &report);
    print_import_report(report, base->config());
  } else {
    base = load_run_model(device, cli.model, Trainable::None);
  }
  const auto adapters = load_peft(*base, cli.adapter);
  const auto fused = fuse(*base, *adapters);
  if (hf::is_model_dir(cli.model)) {
    hf::export_model(*fused, cli.out, cli.export_options, nullptr, tokenizer_dir, cli.overwrite);
  } else {
    const Tokenizer tok = Tokenizer::load_dir(cli.model);
    hf::export_model(*fused, cli.out, cli.export_options, &tok, "", cli.overwrite);
  }
  std::printf("fused %zu adapters of %s into %s and wrote %s (%s)\n", adapters->adapters().size(), cli.adapter.c_str(),
              cli.model.c_str(), cli.out.c_str(), cli.export_options.dtype.c_str());
  return 0;
}

}  // namespace wgtrain::cli
