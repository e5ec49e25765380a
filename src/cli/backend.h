// The CLI's --backend: one set of names for every command (wgtrain/device.h lists them).
#pragma once

#include <string>

#include "wgtrain/device.h"

namespace wgtrain::cli {

// The backend a command runs on: --backend, else WGTRAIN_BACKEND, else webgpu. With `whole_model`, a backend that
// lacks any op a model's step or generation runs is refused here, naming the ops, before any work starts.
Backend backend_for(const std::string& name, const char* command, bool whole_model);

std::string backend_help();

}  // namespace wgtrain::cli
