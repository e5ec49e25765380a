#include "cli/backend.h"

#include <cstdlib>

#include "wgtrain/registry.h"

namespace wgtrain::cli {

Backend backend_for(const std::string& name, const char* command, bool whole_model) {
  Backend b = parse_backend(name.empty() ? "auto" : name);
  if (b == Backend::Auto)
    if (const char* env = std::getenv("WGTRAIN_BACKEND"); env && *env) b = parse_backend(env);
  if (whole_model) require_ops(b, model_ops(), std::string("wgtrain ") + command);
  return b;
}

std::string backend_help() {
  return std::string(backend_choices()) + " (native-vulkan: the training kernels only, see `wgtrain ops`)";
}

}  // namespace wgtrain::cli
