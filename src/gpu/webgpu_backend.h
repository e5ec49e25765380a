// The WebGPU backend (Dawn): WGSL kernels rendered from their files, batched into command encoders.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/backend.h"
#include "gpu/webgpu_abi.h"

namespace wgtrain::detail {

using namespace wgtrain::webgpu;

// "validation error", "out of memory", ... for a WGPUErrorType, in messages.
std::string error_type_name(uint32_t type);

class WebGpuBackend final : public GpuBackend {
 public:
  explicit WebGpuBackend(const Api& a) : api(a) {}
  ~WebGpuBackend() override;

  BufferHandle create_buffer(uint64_t bytes, std::string_view what) override;
  void destroy_buffer(BufferHandle b) override;
  void write(BufferHandle b, uint64_t offset, const void* data, uint64_t bytes, bool idle) override;
  void read(std::span<const ReadRange> ranges) override;
  void copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset, uint64_t bytes) override;
  bool has_kernel(std::string_view kernel) const override;
  const Pipeline& pipeline(const std::string& kernel, const KernelDefs& defs) override;
  void dispatch(const DispatchCommand& d) override;
  bool pending() const override { return encoder_ != nullptr; }
  void flush() override;
  void synchronize() override;
  void check(std::string_view op) override;
  bool lost() const override { return lost_; }
  void begin_timing() override;
  Device::Timing end_timing() override;
  std::vector<OpProfile> profile() override;
  void prepare(RecordingImpl& r) override;
  void replay(const RecordingImpl& r) override;
  void release(RecordingImpl& r) override;
  void trim() override;

  // Builds a pipeline from WGSL text (entry point "main"); throws GpuError with the compiler's message. Not cached.
  Pipeline build_pipeline(const std::string& label, const std::string& source);

  const Api& api;
  WGPUInstance instance = nullptr;
  WGPUAdapter adapter = nullptr;
  WGPUDevice device = nullptr;
  WGPUQueue queue = nullptr;
  DeviceOptions options;
  std::vector<std::string> pending_errors;  // from the uncaptured-error callback
  bool lost_ = false;
  std::string lost_message;

  void wait(const bool& done, const char* what);

 private:
  WGPUBuffer create_raw(uint64_t bytes, WGPUFlags usage, std::string_view what);
  void write_now(WGPUBuffer b, uint64_t offset, const void* data, uint64_t bytes);

  // Read-back staging buffers by size.
  std::map<uint64_t, std::vector<WGPUBuffer>> free_readback_;
  WGPUBuffer take_readback(uint64_t bytes);

  // The open batch.
  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  size_t batch_dispatches_ = 0;
  void ensure_encoder();
  void ensure_pass();
  void end_pass();

  // Uniforms of the open batch: staged on the host in fixed-size chunks, written to their GPU buffers at flush.
  struct UniformChunk {
    WGPUBuffer buffer = nullptr;
    std::vector<uint8_t> host;
    size_t used = 0;
  };
  std::vector<UniformChunk> uniform_chunks_;
  size_t uniform_chunk_in_use_ = 0;
  std::pair<WGPUBuffer, uint64_t> stage_uniforms(const void* data, size_t bytes);

  struct Built {
    Pipeline pipeline;
    WGPUComputePipeline compute = nullptr;
    WGPUBindGroupLayout layout = nullptr;
  };
  std::map<std::pair<std::string, KernelDefs>, Built> pipelines_;
  // (pipeline, storage bindings, parameter block) shapes whose bind groups were validated once under an error
  // scope; later ones are made without the scope's host round trip.
  std::set<std::tuple<const Pipeline*, size_t, bool>> validated_;
  std::set<std::string, std::less<>> kernels_;

  // Timing.
  WGPUQuerySet query_set_ = nullptr;
  WGPUBuffer query_resolve_ = nullptr;
  bool timing_ = false;
  bool timing_first_pass_ = false;
  std::chrono::steady_clock::time_point timing_start_;

  // Profiling: each dispatch goes through here. Timestamps: a pass per dispatch writing slots 2k, 2k+1 of
  // profile_queries_, resolved in batches; otherwise a wait per dispatch.
  void encode_dispatch(std::string_view op, WGPUComputePipeline pipeline, WGPUBindGroup bg, uint32_t gx, uint32_t gy,
                       uint32_t gz);
  void settle_profile();
  std::map<std::string, OpProfile, std::less<>> profile_;
  WGPUQuerySet profile_queries_ = nullptr;
  WGPUBuffer profile_resolve_ = nullptr;
  std::vector<std::string> profile_pending_;  // the op of each written slot pair
  static constexpr uint32_t kProfileSlots = 2048;

  friend std::unique_ptr<GpuBackend> open_webgpu(const DeviceOptions& options);
  void read_group(std::span<const ReadRange> ranges);
};

}  // namespace wgtrain::detail

namespace wgtrain::detail {
// The WebGPU backend under a device (tests reach Dawn's objects through it); throws std::bad_cast on another.
inline WebGpuBackend& webgpu_backend(const GpuBackend& b) {
  return dynamic_cast<WebGpuBackend&>(const_cast<GpuBackend&>(b));
}
}  // namespace wgtrain::detail
