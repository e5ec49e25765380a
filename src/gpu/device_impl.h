// The device's internals, for op handlers: buffers and their pool, the pipeline cache, batched dispatch, errors.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpu/dawn.h"
#include "gpu/kernels.h"
#include "gpu/webgpu_abi.h"
#include "wgtrain/device.h"

namespace wgtrain::detail {

using namespace wgtrain::webgpu;

struct RecordingImpl;

// GPU memory behind one or more tensors. Returned to the device's pool when the last view goes.
struct Storage {
  std::shared_ptr<DeviceImpl> device;
  WGPUBuffer buffer = nullptr;
  uint64_t capacity = 0;  // bytes of the pooled buffer (a size class, >= what was asked for)
  uint64_t bytes = 0;     // bytes asked for
  // [min, max] of the int32 values, where the host wrote them (Tensor::from_host); lets index ops check on the host.
  std::optional<std::pair<int32_t, int32_t>> int_range;
  // Filled by the host when allocated (its contents matter from the start), rather than an op's output.
  bool host_written = false;
  // The serial of the recording this storage was allocated in as an op's output; 0 if none (see RecordingImpl).
  uint64_t recorded_in = 0;
  ~Storage();
};

struct Pipeline {
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  std::string label;  // kernel name and variant, used in error messages
};

// A pipeline-cache key: which embedded kernel, and the values substituted into its {{KEY}} placeholders.
struct PipelineKey {
  std::string kernel;
  KernelDefs defs;
  auto operator<=>(const PipelineKey&) const = default;
};

// One storage binding: a whole buffer (offsets into it travel in the uniforms, so no alignment rules apply).
struct Binding {
  WGPUBuffer buffer = nullptr;
};

struct DispatchDesc {
  std::string_view op;              // named in any error the device reports
  const Pipeline* pipeline = nullptr;
  const void* uniforms = nullptr;   // bound at @binding(0) when non-null
  size_t uniform_bytes = 0;
  std::vector<Binding> storage;     // bound at @binding(1), (2), ... in order
  uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
  bool counted = true;  // false for the runtime's own work (poisoning), kept out of stats.dispatches
};

// Work recorded by Device::record for replay: dispatches with their bind groups built once, and copies.
//
// Buffers: a replay reads and writes the same buffers every time, so none of them may be handed to other work
// while the recording lives. Live storages it references are kept (`retained`). A referenced buffer released while
// recording stays with the recording: an op output allocated inside the recording may serve a later output of the
// same recording (commands replay in order, and each output is written before it is read), anything else (host
// data, tensors from before the recording) is pinned as it is, since a later replay reads it again.
struct RecordingImpl {
  struct Command {
    enum Kind : uint8_t { Dispatch, Copy } kind = Dispatch;
    std::string op;
    const Pipeline* pipeline = nullptr;
    size_t uniform_offset = 0, uniform_bytes = 0;  // into `uniforms`; bytes 0: no uniform block
    std::vector<WGPUBuffer> storage;
    uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
    bool counted = true;
    WGPUBindGroup bind_group = nullptr;  // built by end_recording
    WGPUBuffer src = nullptr, dst = nullptr;  // Copy
    uint64_t src_offset = 0, dst_offset = 0, bytes = 0;
  };
  std::shared_ptr<DeviceImpl> device;
  uint64_t serial = 0;  // this device's recordings count from 1
  std::vector<Command> commands;
  std::vector<uint8_t> uniforms;  // every dispatch's uniform block, at aligned offsets
  WGPUBuffer uniform_buffer = nullptr;
  std::vector<std::string> index_checks;  // the ops behind the index-error bits its dispatches set
  size_t dispatches = 0;

  std::unordered_set<WGPUBuffer> referenced;
  std::map<uint64_t, std::vector<WGPUBuffer>> reusable;  // released op outputs of this recording, by capacity
  std::vector<std::pair<WGPUBuffer, uint64_t>> pinned;   // released, referenced, not reusable
  std::vector<std::shared_ptr<Storage>> retained;

  ~RecordingImpl();
};

struct DeviceImpl : std::enable_shared_from_this<DeviceImpl> {
  const Api& api;
  WGPUInstance instance = nullptr;
  WGPUAdapter adapter = nullptr;
  WGPUDevice device = nullptr;
  WGPUQueue queue = nullptr;

  DeviceOptions options;
  AdapterInfo info;
  // Split-K GEMMs: 0 where the shape calls for it (never on a CPU rasteriser), 1 wherever possible (tests), -1 never.
  int split_k = 0;
  DeviceLimits limits;
  DeviceFeatures features;
  DeviceStats stats;

  explicit DeviceImpl(const Api& a) : api(a) {}
  ~DeviceImpl();
  DeviceImpl(const DeviceImpl&) = delete;
  DeviceImpl& operator=(const DeviceImpl&) = delete;

  // ---- errors -----------------------------------------------------------------------------------------------
  std::vector<std::string> pending_errors;  // from the uncaptured-error callback
  bool lost = false;
  std::string lost_message;
  // Throws GpuError naming `op` if the device reported anything since the last check; DeviceLostError if lost.
  void check(std::string_view op);

  // ---- buffers ----------------------------------------------------------------------------------------------
  // `host_write`: the caller fills the buffer with a queue write before any dispatch uses it, so the buffer must be
  // idle. Otherwise (an op's output) it may also be one released since the last submit: recorded dispatches run
  // in order, so the earlier readers are done with it before the new writer starts.
  std::shared_ptr<Storage> allocate(uint64_t bytes, std::string_view what, bool host_write = false);
  void release(Storage& s);  // from ~Storage
  // Hands a buffer back to the pool (it may still be read by recorded, unsubmitted work).
  void release_buffer(WGPUBuffer buffer, uint64_t capacity);
  // Writes host bytes into a buffer, ordered after all work recorded so far.
  void write(WGPUBuffer buffer, uint64_t offset, const void* data, size_t bytes);
  // The same for a buffer no recorded work uses (freshly allocated): no flush. Both go in chunks, since Dawn
  // stages each queue write whole and a multi-GB staging allocation fails.
  void write_idle(WGPUBuffer buffer, uint64_t offset, const void* data, size_t bytes);
  // Copies bytes back to the host; submits what is recorded and waits for it.
  void read(WGPUBuffer buffer, uint64_t offset, size_t bytes, void* dst);
  // Records a buffer-to-buffer copy (sizes and offsets multiples of 4).
  void copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset, uint64_t bytes);

  // ---- pipelines and dispatch --------------------------------------------------------------------------------
  const Pipeline& pipeline(const std::string& kernel, const KernelDefs& defs);
  // Builds a pipeline from WGSL text (entry point "main"); throws GpuError with the compiler's message. Not cached.
  Pipeline build_pipeline(const std::string& label, const std::string& source);
  void dispatch(const DispatchDesc& d);
  // Splits a 1-D count of workgroups over x and y so neither exceeds the per-dimension limit. Kernels recover the
  // linear index as wid.x + wid.y * num_workgroups.x.
  std::pair<uint32_t, uint32_t> grid(uint64_t workgroups) const;

  // ---- GPU-side index checks ----------------------------------------------------------------------------------
  // A kernel that may meet an out-of-range index atomically ORs its bit into index_error_buffer() instead of
  // reading; the word is checked (and cleared) at the next read-back or synchronize, naming the op.
  uint32_t index_check_bit(std::string_view op);
  WGPUBuffer index_error_buffer();

  // ---- submission ---------------------------------------------------------------------------------------------
  void flush();
  void synchronize();

  // ---- timing -------------------------------------------------------------------------------------------------
  void begin_timing();
  Device::Timing end_timing();

  // ---- profiling (DeviceOptions::profile) -------------------------------------------------------------------
  std::vector<OpProfile> profile();

  // ---- recording (Device::record) --------------------------------------------------------------------------
  bool recording() const { return recording_ != nullptr; }
  void begin_recording();
  std::shared_ptr<RecordingImpl> end_recording();
  void abort_recording();
  void replay(const RecordingImpl& r);

 private:
  // Pool: free buffers by capacity. A released buffer joins the free pool only at the next flush, so a buffer that
  // recorded-but-unsubmitted work still reads is never overwritten by a queue write; until then it serves only
  // op outputs (`released_`, by capacity).
  std::map<uint64_t, std::vector<WGPUBuffer>> free_buffers_;
  std::map<uint64_t, std::vector<WGPUBuffer>> released_;
  void poison_on_gpu(WGPUBuffer b, uint64_t bytes);
  std::map<uint64_t, std::vector<WGPUBuffer>> free_readback_;
  WGPUBuffer create_buffer(uint64_t bytes, WGPUFlags usage, std::string_view what);
  WGPUBuffer take_readback(uint64_t bytes);
  void read_chunk(WGPUBuffer buffer, uint64_t offset, size_t bytes, void* dst);

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

  std::map<PipelineKey, Pipeline> pipelines_;

  WGPUBuffer index_error_ = nullptr;
  std::vector<std::string> index_checks_;  // op of bit k % 32, since the last verification
  void verify_index_checks();

  // Timing.
  WGPUQuerySet query_set_ = nullptr;
  WGPUBuffer query_resolve_ = nullptr;
  bool timing_ = false;
  bool timing_first_pass_ = false;
  std::chrono::steady_clock::time_point timing_start_;

  // The recording in progress, and every live storage by buffer (so a recording can keep what it references).
  std::shared_ptr<RecordingImpl> recording_;
  uint64_t recordings_ = 0;
  std::unordered_map<WGPUBuffer, std::weak_ptr<Storage>> live_;
  void no_recording(const char* what) const;

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

  friend class wgtrain::Device;
  void wait(const bool& done, const char* what);
};

// "validation error", "out of memory", ... for a WGPUErrorType, in messages.
std::string error_type_name(uint32_t type);

}  // namespace wgtrain::detail
