// The interface below Device and Tensor that each GPU API implements: WebGPU through Dawn (gpu/webgpu/) and native
// Vulkan (gpu/vulkan/). Everything above it (the buffer pool, recordings, index checks, every op's host code) is
// written once in terms of it.
//
// A backend owns the API objects: buffers, pipelines built from its kernel files, the open batch of commands, and
// whatever it needs to order them. It sees work in the order the ops issue it and must make every command observe
// the writes of the commands before it (WebGPU does this itself; native Vulkan places barriers where the data flow
// needs them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/kernels.h"
#include "wgtrain/device.h"

namespace wgtrain::detail {

// A buffer of the backend's, opaque above it (a WGPUBuffer, or the native backend's own record).
struct GpuBuffer;
using BufferHandle = GpuBuffer*;

// A compute pipeline: one variant of one kernel, built and cached by the backend. `native` is the backend's own.
struct Pipeline {
  std::string label;  // kernel name and variant, used in error messages
  void* native = nullptr;
};

// One dispatch: `uniforms` (the kernel's parameter block, the same bytes on every backend) and the storage
// buffers in binding order. A kernel reads all of them whole; element offsets travel in the uniforms.
struct DispatchCommand {
  std::string_view op;  // named in any error the device reports
  const Pipeline* pipeline = nullptr;
  const void* uniforms = nullptr;
  size_t uniform_bytes = 0;
  std::span<const BufferHandle> storage;
  uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
  bool counted = true;  // counts in `dispatches` (the runtime's own work, such as poisoning, does not)
};

// One range of a read-back.
struct ReadRange {
  BufferHandle buffer = nullptr;
  uint64_t offset = 0, bytes = 0;
  void* dst = nullptr;
};

struct RecordingImpl;

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // Filled when the backend opens: what it is, what it allows, what it offers.
  AdapterInfo info;
  DeviceLimits limits;
  DeviceFeatures features;

  // ---- buffers ------------------------------------------------------------------------------------------------
  // A storage buffer (also a copy source and destination); nullptr when the device is out of memory.
  virtual BufferHandle create_buffer(uint64_t bytes, std::string_view what) = 0;
  // Frees a buffer once the work already issued is done with it.
  virtual void destroy_buffer(BufferHandle b) = 0;
  // Host bytes into a buffer, ordered after every command issued so far. `idle`: no issued command uses the
  // buffer (freshly allocated), so nothing needs submitting first.
  virtual void write(BufferHandle b, uint64_t offset, const void* data, uint64_t bytes, bool idle) = 0;
  // Submits what is issued, waits for it and copies the ranges back, all in one round trip.
  virtual void read(std::span<const ReadRange> ranges) = 0;
  // Gives back staging buffers kept for later transfers (called with no work in flight).
  virtual void trim() {}
  // A buffer-to-buffer copy, in order (sizes and offsets multiples of 4).
  virtual void copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset,
                    uint64_t bytes) = 0;

  // ---- kernels ------------------------------------------------------------------------------------------------
  // Whether this backend has kernel `kernel` (its path under src/ops without the extension).
  virtual bool has_kernel(std::string_view kernel) const = 0;
  // Builds (or finds) the pipeline of one variant; throws GpuError with the compiler's message, or
  // UnsupportedError when the backend has no such kernel or variant.
  virtual const Pipeline& pipeline(const std::string& kernel, const KernelDefs& defs) = 0;
  virtual void dispatch(const DispatchCommand& d) = 0;

  // ---- submission ---------------------------------------------------------------------------------------------
  // Whether commands are issued but not yet submitted.
  virtual bool pending() const = 0;
  virtual void flush() = 0;
  virtual void synchronize() = 0;
  // Throws GpuError naming `op` if the device reported an error since the last check; DeviceLostError if lost.
  virtual void check(std::string_view op) = 0;
  virtual bool lost() const = 0;

  // ---- timing and profiling -----------------------------------------------------------------------------------
  virtual void begin_timing() = 0;
  virtual Device::Timing end_timing() = 0;
  virtual std::vector<OpProfile> profile() = 0;

  // ---- recordings ---------------------------------------------------------------------------------------------
  // Called once when a recording ends (e.g. to build its bind groups), on replay, and when it is destroyed.
  virtual void prepare(RecordingImpl& r) = 0;
  virtual void replay(const RecordingImpl& r) = 0;
  virtual void release(RecordingImpl& r) = 0;

  uint64_t dispatches = 0, submits = 0, pipelines_created = 0;
};

// The two backends (gpu/webgpu_backend.cpp, gpu/vulkan_backend.cpp).
std::unique_ptr<GpuBackend> open_webgpu(const DeviceOptions& options);
std::unique_ptr<GpuBackend> open_native_vulkan(const DeviceOptions& options);

// The physical devices the Vulkan loader offers, in enumeration order (DeviceOptions::vulkan_device counts them);
// throws Error without a loader.
struct VulkanPhysicalDevice {
  std::string name, type;
  bool software = false;
};
std::vector<VulkanPhysicalDevice> list_vulkan_devices();

}  // namespace wgtrain::detail
