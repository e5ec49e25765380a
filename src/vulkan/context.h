// The native Vulkan runtime's internals, for op handlers: buffers, pipelines by (kernel, specialisation), batched
// dispatch with push descriptors and push constants, transfers, timing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vulkan/vk_api.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::vk::detail {

struct Context;

// Device memory behind tensors; freed (after the work that uses it) when the last tensor goes.
struct Buffer {
  std::shared_ptr<Context> ctx;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t bytes = 0;
  ~Buffer();
};

struct Kernel {
  std::string label;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_bytes = 0;
};

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name);

// The embedded SPIR-V of a kernel (its path under src/ops without ".comp"); throws Error if there is none.
std::span<const uint32_t> spirv(std::string_view name);

struct Context : std::enable_shared_from_this<Context> {
  Api& api;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceMemoryProperties memory{};
  VkPhysicalDeviceLimits limits{};
  DeviceInfo info;
  DeviceOptions options;
  DeviceStats stats;
  // Split-K GEMMs: 0 where the shape calls for it (never on a CPU), 1 wherever possible (tests), -1 never.
  int split_k = 0;
  // The GEMMs run through cooperative matrices (asked for, and offered by the device).
  bool coopmat = false;

  explicit Context(Api& a) : api(a) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Throws GpuError (DeviceLostError for a lost device) naming `what` when r is not VK_SUCCESS.
  void check(VkResult r, std::string_view what) const;

  // ---- buffers ----
  std::shared_ptr<Buffer> allocate(uint64_t bytes, std::string_view what);
  void release(VkBuffer b, VkDeviceMemory m);  // from ~Buffer: freed now if idle, else after the next wait
  // Host <-> buffer through a staging buffer; each waits for the work recorded before it.
  void upload(const Buffer& dst, uint64_t offset, const void* data, uint64_t bytes);
  void download(const Buffer& src, uint64_t offset, void* data, uint64_t bytes);

  // ---- GPU-side index checks (as the WebGPU runtime's): a kernel that meets an index out of range ORs its bit
  // into the error word; the word is checked, and cleared, at the next read-back or synchronize, naming the op.
  uint32_t index_check_bit(std::string_view op);
  const Buffer& index_error_buffer();
  void verify_index_checks();

  // ---- kernels and dispatch ----
  // The pipeline of kernel `name` with specialisation constants 0, 1, ... = `spec`, `bindings` storage buffers
  // (bindings 0..n-1) and `push_bytes` of push constants.
  const Kernel& kernel(const std::string& name, const std::vector<uint32_t>& spec, uint32_t bindings,
                       uint32_t push_bytes);
  // Records a dispatch (and a barrier after it, so that the next command sees its writes).
  void dispatch(const Kernel& k, const void* push, std::initializer_list<const Buffer*> buffers, uint32_t gx,
                uint32_t gy = 1, uint32_t gz = 1);
  // Splits a 1-D count of workgroups over x and y within the device's per-dimension limit.
  std::pair<uint32_t, uint32_t> grid(uint64_t workgroups) const;
  void fill(const Buffer& b, uint64_t offset, uint64_t bytes, uint32_t word);
  void copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes);

  // ---- submission ----
  void submit_and_wait();
  void begin_timing();
  Device::Timing end_timing();

 private:
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool open_ = false;  // cmd_ is recording
  std::map<std::pair<std::string, std::vector<uint32_t>>, Kernel> kernels_;
  std::vector<std::pair<VkBuffer, VkDeviceMemory>> pending_free_;
  // Staging for transfers, host-visible and coherent; grown as needed.
  VkBuffer staging_ = VK_NULL_HANDLE;
  VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
  void* staging_map_ = nullptr;
  uint64_t staging_bytes_ = 0;
  std::shared_ptr<Buffer> index_error_;
  std::vector<std::string> index_checks_;
  void read_raw(const Buffer& src, uint64_t offset, void* data, uint64_t bytes);
  // Timing.
  VkQueryPool queries_ = VK_NULL_HANDLE;
  bool timing_ = false;
  std::chrono::steady_clock::time_point timing_start_;

  friend class wgtrain::vk::Device;
  void ensure_open();
  void barrier();
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const;
  void ensure_staging(uint64_t bytes);
};

}  // namespace wgtrain::vk::detail
