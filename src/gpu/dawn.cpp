#include "gpu/dawn.h"

#ifndef __EMSCRIPTEN__
#include <dlfcn.h>
#endif

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "wgtrain/error.h"

namespace wgtrain::gpu {

#ifdef __EMSCRIPTEN__
// The browser build: the table is the browser's WebGPU, through JavaScript (web/src/webgpu_table.cpp).
const webgpu::Api& browser_webgpu();

std::string dawn_library_path() { return "the browser's WebGPU (navigator.gpu)"; }

const webgpu::Api& dawn() { return browser_webgpu(); }

#else

std::string dawn_library_path() {
  if (const char* env = std::getenv("WGTRAIN_DAWN_LIBRARY"); env && *env) return env;
#ifdef WGTRAIN_DAWN_DEFAULT_PATH
  if (std::filesystem::exists(WGTRAIN_DAWN_DEFAULT_PATH)) return WGTRAIN_DAWN_DEFAULT_PATH;
#endif
  return "libwebgpu_wrapper.so";
}

namespace {

webgpu::Api load() {
  const std::string path = dawn_library_path();
  // RTLD_LOCAL: Dawn's bundled SPIRV-Tools and Tint symbols stay out of the global namespace.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw Error("cannot load the Dawn WebGPU library '" + path + "': " + (why ? why : "unknown error") +
                ". Run scripts/setup.sh, or point WGTRAIN_DAWN_LIBRARY at libwebgpu_wrapper.so.");
  }
  webgpu::Api api;
  std::vector<std::string> missing;
#define WGTRAIN_RESOLVE(ret, name, params)                                                    \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, "wgpu" #name));                \
  if (!api.name) missing.push_back("wgpu" #name);
  WGPU_ABI_FUNCTIONS(WGTRAIN_RESOLVE)
#undef WGTRAIN_RESOLVE
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error("the Dawn library '" + path + "' lacks " + std::to_string(missing.size()) +
                " function(s) wgtrain needs: " + list + " (is it the pinned bun-webgpu-linux-x64@0.1.7?)");
  }
  // The handle is never closed: Dawn keeps threads and static state alive until process exit.
  return api;
}

}  // namespace

const webgpu::Api& dawn() {
  static std::once_flag once;
  static webgpu::Api api;
  static std::string failure;
  std::call_once(once, [] {
    try {
      api = load();
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

#endif  // __EMSCRIPTEN__

}  // namespace wgtrain::gpu
