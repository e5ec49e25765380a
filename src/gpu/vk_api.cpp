#include "gpu/vk_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "wgtrain/error.h"

namespace wgtrain::detail::vk {

namespace {

void report_missing(const std::vector<std::string>& missing, const char* level) {
  if (missing.empty()) return;
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw Error(std::string("the Vulkan ") + level + " lacks function(s) the native backend needs: " + list);
}

}  // namespace

void Api::load_instance(VkInstance instance) {
  std::vector<std::string> missing;
#define WGTRAIN_VK_RESOLVE(name)                                                               \
  name = reinterpret_cast<PFN_vk##name>(GetInstanceProcAddr(instance, "vk" #name));            \
  if (!name) missing.push_back("vk" #name);
  WGTRAIN_VK_INSTANCE_FUNCTIONS(WGTRAIN_VK_RESOLVE)
#undef WGTRAIN_VK_RESOLVE
  report_missing(missing, "instance");
}

void Api::load_device(VkDevice device) {
  std::vector<std::string> missing;
#define WGTRAIN_VK_RESOLVE(name)                                                     \
  name = reinterpret_cast<PFN_vk##name>(GetDeviceProcAddr(device, "vk" #name));      \
  if (!name) missing.push_back("vk" #name);
  WGTRAIN_VK_DEVICE_FUNCTIONS(WGTRAIN_VK_RESOLVE)
#undef WGTRAIN_VK_RESOLVE
  report_missing(missing, "device");
}

Api& vulkan_api() {
  static std::once_flag once;
  static Api api;
  static std::string failure;
  std::call_once(once, [] {
    void* h = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      failure = "no Vulkan loader (libvulkan.so.1) on this machine: install Debian's libvulkan1 and a driver "
                "(mesa-vulkan-drivers gives lavapipe on a CPU; scripts/setup.sh installs both)";
      return;
    }
    api.GetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(h, "vkGetInstanceProcAddr"));
    if (!api.GetInstanceProcAddr) {
      failure = "the Vulkan loader has no vkGetInstanceProcAddr";
      return;
    }
    std::vector<std::string> missing;
#define WGTRAIN_VK_RESOLVE(name)                                                                     \
  api.name = reinterpret_cast<PFN_vk##name>(api.GetInstanceProcAddr(nullptr, "vk" #name));           \
  if (!api.name) missing.push_back("vk" #name);
    WGTRAIN_VK_GLOBAL_FUNCTIONS(WGTRAIN_VK_RESOLVE)
#undef WGTRAIN_VK_RESOLVE
    try {
      report_missing(missing, "loader");
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    default: return "a VkResult";
  }
}

}  // namespace wgtrain::detail::vk
