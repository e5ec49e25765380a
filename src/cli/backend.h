// The CLI's --backend: which runtime, and for WebGPU which API Dawn runs on.
//   auto, webgpu         WebGPU through Dawn, its API chosen as Device::open does (Vulkan, else OpenGL, OpenGL ES)
//   webgpu-vulkan        WebGPU on Dawn's Vulkan backend      (WGTRAIN_BACKEND=vulkan does the same)
//   opengl, webgpu-opengl / opengles, webgpu-opengles: WebGPU on Dawn's OpenGL (ES) backend
//   vulkan               the native Vulkan backend (GLSL kernels; wgtrain/vulkan.h): devices and bench
#pragma once

#include <string>

#include "wgtrain/device.h"

namespace wgtrain::cli {

struct CliBackend {
  bool native_vulkan = false;
  Backend webgpu = Backend::Auto;
};

// Throws ArgumentError listing the choices for anything else.
CliBackend parse_cli_backend(const std::string& name);
// For commands that run through WebGPU only: the Dawn API, or an ArgumentError naming the command.
Backend webgpu_only(const std::string& name, const char* command);

inline const char* kBackendHelp =
    "auto (WebGPU through Dawn), webgpu-vulkan, opengl, opengles, or vulkan (the native Vulkan backend)";

}  // namespace wgtrain::cli
