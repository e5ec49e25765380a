#include "cli/backend.h"

#include "wgtrain/error.h"

namespace wgtrain::cli {

CliBackend parse_cli_backend(const std::string& name) {
  if (name == "vulkan") return {true, Backend::Auto};
  if (name == "webgpu" || name == "auto" || name.empty()) return {false, Backend::Auto};
  if (name.rfind("webgpu-", 0) == 0) return {false, parse_backend(name.substr(7))};
  if (name == "opengl" || name == "opengles" || name == "gl" || name == "gles") return {false, parse_backend(name)};
  throw ArgumentError("unknown backend '" + name + "': expected " + kBackendHelp);
}

Backend webgpu_only(const std::string& name, const char* command) {
  const CliBackend b = parse_cli_backend(name);
  if (b.native_vulkan)
    throw ArgumentError(std::string("wgtrain ") + command +
                        " runs through WebGPU; the native Vulkan backend has the training kernels only (wgtrain "
                        "bench --backend vulkan). For WebGPU on Vulkan, use --backend webgpu-vulkan");
  return b.webgpu;
}

}  // namespace wgtrain::cli
