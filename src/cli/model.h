// The CLI's commands on models: generate (from a run or a Hugging Face directory) and export (a run as a Hugging
// Face directory).
#pragma once

#include <string>

#include "wgtrain/generate.h"
#include "wgtrain/hf.h"

namespace wgtrain::cli {

struct GenerateCliOptions {
  std::string model;  // run directory or Hugging Face model directory
  std::string adapter;  // LoRA adapters (peft directory), optional
  GenerateOptions generate;
  hf::ImportOptions import;
  bool no_quantize = false;
  std::string backend = "auto";
};

struct ExportCliOptions {
  std::string source;  // run directory (or Hugging Face directory)
  std::string out;
  hf::ExportOptions export_options;
  bool overwrite = false;
  std::string backend = "auto";
};

struct FuseCliOptions {
  std::string model, adapter, out;
  hf::ImportOptions import;
  bool no_quantize = false;
  hf::ExportOptions export_options;
  bool overwrite = false;
  std::string backend = "auto";
};

int run_generate(const GenerateCliOptions& options);
// The adapters merged into the model's weights, written as a Hugging Face directory.
int run_fuse(const FuseCliOptions& options);
int run_export(const ExportCliOptions& options);
// The import report of a Hugging Face model, as one line per layer kind (stderr).
void print_import_report(const hf::ImportReport& report, const LlamaConfig& config);

}  // namespace wgtrain::cli
