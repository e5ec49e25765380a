// A WebGPU device through Dawn: adapter choice, limits and features, and the work queue that ops record into.
//
// Work is batched: ops record dispatches into an open command encoder, and nothing is submitted until flush(),
// a read-back, or the batch's size cap. Errors the device reports are raised as GpuError naming the op.
// A Device and its tensors are used from one thread at a time. Destroy a Device before main returns: one left to a
// static destructor at exit can crash in Mesa's OpenGL teardown (seen with llvmpipe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace wgtrain {

namespace detail {
struct DeviceImpl;
struct RecordingImpl;
}

// Which runtime and which GPU API runs the work. One set of names everywhere (--backend, WGTRAIN_BACKEND):
//   auto             WGTRAIN_BACKEND if set, else webgpu
//   webgpu           WebGPU through Dawn on the first API that works: Vulkan (a real GPU), OpenGL, OpenGL ES
//   webgpu-vulkan, webgpu-opengl, webgpu-opengles: WebGPU through Dawn on that API only
//   native-vulkan    the native Vulkan backend: GLSL kernels for the training ops only (`wgtrain ops` lists them)
enum class Backend { Auto, WebGpu, WebGpuVulkan, WebGpuOpenGL, WebGpuOpenGLES, NativeVulkan };

// "auto", "webgpu", "webgpu-vulkan", ..., "native-vulkan".
const char* backend_name(Backend b);
// Parses those names; throws ArgumentError listing them (and naming the new spelling of an old one).
Backend parse_backend(const std::string& name);
// Every name parse_backend takes, for help texts.
const char* backend_choices();

struct DeviceOptions {
  // Auto: WGTRAIN_BACKEND if set, else WebGpu.
  Backend backend = Backend::Auto;
  // Fill every buffer handed out with 0xFF bytes (NaN as f32, -1 as i32), so that a kernel that leaves an element
  // unwritten is caught. On in tests; WGTRAIN_POISON=1 turns it on elsewhere.
  bool poison = false;
  // Request timestamp queries when the adapter offers them.
  bool timestamps = true;
  // Time every dispatch and sum the times per op (Device::profile): with GPU timestamps, each dispatch in a pass
  // of its own; without them, a wait after each dispatch. Slows everything down; for finding where time goes.
  // WGTRAIN_PROFILE=1 turns it on.
  bool profile = false;
  // native-vulkan: the physical device by enumeration order (`wgtrain devices`); -1: $WGTRAIN_VULKAN_DEVICE if
  // set, else the first discrete GPU, else the first.
  int vulkan_device = -1;
  // native-vulkan: run the GEMMs on cooperative matrices (fp16 operands, fp32 accumulation) where the device has
  // them. Off by default: it changes the numbers.
  bool cooperative_matrix = false;
  // WebGPU: request Dawn's experimental subgroup-matrix feature (matrix units, "tensor cores", from WGSL), with the
  // toggles it needs: allow_unsafe_apis (Dawn exposes experimental features only with it; an instance toggle) and
  // use_vulkan_memory_model (an adapter toggle). Off by default: experimental, and unsafe APIs are then allowed for
  // the whole device. (shader-f16 and subgroups need no option: requested wherever offered.) Where the adapter does not offer the feature (llvmpipe) the device opens without it:
  // features().subgroup_matrix says whether it is enabled, and kernels must fall back.
  bool subgroup_matrix = false;
};

// One shape of the adapter's subgroup matrices: operand and result component types as WGSL spells them ("f16",
// "f32", "u32", "i32"), the result tile M x N and the depth K of one multiply-accumulate.
struct SubgroupMatrixConfig {
  std::string component_type, result_type;
  uint32_t m = 0, n = 0, k = 0;
};

struct AdapterInfo {
  std::string name;         // e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;
  std::string architecture;
  std::string driver;       // the adapter's description string (driver version)
  Backend backend = Backend::Auto;  // the concrete one: webgpu-vulkan, webgpu-opengl, ..., native-vulkan
  std::string backend_label;  // "Vulkan", "OpenGL", ... (the API underneath)
  std::string adapter_type;   // "discrete GPU", "integrated GPU", "CPU", "unknown"
  bool compatibility_mode = false;
  uint32_t subgroup_min = 0, subgroup_max = 0;
  // A CPU rasteriser rather than a GPU (Mesa's llvmpipe or lavapipe, SwiftShader): work is sized down for it.
  bool software = false;
};

// The limits granted to the device (requested from the adapter's own limits, not WebGPU's defaults).
struct DeviceLimits {
  uint64_t max_buffer_size = 0;
  uint64_t max_storage_binding_size = 0;
  uint64_t max_uniform_binding_size = 0;
  uint32_t max_storage_buffers_per_stage = 0;
  uint32_t max_workgroup_storage = 0;
  uint32_t max_invocations_per_workgroup = 0;
  uint32_t max_workgroup_size_x = 0, max_workgroup_size_y = 0, max_workgroup_size_z = 0;
  uint32_t max_workgroups_per_dim = 0;
  uint32_t min_uniform_offset_alignment = 0;
  uint32_t min_storage_offset_alignment = 0;
  uint32_t max_bind_groups = 0;
};

struct DeviceFeatures {
  bool timestamp_query = false;
  bool shader_f16 = false;
  bool subgroups = false;
  bool subgroup_matrix = false;     // enabled on the device (DeviceOptions::subgroup_matrix, where offered)
  // The adapter's subgroup-matrix shapes, wherever it offers the feature (enabled or not); empty otherwise.
  std::vector<SubgroupMatrixConfig> subgroup_matrix_configs;
  bool cooperative_matrix = false;  // native-vulkan: fp16 cooperative-matrix GEMMs available (and asked for)
  std::vector<uint32_t> adapter_raw;  // every feature the adapter offers, in the library's numbering
};

// Time spent per op while profiling (DeviceOptions::profile).
struct OpProfile {
  std::string op;
  uint64_t dispatches = 0;
  double seconds = 0;
  bool from_timestamps = false;
};

struct DeviceStats {
  uint64_t dispatches = 0;
  uint64_t submits = 0;
  uint64_t buffers_created = 0;
  uint64_t pool_hits = 0;
  uint64_t pipelines_created = 0;
  uint64_t bytes_allocated = 0;  // held by live and pooled buffers
  uint64_t peak_bytes_allocated = 0;  // the most bytes_allocated has been: the device memory a run needed
};

// What a GPU buffer holds, for the memory report (Device::memory). A tensor takes the category of the innermost
// MemoryScope open on its device when it is allocated; Other outside any.
enum class MemoryCategory : uint8_t {
  Other,           // inputs, outputs, constants (rotary tables), the optimizer's tables: anything not tagged
  Weights,         // model parameters: trainable float32 weights (q4 latents included), q4 codes and scales, frozen
  OptimizerState,  // AdamW's moments
  Gradients,       // the parameters' gradients
  Activations,     // made by the forward pass of a training step (most of it kept by the autograd tape for backward)
  Temporaries,     // made by the backward pass, the loss, the optimizer update and requantisation
};
constexpr int kMemoryCategories = 6;
// "other", "weights", "optimizer state", "gradients", "activations", "temporaries".
const char* memory_category_name(MemoryCategory c);

// The pool's bytes at one moment, split by category. A category counts the bytes its live tensors asked for, plus
// the buffers a live recording keeps after their tensors were released (a replay writes them again: the step needs
// them), under the category of the tensor that last used them. `pool_overhead` is the rest of what the pool holds:
// idle buffers kept for reuse, the rounding of requests up to size classes, the runtime's own small buffers. So
// total == overhead + the sum of the categories, always.
struct MemoryUsage {
  uint64_t total = 0;
  uint64_t by_category[kMemoryCategories] = {};
  uint64_t pool_overhead = 0;
  uint64_t idle = 0;  // of the overhead: idle buffers kept for reuse (Device::release_cached_memory frees them)
  uint64_t operator[](MemoryCategory c) const { return by_category[static_cast<int>(c)]; }
  uint64_t in_use() const { return total - pool_overhead; }
};

// The pool now, and at its high-water mark since the device opened or Device::reset_peak_memory: the moment the
// total was highest (of those, the one with the least overhead). On a CPU rasteriser the "GPU" memory is host memory.
struct MemoryReport {
  MemoryUsage current, peak;
};

// One line: "412.3 MiB: weights 12.1 MiB, optimizer state 24.2 MiB, ..., pool overhead 3.0 MiB" (empty categories
// left out).
std::string describe_memory(const MemoryUsage& usage);

class Device;

// Tags the tensors allocated while it lives with `category` (it nests: the innermost wins). Cheap: two stores.
class MemoryScope {
 public:
  MemoryScope(Device& device, MemoryCategory category);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  detail::DeviceImpl* device_;
  MemoryCategory previous_;
};

// GPU work recorded once by Device::record and replayed as often as needed: the dispatches and copies that ops
// issued, with their pipelines, uniforms and bind groups built once. A replay re-runs none of the host code that
// recorded it (no argument checks, allocations or bind-group creation), so it costs little more than the GPU time.
//
// A replay reads and writes exactly the buffers the recording did: inputs that change between replays are tensors
// made before recording and overwritten with Tensor::write; outputs are tensors the recorded ops returned. The
// recording keeps every buffer it references from being handed to other work for as long as it lives.
class Recording {
 public:
  Recording() = default;
  // Appends the recorded work to the device's open batch (run by the next flush or read-back, like any op).
  void replay() const;
  bool empty() const { return !impl_; }
  size_t dispatches() const;

 private:
  friend class Device;
  std::shared_ptr<detail::RecordingImpl> impl_;
};

class Device {
 public:
  // Opens the adapter and device; throws Error with what was tried when none works.
  static Device open(const DeviceOptions& options = {});
  ~Device();
  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;

  const AdapterInfo& info() const;
  const DeviceLimits& limits() const;
  const DeviceFeatures& features() const;
  DeviceStats stats() const;
  // Per-op times gathered so far, the largest first (empty unless profiling).
  std::vector<OpProfile> profile();

  // The pool's memory by category, now and at its high-water mark (MemoryReport).
  MemoryReport memory() const;
  // Starts a new high-water mark from the pool as it is now.
  void reset_peak_memory();
  // Waits for the GPU, then gives every idle pooled buffer (and the backend's cached staging buffers, and what the
  // device keeps derived from tensors, such as the mixed GEMMs' operand maxima) back to the driver: what the next
  // work allocates starts from an empty pool. Buffers of live tensors and recordings stay.
  void release_cached_memory();

  // Submits what has been recorded, without waiting.
  void flush();
  // Submits and waits until the GPU has finished all of it.
  void synchronize();

  // Times the GPU work recorded inside `body`: GPU timestamps where the device has them, otherwise the wall clock
  // around a synchronize (then `from_timestamps` is false).
  struct Timing {
    double seconds = 0;
    bool from_timestamps = false;
  };
  template <class F>
  Timing time(F&& body) {
    begin_timing();
    body();
    return end_timing();
  }
  void begin_timing();
  Timing end_timing();

  // Records the GPU work `body` issues, without running it (the first replay runs it). Inside `body`, reading a
  // tensor back or writing into an existing one is an Error: such host steps cannot be replayed. Tensors created
  // from host data inside `body` become constants of the recording. Recordings do not nest.
  template <class F>
  Recording record(F&& body) {
    begin_recording();
    try {
      body();
    } catch (...) {
      abort_recording();
      throw;
    }
    return end_recording();
  }
  void begin_recording();
  Recording end_recording();
  void abort_recording();

  // Internal access for op handlers.
  detail::DeviceImpl& impl() const { return *impl_; }
  const std::shared_ptr<detail::DeviceImpl>& shared_impl() const { return impl_; }

 private:
  explicit Device(std::shared_ptr<detail::DeviceImpl> impl);
  std::shared_ptr<detail::DeviceImpl> impl_;
};

}  // namespace wgtrain
