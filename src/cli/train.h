// The train command of the CLI.
#pragma once

#include <string>

#include "wgtrain/trainer.h"

namespace wgtrain::cli {

struct TrainCliOptions {
  TrainOptions train;
  std::string backend = "auto";
};

// Exit status: 0 when the run finished (or had nothing to do), 130 when Ctrl-C stopped it (after a checkpoint).
int run_train(const TrainCliOptions& options);
// The per-op profile gathered with WGTRAIN_PROFILE=1, as a table on stdout (nothing when not profiling).
void print_profile(Device& device);

}  // namespace wgtrain::cli
