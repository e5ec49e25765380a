// wgtrain kernels: the kernels built into wgtrain and their variant fields; with --dump DIR, every variant a
// representative workload compiles, written as the GPU compiler got it.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace wgtrain::cli {

struct KernelsCliOptions {
  bool verbose = false;     // -v: each variant field's allowed values and meaning
  std::string dump_dir;     // --dump: run the workload and write the compiled variants here
  std::string backend = "auto";
};

// Registers the subcommand and its options on `app`.
CLI::App* add_kernels_command(CLI::App& app, KernelsCliOptions& options);
int run_kernels(const KernelsCliOptions& options);

}  // namespace wgtrain::cli
