// The train command of the CLI.
#pragma once

#include <set>
#include <string>

#include "wgtrain/trainer.h"

namespace wgtrain::cli {

struct TrainCliOptions {
  TrainOptions train;
  std::string backend = "auto";
  std::set<std::string> given;  // the long names of the options given on the command line ("lr", "steps", ...)
};

// Exit status: 0 when the run finished (or had nothing to do); 128 + the signal when SIGINT (Ctrl-C: 130) or
// SIGTERM (143) stopped it, after a checkpoint.
int run_train(const TrainCliOptions& options);
// The per-op profile gathered with WGTRAIN_PROFILE=1, as a table on stdout (nothing when not profiling).
void print_profile(Device& device);

}  // namespace wgtrain::cli
