// The Vulkan entry points the native backend calls, loaded at run time from the system's loader (libvulkan.so.1)
// rather than linked, so that a machine without Vulkan still runs everything else.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

namespace wgtrain::detail::vk {

// X(name) for every function, by its Vulkan name without the "vk" prefix.
#define WGTRAIN_VK_GLOBAL_FUNCTIONS(X) \
  X(CreateInstance)                    \
  X(EnumerateInstanceVersion)          \
  X(EnumerateInstanceExtensionProperties)

#define WGTRAIN_VK_INSTANCE_FUNCTIONS(X)       \
  X(DestroyInstance)                           \
  X(EnumeratePhysicalDevices)                  \
  X(GetPhysicalDeviceProperties)               \
  X(GetPhysicalDeviceProperties2)              \
  X(GetPhysicalDeviceFeatures2)                \
  X(GetPhysicalDeviceQueueFamilyProperties)    \
  X(GetPhysicalDeviceMemoryProperties)         \
  X(EnumerateDeviceExtensionProperties)        \
  X(CreateDevice)                              \
  X(GetDeviceProcAddr)

#define WGTRAIN_VK_DEVICE_FUNCTIONS(X) \
  X(DestroyDevice)                     \
  X(GetDeviceQueue)                    \
  X(CreateBuffer)                      \
  X(DestroyBuffer)                     \
  X(GetBufferMemoryRequirements)       \
  X(AllocateMemory)                    \
  X(FreeMemory)                        \
  X(BindBufferMemory)                  \
  X(MapMemory)                         \
  X(UnmapMemory)                       \
  X(InvalidateMappedMemoryRanges)      \
  X(FlushMappedMemoryRanges)           \
  X(CreateShaderModule)                \
  X(DestroyShaderModule)               \
  X(CreateDescriptorSetLayout)         \
  X(DestroyDescriptorSetLayout)        \
  X(CreatePipelineLayout)              \
  X(DestroyPipelineLayout)             \
  X(CreatePipelineCache)               \
  X(DestroyPipelineCache)              \
  X(CreateComputePipelines)            \
  X(DestroyPipeline)                   \
  X(CreateCommandPool)                 \
  X(DestroyCommandPool)                \
  X(AllocateCommandBuffers)            \
  X(FreeCommandBuffers)                \
  X(BeginCommandBuffer)                \
  X(EndCommandBuffer)                  \
  X(ResetCommandBuffer)                \
  X(CmdBindPipeline)                   \
  X(CmdPushConstants)                  \
  X(CmdPushDescriptorSetKHR)           \
  X(CmdDispatch)                       \
  X(CmdPipelineBarrier)                \
  X(CmdCopyBuffer)                     \
  X(CmdUpdateBuffer)                   \
  X(CmdFillBuffer)                     \
  X(CmdWriteTimestamp)                 \
  X(CmdResetQueryPool)                 \
  X(CreateQueryPool)                   \
  X(DestroyQueryPool)                  \
  X(GetQueryPoolResults)               \
  X(QueueSubmit)                       \
  X(CreateFence)                       \
  X(DestroyFence)                      \
  X(WaitForFences)                     \
  X(ResetFences)                      \
  X(GetFenceStatus)                   \
  X(DeviceWaitIdle)

struct Api {
  PFN_vkGetInstanceProcAddr GetInstanceProcAddr = nullptr;
#define WGTRAIN_VK_DECLARE(name) PFN_vk##name name = nullptr;
  WGTRAIN_VK_GLOBAL_FUNCTIONS(WGTRAIN_VK_DECLARE)
  WGTRAIN_VK_INSTANCE_FUNCTIONS(WGTRAIN_VK_DECLARE)
  WGTRAIN_VK_DEVICE_FUNCTIONS(WGTRAIN_VK_DECLARE)
#undef WGTRAIN_VK_DECLARE

  // Resolves the instance-level functions (after vkCreateInstance) and the device-level ones (after vkCreateDevice);
  // throw wgtrain::Error naming what is missing.
  void load_instance(VkInstance instance);
  void load_device(VkDevice device);
};

// The loader's global functions, resolved once; throws wgtrain::Error when there is no Vulkan loader.
Api& vulkan_api();

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like, for messages.
const char* result_name(VkResult r);

}  // namespace wgtrain::detail::vk
