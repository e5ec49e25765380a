#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpu/device_impl.h"
#include "wgtrain/error.h"
#include "wgtrain/vulkan.h"

namespace wgtrain {

using namespace webgpu;
using detail::DeviceImpl;

namespace {

std::string to_string(WGPUStringView v) {
  if (!v.data) return {};
  if (v.length == WGPU_STRLEN) return std::string(v.data);
  return std::string(v.data, v.length);
}

WGPUStringView sv(std::string_view s) { return WGPUStringView{s.data(), s.size()}; }

const char* adapter_type_name(uint32_t t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
  }
}

const char* backend_label(uint32_t b) {
  switch (b) {
    case WGPUBackendType_Null: return "Null";
    case WGPUBackendType_WebGPU: return "WebGPU";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    default: return "undefined";
  }
}

Backend backend_from_wgpu(uint32_t b) {
  switch (b) {
    case WGPUBackendType_Vulkan: return Backend::Vulkan;
    case WGPUBackendType_OpenGL: return Backend::OpenGL;
    case WGPUBackendType_OpenGLES: return Backend::OpenGLES;
    default: return Backend::Auto;
  }
}

struct AdapterRequest {
  bool done = false;
  uint32_t status = 0;
  WGPUAdapter adapter = nullptr;
  std::string message;
};

struct DeviceRequest {
  bool done = false;
  uint32_t status = 0;
  WGPUDevice device = nullptr;
  std::string message;
};

struct ScopeResult {
  bool done = false;
  uint32_t type = WGPUErrorType_NoError;
  std::string message;
};

// Pops the innermost error scope and waits for its verdict (no GPU wait: validation is decided on the CPU).
template <class Wait>
ScopeResult pop_error_scope(const Api& api, WGPUDevice device, Wait&& wait) {
  ScopeResult r;
  WGPUPopErrorScopeCallbackInfo ci{};
  ci.mode = WGPUCallbackMode_AllowProcessEvents;
  ci.callback = [](uint32_t, uint32_t type, WGPUStringView message, void* ud1, void*) {
    auto* res = static_cast<ScopeResult*>(ud1);
    res->type = type;
    res->message = to_string(message);
    res->done = true;
  };
  ci.userdata1 = &r;
  api.DevicePopErrorScope(device, ci);
  wait(r.done);
  return r;
}

void on_uncaptured_error(const WGPUDevice*, uint32_t type, WGPUStringView message, void* ud1, void*) {
  auto* impl = static_cast<DeviceImpl*>(ud1);
  impl->pending_errors.push_back(detail::error_type_name(type) + ": " + to_string(message));
}

void on_device_lost(const WGPUDevice*, uint32_t reason, WGPUStringView message, void* ud1, void*) {
  // CallbackCancelled comes from our own teardown (the instance goes first): not a loss anyone needs to hear of.
  if (reason == WGPUDeviceLostReason_CallbackCancelled) return;
  auto* impl = static_cast<DeviceImpl*>(ud1);
  impl->lost = true;
  impl->lost_message = to_string(message);
  if (reason == WGPUDeviceLostReason_Destroyed) impl->lost_message += " (the device was destroyed)";
}

// Why Dawn's Vulkan backend has nothing to offer here, or empty when it may: no loader, or only CPU devices (Mesa's
// lavapipe, which Dawn rejects with a warning before falling back to its Null adapter).
std::string vulkan_unusable_for_dawn() {
  try {
    const auto devices = vk::Device::list();
    for (const auto& d : devices)
      if (!d.software) return {};
    return devices.empty() ? "no Vulkan device"
                           : "only CPU Vulkan devices (" + devices.front().name + "), which Dawn does not take";
  } catch (const Error& e) {
    return e.what();
  }
}

constexpr size_t kUniformChunkBytes = 64 * 1024;
// Largest single queue write or read-back copy, and the most queue-write staging left outstanding.
constexpr uint64_t kTransferChunkBytes = uint64_t{64} << 20;
constexpr uint64_t kStagingBudgetBytes = uint64_t{256} << 20;
constexpr size_t kMaxDispatchesPerBatch = 1024;

// Pool size classes: 256 bytes, then 8 classes per power of two, so a pooled buffer wastes at most 1/8; past
// 64 MiB, whole MiB (a class of up to 1/8 more could cross a driver's largest single allocation, as a 4 GB logits
// buffer does on NVIDIA).
uint64_t size_class(uint64_t bytes) {
  if (bytes <= 256) return 256;
  if (bytes > (uint64_t{64} << 20)) return (bytes + (1u << 20) - 1) >> 20 << 20;
  uint64_t p = 256;
  while (p < bytes) p <<= 1;
  const uint64_t step = std::max<uint64_t>(p / 16, 256);  // classes between p/2 and p
  return (bytes + step - 1) / step * step;
}

}  // namespace

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Vulkan: return "vulkan";
    case Backend::OpenGL: return "opengl";
    case Backend::OpenGLES: return "opengles";
  }
  return "?";
}

Backend parse_backend(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "auto" || s.empty()) return Backend::Auto;
  if (s == "vulkan" || s == "vk") return Backend::Vulkan;
  if (s == "opengl" || s == "gl") return Backend::OpenGL;
  if (s == "opengles" || s == "gles") return Backend::OpenGLES;
  throw ArgumentError("unknown backend '" + name + "': expected auto, vulkan, opengl or opengles");
}

namespace detail {

std::string error_type_name(uint32_t type) {
  switch (type) {
    case WGPUErrorType_Validation: return "validation error";
    case WGPUErrorType_OutOfMemory: return "out of memory";
    case WGPUErrorType_Internal: return "internal error";
    default: return "unknown error";
  }
}

Storage::~Storage() {
  if (device && buffer) device->release(*this);
}

RecordingImpl::~RecordingImpl() {
  for (auto& c : commands)
    if (c.bind_group) device->api.BindGroupRelease(c.bind_group);
  if (uniform_buffer) device->api.BufferRelease(uniform_buffer);
  for (auto& [cap, list] : reusable)
    for (auto b : list) device->release_buffer(b, cap);
  for (auto& [b, cap] : pinned) device->release_buffer(b, cap);
  retained.clear();  // the last references go back to the pool as usual
}

DeviceImpl::~DeviceImpl() {
  try {
    if (device && !lost) synchronize();
    lost = true;  // from here on the lost callback reports our own DeviceDestroy
  } catch (...) {
    // Teardown must not throw; a failing last submit has nothing left to report to.
  }
  if (pass_) api.ComputePassEncoderRelease(pass_);
  if (encoder_) api.CommandEncoderRelease(encoder_);
  for (auto& [cap, list] : free_buffers_)
    for (auto b : list) api.BufferRelease(b);
  for (auto& [cap, list] : released_)
    for (auto b : list) api.BufferRelease(b);
  for (auto& [cap, list] : free_readback_)
    for (auto b : list) api.BufferRelease(b);
  for (auto& c : uniform_chunks_) api.BufferRelease(c.buffer);
  for (auto& [key, p] : pipelines_) {
    api.BindGroupLayoutRelease(p.layout);
    api.ComputePipelineRelease(p.pipeline);
  }
  if (index_error_) api.BufferRelease(index_error_);
  if (query_set_) api.QuerySetRelease(query_set_);
  if (profile_queries_) api.QuerySetRelease(profile_queries_);
  if (profile_resolve_) api.BufferRelease(profile_resolve_);
  if (query_resolve_) api.BufferRelease(query_resolve_);
  if (queue) api.QueueRelease(queue);
  if (device) {
    api.DeviceDestroy(device);
    api.DeviceRelease(device);
  }
  if (adapter) api.AdapterRelease(adapter);
  if (instance) {
    api.InstanceProcessEvents(instance);
    api.InstanceRelease(instance);
  }
}

void DeviceImpl::check(std::string_view op) {
  if (lost) throw DeviceLostError("the GPU device was lost (during or before '" + std::string(op) + "'): " +
                                  lost_message + ". Open a new device.");
  if (pending_errors.empty()) return;
  std::string msg = "'" + std::string(op) + "': the device reported ";
  for (size_t i = 0; i < pending_errors.size(); ++i) msg += (i ? "; then " : "") + pending_errors[i];
  pending_errors.clear();
  throw GpuError(msg);
}

void DeviceImpl::wait(const bool& done, const char* what) {
  int spins = 0;
  while (!done) {
    api.InstanceProcessEvents(instance);
    if (done) break;
    if (lost) check(what);
    // Spin briefly for low latency, then back off so that a CPU device (llvmpipe) keeps its cores.
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 200 : 20));
  }
}

WGPUBuffer DeviceImpl::create_buffer(uint64_t bytes, WGPUFlags usage, std::string_view what) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    api.DevicePushErrorScope(device, WGPUErrorFilter_OutOfMemory);
    WGPUBufferDescriptor bd{};
    bd.label = sv(what);
    bd.usage = usage;
    bd.size = bytes;
    WGPUBuffer b = api.DeviceCreateBuffer(device, &bd);
    const ScopeResult r = pop_error_scope(api, device, [this](const bool& done) { wait(done, "buffer allocation"); });
    if (r.type == WGPUErrorType_NoError && b) {
      ++stats.buffers_created;
      stats.bytes_allocated += bytes;
      stats.peak_bytes_allocated = std::max(stats.peak_bytes_allocated, stats.bytes_allocated);
      return b;
    }
    if (b) api.BufferRelease(b);
    if (attempt == 0) {
      // Give the pool's idle buffers back and try once more.
      synchronize();
      for (auto& [cap, list] : free_buffers_)
        for (auto fb : list) {
          api.BufferDestroy(fb);
          api.BufferRelease(fb);
          stats.bytes_allocated -= cap;
        }
      free_buffers_.clear();
      synchronize();  // Dawn frees a destroyed buffer's memory once the GPU is past it, at a later tick
      continue;
    }
    throw GpuError("out of GPU memory allocating " + std::to_string(bytes) + " bytes for " + std::string(what) +
                   " (" + std::to_string(stats.bytes_allocated) + " bytes already held): " + r.message);
  }
  return nullptr;  // unreachable
}

std::shared_ptr<Storage> DeviceImpl::allocate(uint64_t bytes, std::string_view what, bool host_write) {
  if (lost) check(what);
  bytes = std::max<uint64_t>(bytes, 4);
  if (bytes > limits.max_storage_binding_size || bytes > limits.max_buffer_size)
    throw ArgumentError(std::string(what) + " needs " + std::to_string(bytes) +
                        " bytes, more than this device can bind in one buffer (" +
                        std::to_string(std::min(limits.max_storage_binding_size, limits.max_buffer_size)) +
                        " bytes on " + info.name + ")");
  uint64_t cap = size_class(bytes);
  cap = std::max(bytes, std::min(cap, std::min(limits.max_storage_binding_size, limits.max_buffer_size) / 4 * 4));
  WGPUBuffer b = nullptr;
  auto take = [&](std::map<uint64_t, std::vector<WGPUBuffer>>& pool) {
    auto it = pool.find(cap);
    if (it == pool.end() || it->second.empty()) return false;
    b = it->second.back();
    it->second.pop_back();
    ++stats.pool_hits;
    return true;
  };
  // While recording, an output first takes a buffer this recording's earlier outputs released.
  const bool reused = recording_ && !host_write && take(recording_->reusable);
  if (!reused && !take(free_buffers_) && (host_write || !take(released_)))
    b = create_buffer(cap, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst, what);
  // A buffer the host is about to fill needs no poison; an op's output is poisoned in order on the GPU.
  if (options.poison && !host_write) poison_on_gpu(b, cap);
  auto s = std::make_shared<Storage>();
  s->device = shared_from_this();
  s->buffer = b;
  s->capacity = cap;
  s->bytes = bytes;
  s->host_written = host_write;
  if (recording_ && !host_write) s->recorded_in = recording_->serial;
  live_[b] = s;
  return s;
}

void DeviceImpl::poison_on_gpu(WGPUBuffer b, uint64_t bytes) {
  struct alignas(16) FillParams {
    uint32_t n, off, word, pad;
  };
  const uint64_t words = bytes / 4;
  const uint64_t per_dispatch = uint64_t{256} * limits.max_workgroups_per_dim * 256;
  const Pipeline& pipe = pipeline("shape/fill", {});
  for (uint64_t at = 0; at < words; at += per_dispatch) {
    const uint64_t n = std::min(per_dispatch, words - at);
    FillParams p{static_cast<uint32_t>(n), static_cast<uint32_t>(at), 0xFFFFFFFFu, 0};
    const auto [gx, gy] = grid((n + 255) / 256);
    dispatch({"poison", &pipe, &p, sizeof p, {{b}}, gx, gy, 1, false});
  }
}

void DeviceImpl::release(Storage& s) {
  live_.erase(s.buffer);
  if (recording_ && recording_->referenced.count(s.buffer)) {
    if (s.recorded_in == recording_->serial && !s.host_written)
      recording_->reusable[s.capacity].push_back(s.buffer);
    else
      recording_->pinned.emplace_back(s.buffer, s.capacity);
    return;
  }
  release_buffer(s.buffer, s.capacity);
}

void DeviceImpl::release_buffer(WGPUBuffer buffer, uint64_t capacity) { released_[capacity].push_back(buffer); }

void DeviceImpl::no_recording(const char* what) const {
  if (recording_)
    throw Error(std::string(what) + " while recording: a recording holds GPU work only (read back or write inputs "
                "before or after Device::record, not inside it)");
}

void DeviceImpl::write(WGPUBuffer buffer, uint64_t offset, const void* data, size_t bytes) {
  no_recording("writing into a tensor");
  if (bytes == 0) return;
  // Recorded work that reads this buffer must see the old contents: submit it before the queue write.
  if (encoder_) flush();
  write_idle(buffer, offset, data, bytes);
}

void DeviceImpl::write_idle(WGPUBuffer buffer, uint64_t offset, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t at = 0; at < bytes; at += kTransferChunkBytes) {
    // Dawn holds each write's staging memory until the GPU is past it: let it catch up every few chunks, or a
    // multi-GB upload exhausts device memory (seen on the H200).
    if (at && at % kStagingBudgetBytes == 0) synchronize();
    api.QueueWriteBuffer(queue, buffer, offset + at, p + at, std::min<uint64_t>(kTransferChunkBytes, bytes - at));
  }
  check("upload");
}

WGPUBuffer DeviceImpl::take_readback(uint64_t bytes) {
  const uint64_t cap = size_class(bytes);
  auto& list = free_readback_[cap];
  if (!list.empty()) {
    WGPUBuffer b = list.back();
    list.pop_back();
    return b;
  }
  return create_buffer(cap, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "read-back staging");
}

void DeviceImpl::read(WGPUBuffer buffer, uint64_t offset, size_t bytes, void* dst) {
  no_recording("reading a tensor back");
  if (bytes == 0) return;
  // In chunks: one staging buffer the size of a multi-GB tensor may not be allocatable where a smaller one is.
  for (uint64_t at = 0; at < bytes; at += kTransferChunkBytes) {
    const uint64_t n = std::min<uint64_t>(kTransferChunkBytes, bytes - at);
    read_chunk(buffer, offset + at, n, static_cast<uint8_t*>(dst) + at);
  }
  verify_index_checks();
}

void DeviceImpl::read_chunk(WGPUBuffer buffer, uint64_t offset, size_t bytes, void* dst) {
  const uint64_t padded = (bytes + 3) / 4 * 4;
  WGPUBuffer staging = take_readback(padded);
  copy(buffer, offset, staging, 0, padded);
  flush();
  struct MapState {
    bool done = false;
    uint32_t status = 0;
    std::string message;
  } st;
  WGPUBufferMapCallbackInfo ci{};
  ci.mode = WGPUCallbackMode_AllowProcessEvents;
  ci.callback = [](uint32_t status, WGPUStringView message, void* ud1, void*) {
    auto* s = static_cast<MapState*>(ud1);
    s->status = status;
    s->message = to_string(message);
    s->done = true;
  };
  ci.userdata1 = &st;
  api.BufferMapAsync(staging, WGPUMapMode_Read, 0, padded, ci);
  wait(st.done, "read-back");
  if (st.status != WGPUMapAsyncStatus_Success) {
    api.BufferRelease(staging);
    check("read-back");
    throw GpuError("read-back failed: mapping the staging buffer returned status " + std::to_string(st.status) +
                   ": " + st.message);
  }
  const void* p = api.BufferGetConstMappedRange(staging, 0, padded);
  if (!p) {
    api.BufferUnmap(staging);
    api.BufferRelease(staging);
    throw GpuError("read-back failed: the mapped range is null");
  }
  std::memcpy(dst, p, bytes);
  api.BufferUnmap(staging);
  free_readback_[size_class(padded)].push_back(staging);
  check("read-back");
}

uint32_t DeviceImpl::index_check_bit(std::string_view op) {
  index_checks_.emplace_back(op);
  return 1u << ((index_checks_.size() - 1) % 32);
}

WGPUBuffer DeviceImpl::index_error_buffer() {
  if (!index_error_) {
    index_error_ = create_buffer(256, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst,
                                 "index errors");
    const uint32_t zero = 0;
    api.QueueWriteBuffer(queue, index_error_, 0, &zero, sizeof zero);
  }
  return index_error_;
}

void DeviceImpl::verify_index_checks() {
  if (index_checks_.empty() || recording_) return;
  const std::vector<std::string> ops = std::move(index_checks_);
  index_checks_.clear();
  uint32_t word = 0;
  read(index_error_, 0, sizeof word, &word);
  if (word == 0) return;
  const uint32_t zero = 0;
  api.QueueWriteBuffer(queue, index_error_, 0, &zero, sizeof zero);
  std::string names;
  for (size_t k = 0; k < ops.size(); ++k)
    if (word & (1u << (k % 32))) names += (names.empty() ? "'" : ", '") + ops[k] + "'";
  throw ArgumentError("an index was out of range in " + names +
                      " (found on the GPU: those elements were written as 0, nothing was read out of bounds)");
}

void DeviceImpl::copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return;
  if (recording_) {
    RecordingImpl::Command c;
    c.kind = RecordingImpl::Command::Copy;
    c.op = "copy";
    c.src = src;
    c.dst = dst;
    c.src_offset = src_offset;
    c.dst_offset = dst_offset;
    c.bytes = bytes;
    recording_->referenced.insert(src);
    recording_->referenced.insert(dst);
    recording_->commands.push_back(std::move(c));
    return;
  }
  ensure_encoder();
  end_pass();
  api.CommandEncoderCopyBufferToBuffer(encoder_, src, src_offset, dst, dst_offset, bytes);
  check("copy");
}

const Pipeline& DeviceImpl::pipeline(const std::string& kernel, const KernelDefs& defs) {
  PipelineKey key{kernel, defs};
  std::sort(key.defs.begin(), key.defs.end());
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;

  const std::string source = render_kernel(kernel, kernel_source(kernel), defs);
  note_compiled_kernel(kernel, key.defs, source);  // WGTRAIN_DUMP_KERNELS (gpu/kernels.h)
  std::string label = kernel;
  for (const auto& [k, v] : key.defs) label += " " + k + "=" + v;
  Pipeline p = build_pipeline(label, source);
  return pipelines_.emplace(std::move(key), std::move(p)).first->second;
}

Pipeline DeviceImpl::build_pipeline(const std::string& label, const std::string& source) {
  api.DevicePushErrorScope(device, WGPUErrorFilter_Validation);
  WGPUShaderSourceWGSL wgsl{};
  wgsl.chain.sType = WGPUSType_ShaderSourceWGSL;
  wgsl.code = sv(source);
  WGPUShaderModuleDescriptor smd{};
  smd.nextInChain = &wgsl.chain;
  smd.label = sv(label);
  WGPUShaderModule module = api.DeviceCreateShaderModule(device, &smd);
  WGPUComputePipelineDescriptor cpd{};
  cpd.label = sv(label);
  cpd.compute.module = module;
  cpd.compute.entryPoint = sv("main");
  WGPUComputePipeline pipe = api.DeviceCreateComputePipeline(device, &cpd);
  api.ShaderModuleRelease(module);
  const ScopeResult r = pop_error_scope(api, device, [this](const bool& done) { wait(done, "pipeline creation"); });
  if (r.type != WGPUErrorType_NoError) {
    if (pipe) api.ComputePipelineRelease(pipe);
    throw GpuError("kernel '" + label + "' failed to build on " + info.name + ": " + r.message);
  }
  Pipeline p;
  p.pipeline = pipe;
  p.layout = api.ComputePipelineGetBindGroupLayout(pipe, 0);
  p.label = label;
  ++stats.pipelines_created;
  check(label);
  return p;
}

std::pair<uint32_t, uint32_t> DeviceImpl::grid(uint64_t workgroups) const {
  const uint64_t maxd = limits.max_workgroups_per_dim;
  if (workgroups <= maxd) return {static_cast<uint32_t>(std::max<uint64_t>(workgroups, 1)), 1};
  const uint64_t y = (workgroups + maxd - 1) / maxd;
  if (y > maxd) throw ArgumentError("work of " + std::to_string(workgroups) + " workgroups exceeds the device's grid");
  const uint64_t x = (workgroups + y - 1) / y;
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y)};
}

std::pair<WGPUBuffer, uint64_t> DeviceImpl::stage_uniforms(const void* data, size_t bytes) {
  if (bytes > kUniformChunkBytes) throw Error("uniform block of " + std::to_string(bytes) + " bytes is too large");
  const size_t align = std::max<size_t>(limits.min_uniform_offset_alignment, 16);
  if (uniform_chunks_.empty()) uniform_chunks_.emplace_back();
  UniformChunk* c = &uniform_chunks_[uniform_chunk_in_use_];
  size_t at = (c->used + align - 1) / align * align;
  if (at + bytes > kUniformChunkBytes) {
    ++uniform_chunk_in_use_;
    if (uniform_chunk_in_use_ == uniform_chunks_.size()) uniform_chunks_.emplace_back();
    c = &uniform_chunks_[uniform_chunk_in_use_];
    at = 0;
  }
  if (!c->buffer) {
    c->buffer = create_buffer(kUniformChunkBytes, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "uniforms");
    c->host.assign(kUniformChunkBytes, 0);
  }
  std::memcpy(c->host.data() + at, data, bytes);
  c->used = at + bytes;
  return {c->buffer, at};
}

void DeviceImpl::ensure_encoder() {
  if (encoder_) return;
  WGPUCommandEncoderDescriptor d{};
  d.label = sv("wgtrain batch");
  encoder_ = api.DeviceCreateCommandEncoder(device, &d);
}

void DeviceImpl::ensure_pass() {
  ensure_encoder();
  if (pass_) return;
  WGPUComputePassDescriptor d{};
  d.label = sv("wgtrain ops");
  WGPUPassTimestampWrites tw{};
  if (timing_ && query_set_) {
    // The region's first pass stamps its start; every pass stamps the end, so the last one's end stands.
    tw.querySet = query_set_;
    tw.beginningOfPassWriteIndex = timing_first_pass_ ? 0 : WGPU_QUERY_SET_INDEX_UNDEFINED;
    tw.endOfPassWriteIndex = 1;
    timing_first_pass_ = false;
    d.timestampWrites = &tw;
  }
  pass_ = api.CommandEncoderBeginComputePass(encoder_, &d);
}

void DeviceImpl::end_pass() {
  if (!pass_) return;
  api.ComputePassEncoderEnd(pass_);
  api.ComputePassEncoderRelease(pass_);
  pass_ = nullptr;
}

void DeviceImpl::dispatch(const DispatchDesc& d) {
  if (lost) check(d.op);
  const uint32_t maxd = limits.max_workgroups_per_dim;
  if (d.groups_x > maxd || d.groups_y > maxd || d.groups_z > maxd)
    throw Error("'" + std::string(d.op) + "': dispatch of " + std::to_string(d.groups_x) + "x" +
                std::to_string(d.groups_y) + "x" + std::to_string(d.groups_z) +
                " workgroups exceeds the per-dimension limit " + std::to_string(maxd));
  if (d.groups_x == 0 || d.groups_y == 0 || d.groups_z == 0) return;
  if (d.storage.size() + 1 > 16) throw Error("'" + std::string(d.op) + "': too many bindings");
  if (recording_) {
    RecordingImpl& r = *recording_;
    RecordingImpl::Command c;
    c.op = std::string(d.op);
    c.pipeline = d.pipeline;
    if (d.uniforms) {
      const size_t align = std::max<size_t>(limits.min_uniform_offset_alignment, 16);
      c.uniform_offset = (r.uniforms.size() + align - 1) / align * align;
      c.uniform_bytes = d.uniform_bytes;
      r.uniforms.resize(c.uniform_offset + d.uniform_bytes, 0);
      std::memcpy(r.uniforms.data() + c.uniform_offset, d.uniforms, d.uniform_bytes);
    }
    for (const auto& b : d.storage) {
      c.storage.push_back(b.buffer);
      r.referenced.insert(b.buffer);
    }
    c.groups_x = d.groups_x;
    c.groups_y = d.groups_y;
    c.groups_z = d.groups_z;
    c.counted = d.counted;
    if (d.counted) ++r.dispatches;
    r.commands.push_back(std::move(c));
    return;
  }

  WGPUBindGroupEntry entries[16]{};
  size_t n = 0;
  if (d.uniforms) {
    auto [buf, off] = stage_uniforms(d.uniforms, d.uniform_bytes);
    entries[n].binding = 0;
    entries[n].buffer = buf;
    entries[n].offset = off;
    entries[n].size = d.uniform_bytes;
    ++n;
  }
  for (size_t i = 0; i < d.storage.size(); ++i, ++n) {
    entries[n].binding = static_cast<uint32_t>(i + 1);
    entries[n].buffer = d.storage[i].buffer;
    entries[n].offset = 0;
    entries[n].size = WGPU_WHOLE_SIZE;
  }
  const std::string label(d.op);
  WGPUBindGroupDescriptor bgd{};
  bgd.label = sv(label);
  bgd.layout = d.pipeline->layout;
  bgd.entryCount = n;
  bgd.entries = entries;
  // The bind group is where a wrong binding shows; Dawn reports it only through an error scope right away (its
  // uncaptured-error path defers it to the submit, where the op's name is lost).
  api.DevicePushErrorScope(device, WGPUErrorFilter_Validation);
  WGPUBindGroup bg = api.DeviceCreateBindGroup(device, &bgd);
  const ScopeResult scope = pop_error_scope(api, device, [this](const bool& done) { wait(done, "dispatch"); });
  if (scope.type != WGPUErrorType_NoError) {
    if (bg) api.BindGroupRelease(bg);
    throw GpuError("'" + label + "': the device rejected the dispatch's bindings: " + scope.message);
  }
  encode_dispatch(d.op, d.pipeline->pipeline, bg, d.groups_x, d.groups_y, d.groups_z);
  api.BindGroupRelease(bg);  // the encoder holds its own reference
  if (d.counted) ++stats.dispatches;
  ++batch_dispatches_;
  check(d.op);
  if (batch_dispatches_ >= kMaxDispatchesPerBatch) flush();
}

void DeviceImpl::encode_dispatch(std::string_view op, WGPUComputePipeline pipeline, WGPUBindGroup bg, uint32_t gx,
                                 uint32_t gy, uint32_t gz) {
  if (!options.profile || timing_) {
    ensure_pass();
    api.ComputePassEncoderSetPipeline(pass_, pipeline);
    api.ComputePassEncoderSetBindGroup(pass_, 0, bg, 0, nullptr);
    api.ComputePassEncoderDispatchWorkgroups(pass_, gx, gy, gz);
    return;
  }
  if (features.timestamp_query) {
    if (!profile_queries_) {
      WGPUQuerySetDescriptor qd{};
      qd.label = sv("wgtrain profile");
      qd.type = WGPUQueryType_Timestamp;
      qd.count = 2 * kProfileSlots;
      profile_queries_ = api.DeviceCreateQuerySet(device, &qd);
      profile_resolve_ = create_buffer(16 * kProfileSlots, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc,
                                       "profile timestamps");
    }
    if (profile_pending_.size() == kProfileSlots) settle_profile();
    const uint32_t k = static_cast<uint32_t>(profile_pending_.size());
    ensure_encoder();
    end_pass();
    WGPUComputePassDescriptor pd{};
    pd.label = sv(op);
    WGPUPassTimestampWrites tw{};
    tw.querySet = profile_queries_;
    tw.beginningOfPassWriteIndex = 2 * k;
    tw.endOfPassWriteIndex = 2 * k + 1;
    pd.timestampWrites = &tw;
    WGPUComputePassEncoder pass = api.CommandEncoderBeginComputePass(encoder_, &pd);
    api.ComputePassEncoderSetPipeline(pass, pipeline);
    api.ComputePassEncoderSetBindGroup(pass, 0, bg, 0, nullptr);
    api.ComputePassEncoderDispatchWorkgroups(pass, gx, gy, gz);
    api.ComputePassEncoderEnd(pass);
    api.ComputePassEncoderRelease(pass);
    profile_pending_.emplace_back(op);
    return;
  }
  // No timestamps: wait for what came before, then for this dispatch alone.
  synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  ensure_pass();
  api.ComputePassEncoderSetPipeline(pass_, pipeline);
  api.ComputePassEncoderSetBindGroup(pass_, 0, bg, 0, nullptr);
  api.ComputePassEncoderDispatchWorkgroups(pass_, gx, gy, gz);
  synchronize();
  auto& e = profile_.try_emplace(std::string(op)).first->second;
  e.op = std::string(op);
  ++e.dispatches;
  e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void DeviceImpl::settle_profile() {
  if (profile_pending_.empty()) return;
  const std::vector<std::string> ops = std::move(profile_pending_);
  profile_pending_.clear();
  ensure_encoder();
  end_pass();
  const uint32_t n = static_cast<uint32_t>(ops.size());
  api.CommandEncoderResolveQuerySet(encoder_, profile_queries_, 0, 2 * n, profile_resolve_, 0);
  std::vector<uint64_t> ts(2 * n);
  read(profile_resolve_, 0, ts.size() * 8, ts.data());
  for (uint32_t k = 0; k < n; ++k) {
    auto& e = profile_.try_emplace(ops[k]).first->second;
    e.op = ops[k];
    ++e.dispatches;
    e.from_timestamps = true;
    if (ts[2 * k + 1] >= ts[2 * k]) e.seconds += static_cast<double>(ts[2 * k + 1] - ts[2 * k]) * 1e-9;
  }
}

std::vector<OpProfile> DeviceImpl::profile() {
  if (!recording_) settle_profile();
  std::vector<OpProfile> out;
  for (const auto& [k, v] : profile_) out.push_back(v);
  std::sort(out.begin(), out.end(), [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
  return out;
}

void DeviceImpl::flush() {
  if (encoder_) {
    end_pass();
    for (size_t i = 0; i <= uniform_chunk_in_use_ && i < uniform_chunks_.size(); ++i) {
      auto& c = uniform_chunks_[i];
      if (c.used) api.QueueWriteBuffer(queue, c.buffer, 0, c.host.data(), (c.used + 3) / 4 * 4);
      c.used = 0;
    }
    uniform_chunk_in_use_ = 0;
    WGPUCommandBufferDescriptor cbd{};
    cbd.label = sv("wgtrain batch");
    WGPUCommandBuffer cb = api.CommandEncoderFinish(encoder_, &cbd);
    api.CommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    api.QueueSubmit(queue, 1, &cb);
    api.CommandBufferRelease(cb);
    ++stats.submits;
    batch_dispatches_ = 0;
  }
  // Everything recorded is submitted: buffers released so far may now be handed out for anything.
  for (auto& [cap, list] : released_) {
    auto& free = free_buffers_[cap];
    free.insert(free.end(), list.begin(), list.end());
  }
  released_.clear();
  check("submit");
}

void DeviceImpl::synchronize() {
  flush();
  bool done = false;
  WGPUQueueWorkDoneCallbackInfo ci{};
  ci.mode = WGPUCallbackMode_AllowProcessEvents;
  ci.callback = [](uint32_t, WGPUStringView, void* ud1, void*) { *static_cast<bool*>(ud1) = true; };
  ci.userdata1 = &done;
  api.QueueOnSubmittedWorkDone(queue, ci);
  wait(done, "synchronize");
  check("synchronize");
  verify_index_checks();
}

void DeviceImpl::begin_timing() {
  if (timing_) throw Error("begin_timing: a timing region is already open");
  if (features.timestamp_query) {
    if (!query_set_) {
      WGPUQuerySetDescriptor qd{};
      qd.label = sv("wgtrain timing");
      qd.type = WGPUQueryType_Timestamp;
      qd.count = 2;
      query_set_ = api.DeviceCreateQuerySet(device, &qd);
      query_resolve_ = create_buffer(256, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc, "timestamps");
    }
    end_pass();
    timing_first_pass_ = true;
  } else {
    synchronize();
    timing_start_ = std::chrono::steady_clock::now();
  }
  timing_ = true;
}

Device::Timing DeviceImpl::end_timing() {
  if (!timing_) throw Error("end_timing without begin_timing");
  if (!features.timestamp_query) {
    synchronize();
    timing_ = false;
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - timing_start_).count(), false};
  }
  end_pass();
  timing_ = false;
  if (timing_first_pass_) return {0.0, true};  // nothing was dispatched inside the region
  ensure_encoder();
  api.CommandEncoderResolveQuerySet(encoder_, query_set_, 0, 2, query_resolve_, 0);
  uint64_t ts[2] = {0, 0};
  read(query_resolve_, 0, sizeof ts, ts);
  return {ts[1] >= ts[0] ? static_cast<double>(ts[1] - ts[0]) * 1e-9 : 0.0, true};
}

// ---- recording ----------------------------------------------------------------------------------------------------

void DeviceImpl::begin_recording() {
  if (recording_) throw Error("Device::record: a recording is already in progress (recordings do not nest)");
  if (lost) check("recording");
  // Work issued so far runs before anything recorded; its index checks are settled now, so the recording's own
  // start at bit 0.
  flush();
  verify_index_checks();
  recording_ = std::make_shared<RecordingImpl>();
  recording_->device = shared_from_this();
  recording_->serial = ++recordings_;
}

void DeviceImpl::abort_recording() {
  if (!recording_) return;
  std::shared_ptr<RecordingImpl> r = std::move(recording_);
  recording_.reset();
  index_checks_.clear();
  r->commands.clear();  // nothing was built; its buffers go back to the pool with it
}

std::shared_ptr<RecordingImpl> DeviceImpl::end_recording() {
  if (!recording_) throw Error("Device::end_recording without begin_recording");
  std::shared_ptr<RecordingImpl> r = std::move(recording_);
  recording_.reset();
  r->index_checks = std::move(index_checks_);
  index_checks_.clear();
  try {
    if (!r->uniforms.empty()) {
      const uint64_t bytes = (r->uniforms.size() + 3) / 4 * 4;
      r->uniforms.resize(bytes, 0);
      r->uniform_buffer = create_buffer(bytes, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "recorded uniforms");
      write_idle(r->uniform_buffer, 0, r->uniforms.data(), bytes);
    }
    for (auto& c : r->commands) {
      if (c.kind != RecordingImpl::Command::Dispatch) continue;
      WGPUBindGroupEntry entries[16]{};
      size_t n = 0;
      if (c.uniform_bytes) {
        entries[n].binding = 0;
        entries[n].buffer = r->uniform_buffer;
        entries[n].offset = c.uniform_offset;
        entries[n].size = c.uniform_bytes;
        ++n;
      }
      for (size_t i = 0; i < c.storage.size(); ++i, ++n) {
        entries[n].binding = static_cast<uint32_t>(i + 1);
        entries[n].buffer = c.storage[i];
        entries[n].size = WGPU_WHOLE_SIZE;
      }
      WGPUBindGroupDescriptor bgd{};
      bgd.label = sv(c.op);
      bgd.layout = c.pipeline->layout;
      bgd.entryCount = n;
      bgd.entries = entries;
      api.DevicePushErrorScope(device, WGPUErrorFilter_Validation);
      c.bind_group = api.DeviceCreateBindGroup(device, &bgd);
      const ScopeResult scope = pop_error_scope(api, device, [this](const bool& done) { wait(done, "recording"); });
      if (scope.type != WGPUErrorType_NoError)
        throw GpuError("'" + c.op + "': the device rejected the recorded dispatch's bindings: " + scope.message);
    }
  } catch (...) {
    r->retained.clear();
    throw;
  }
  // Keep every live storage a command references: a replay may run long after the tensors that made it are gone.
  for (WGPUBuffer b : r->referenced)
    if (auto it = live_.find(b); it != live_.end())
      if (auto s = it->second.lock()) r->retained.push_back(std::move(s));
  r->referenced.clear();
  check("recording");
  return r;
}

void DeviceImpl::replay(const RecordingImpl& r) {
  no_recording("replaying a recording");
  if (r.device.get() != this) throw ArgumentError("replay: the recording belongs to another device");
  if (lost) check("replay");
  // Index-error bits are numbered per recording: settle other work's before this recording's take them over
  // (a recording replayed back to back shares its own numbering).
  if (!index_checks_.empty() && index_checks_ != r.index_checks) verify_index_checks();
  for (const auto& c : r.commands) {
    if (c.kind == RecordingImpl::Command::Copy) {
      ensure_encoder();
      end_pass();
      api.CommandEncoderCopyBufferToBuffer(encoder_, c.src, c.src_offset, c.dst, c.dst_offset, c.bytes);
      continue;
    }
    encode_dispatch(c.op, c.pipeline->pipeline, c.bind_group, c.groups_x, c.groups_y, c.groups_z);
    if (c.counted) ++stats.dispatches;
    ++batch_dispatches_;
  }
  index_checks_ = r.index_checks;
  check("replay");
}

}  // namespace detail

// ---- Device ------------------------------------------------------------------------------------------------------

Device::Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
Device::~Device() = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;

const AdapterInfo& Device::info() const { return impl_->info; }
const DeviceLimits& Device::limits() const { return impl_->limits; }
const DeviceFeatures& Device::features() const { return impl_->features; }
DeviceStats Device::stats() const { return impl_->stats; }
std::vector<OpProfile> Device::profile() { return impl_->profile(); }
void Device::flush() { impl_->flush(); }
void Device::synchronize() { impl_->synchronize(); }
void Device::begin_timing() { impl_->begin_timing(); }
Device::Timing Device::end_timing() { return impl_->end_timing(); }
void Device::begin_recording() { impl_->begin_recording(); }
void Device::abort_recording() { impl_->abort_recording(); }
Recording Device::end_recording() {
  Recording r;
  r.impl_ = impl_->end_recording();
  return r;
}

void Recording::replay() const {
  if (!impl_) throw ArgumentError("replay of an empty recording");
  impl_->device->replay(*impl_);
}
size_t Recording::dispatches() const { return impl_ ? impl_->dispatches : 0; }

Device Device::open(const DeviceOptions& requested) {
  const Api& api = gpu::dawn();
  DeviceOptions options = requested;
  if (options.backend == Backend::Auto)
    if (const char* env = std::getenv("WGTRAIN_BACKEND"); env && *env) options.backend = parse_backend(env);
  if (const char* env = std::getenv("WGTRAIN_POISON"); env && std::string(env) == "1") options.poison = true;
  if (const char* env = std::getenv("WGTRAIN_PROFILE"); env && std::string(env) == "1") options.profile = true;
  // Dawn's OpenGL backends reach Mesa through EGL; without a display, EGL must use its surfaceless platform.
  setenv("EGL_PLATFORM", "surfaceless", 0);

  auto impl = std::make_shared<DeviceImpl>(api);
  impl->options = options;
  impl->instance = api.CreateInstance(nullptr);
  if (!impl->instance) throw Error("Dawn could not create a WebGPU instance");

  struct Candidate {
    uint32_t backend;
    uint32_t level;
  };
  std::vector<Candidate> candidates;
  switch (options.backend) {
    case Backend::Auto:
      candidates = {{WGPUBackendType_Vulkan, WGPUFeatureLevel_Core},
                    {WGPUBackendType_OpenGL, WGPUFeatureLevel_Compatibility},
                    {WGPUBackendType_OpenGLES, WGPUFeatureLevel_Compatibility}};
      break;
    case Backend::Vulkan: candidates = {{WGPUBackendType_Vulkan, WGPUFeatureLevel_Core}}; break;
    case Backend::OpenGL: candidates = {{WGPUBackendType_OpenGL, WGPUFeatureLevel_Compatibility}}; break;
    case Backend::OpenGLES: candidates = {{WGPUBackendType_OpenGLES, WGPUFeatureLevel_Compatibility}}; break;
  }

  std::string tried;
  if (options.backend == Backend::Auto) {
    // Dawn would only print a warning and find nothing: skip the attempt (and the noise) where it cannot work.
    if (const std::string why = vulkan_unusable_for_dawn(); !why.empty()) {
      candidates.erase(candidates.begin());
      tried = "Vulkan: " + why;
    }
  }
  for (const auto& c : candidates) {
    AdapterRequest req;
    WGPURequestAdapterOptions ro{};
    ro.featureLevel = c.level;
    ro.powerPreference = WGPUPowerPreference_HighPerformance;
    ro.backendType = c.backend;
    WGPURequestAdapterCallbackInfo ci{};
    ci.mode = WGPUCallbackMode_AllowProcessEvents;
    ci.callback = [](uint32_t status, WGPUAdapter adapter, WGPUStringView message, void* ud1, void*) {
      auto* r = static_cast<AdapterRequest*>(ud1);
      r->status = status;
      r->adapter = adapter;
      r->message = to_string(message);
      r->done = true;
    };
    ci.userdata1 = &req;
    api.InstanceRequestAdapter(impl->instance, &ro, ci);
    while (!req.done) api.InstanceProcessEvents(impl->instance);
    if (req.status != WGPURequestAdapterStatus_Success || !req.adapter) {
      tried += std::string(tried.empty() ? "" : "; ") + backend_label(c.backend) + ": " +
               (req.message.empty() ? "no adapter" : req.message);
      continue;
    }
    WGPUAdapterInfo ai{};
    api.AdapterGetInfo(req.adapter, &ai);
    const uint32_t got = ai.backendType;
    if (got == WGPUBackendType_Null || got != c.backend) {
      tried += std::string(tried.empty() ? "" : "; ") + backend_label(c.backend) + ": only a " +
               backend_label(got) + " adapter was offered";
      api.AdapterInfoFreeMembers(ai);
      api.AdapterRelease(req.adapter);
      continue;
    }
    impl->adapter = req.adapter;
    AdapterInfo& info = impl->info;
    info.name = to_string(ai.device);
    info.vendor = to_string(ai.vendor);
    info.architecture = to_string(ai.architecture);
    info.driver = to_string(ai.description);
    info.backend = backend_from_wgpu(got);
    info.backend_label = backend_label(got);
    info.adapter_type = adapter_type_name(ai.adapterType);
    info.compatibility_mode = c.level == WGPUFeatureLevel_Compatibility;
    info.subgroup_min = ai.subgroupMinSize;
    info.subgroup_max = ai.subgroupMaxSize;
    if (info.name.empty()) info.name = info.driver;
    info.software = ai.adapterType == WGPUAdapterType_CPU || info.name.find("llvmpipe") != std::string::npos ||
                    info.name.find("lavapipe") != std::string::npos ||
                    info.name.find("SwiftShader") != std::string::npos;
    api.AdapterInfoFreeMembers(ai);
    break;
  }
  if (!impl->adapter)
    throw Error(std::string("no usable WebGPU adapter (backend ") + backend_name(options.backend) + "): " + tried +
                ". Without a GPU, Mesa's EGL/GL packages give Dawn's OpenGL backend on llvmpipe (scripts/setup.sh).");

  // Features: ask for those the kernels can use, where the adapter offers them.
  WGPUSupportedFeatures sf{};
  api.AdapterGetFeatures(impl->adapter, &sf);
  impl->features.adapter_raw.assign(sf.features, sf.features + sf.featureCount);
  api.SupportedFeaturesFreeMembers(sf);
  auto offered = [&](uint32_t f) {
    return std::find(impl->features.adapter_raw.begin(), impl->features.adapter_raw.end(), f) !=
           impl->features.adapter_raw.end();
  };
  std::vector<uint32_t> want;
  if (options.timestamps && offered(WGPUFeatureName_TimestampQuery)) want.push_back(WGPUFeatureName_TimestampQuery);
  if (offered(WGPUFeatureName_ShaderF16)) want.push_back(WGPUFeatureName_ShaderF16);
  if (offered(WGPUFeatureName_Subgroups)) want.push_back(WGPUFeatureName_Subgroups);

  // Limits: the adapter's own, so large buffers and 1024-wide workgroups are available where the hardware has them.
  WGPULimits adapter_limits{};
  if (api.AdapterGetLimits(impl->adapter, &adapter_limits) != WGPUStatus_Success)
    throw Error("could not read the adapter's limits");

  DeviceRequest dreq;
  WGPUDeviceDescriptor dd{};
  dd.label = sv("wgtrain");
  dd.requiredFeatureCount = want.size();
  dd.requiredFeatures = want.data();
  dd.requiredLimits = &adapter_limits;
  dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowProcessEvents;
  dd.deviceLostCallbackInfo.callback = on_device_lost;
  dd.deviceLostCallbackInfo.userdata1 = impl.get();
  dd.uncapturedErrorCallbackInfo.callback = on_uncaptured_error;
  dd.uncapturedErrorCallbackInfo.userdata1 = impl.get();
  WGPURequestDeviceCallbackInfo dci{};
  dci.mode = WGPUCallbackMode_AllowProcessEvents;
  dci.callback = [](uint32_t status, WGPUDevice device, WGPUStringView message, void* ud1, void*) {
    auto* r = static_cast<DeviceRequest*>(ud1);
    r->status = status;
    r->device = device;
    r->message = to_string(message);
    r->done = true;
  };
  dci.userdata1 = &dreq;
  api.AdapterRequestDevice(impl->adapter, &dd, dci);
  while (!dreq.done) api.InstanceProcessEvents(impl->instance);
  if (dreq.status != WGPURequestDeviceStatus_Success || !dreq.device)
    throw Error("could not open a device on " + impl->info.name + ": " + dreq.message);
  impl->device = dreq.device;
  impl->queue = api.DeviceGetQueue(impl->device);

  WGPULimits l{};
  api.DeviceGetLimits(impl->device, &l);
  DeviceLimits& dl = impl->limits;
  dl.max_buffer_size = l.maxBufferSize;
  dl.max_storage_binding_size = l.maxStorageBufferBindingSize;
  dl.max_uniform_binding_size = l.maxUniformBufferBindingSize;
  dl.max_storage_buffers_per_stage = l.maxStorageBuffersPerShaderStage;
  dl.max_workgroup_storage = l.maxComputeWorkgroupStorageSize;
  dl.max_invocations_per_workgroup = l.maxComputeInvocationsPerWorkgroup;
  dl.max_workgroup_size_x = l.maxComputeWorkgroupSizeX;
  dl.max_workgroup_size_y = l.maxComputeWorkgroupSizeY;
  dl.max_workgroup_size_z = l.maxComputeWorkgroupSizeZ;
  dl.max_workgroups_per_dim = l.maxComputeWorkgroupsPerDimension;
  dl.min_uniform_offset_alignment = l.minUniformBufferOffsetAlignment;
  dl.min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
  dl.max_bind_groups = l.maxBindGroups;

  DeviceFeatures& f = impl->features;
  f.timestamp_query = api.DeviceHasFeature(impl->device, WGPUFeatureName_TimestampQuery) != 0;
  f.shader_f16 = api.DeviceHasFeature(impl->device, WGPUFeatureName_ShaderF16) != 0;
  f.subgroups = api.DeviceHasFeature(impl->device, WGPUFeatureName_Subgroups) != 0;
  f.subgroup_matrix = offered(WGPUFeatureName_SubgroupMatrix);
  impl->check("device creation");
  return Device(std::move(impl));
}

}  // namespace wgtrain
