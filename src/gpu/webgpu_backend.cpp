// The WebGPU backend: Dawn's adapter and device, buffers, WGSL pipelines, batched command encoders, read-backs,
// timing and profiling, and the bind groups of recordings.
#include "gpu/webgpu_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#ifndef __EMSCRIPTEN__
#include <unistd.h>
#endif

#include "gpu/dawn.h"
#include "gpu/device_impl.h"
#include "wgtrain/error.h"

namespace wgtrain::detail {

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
    case WGPUBackendType_Vulkan: return Backend::WebGpuVulkan;
    case WGPUBackendType_OpenGL: return Backend::WebGpuOpenGL;
    case WGPUBackendType_OpenGLES: return Backend::WebGpuOpenGLES;
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
  auto* impl = static_cast<WebGpuBackend*>(ud1);
  impl->pending_errors.push_back(error_type_name(type) + ": " + to_string(message));
}

void on_device_lost(const WGPUDevice*, uint32_t reason, WGPUStringView message, void* ud1, void*) {
  // CallbackCancelled comes from our own teardown (the instance goes first): not a loss anyone needs to hear of.
  if (reason == WGPUDeviceLostReason_CallbackCancelled) return;
  auto* impl = static_cast<WebGpuBackend*>(ud1);
  impl->lost_ = true;
  impl->lost_message = to_string(message);
  if (reason == WGPUDeviceLostReason_Destroyed) impl->lost_message += " (the device was destroyed)";
}

// Why Dawn's Vulkan backend has nothing to offer here, or empty when it may: no loader, or only CPU devices (Mesa's
// lavapipe, which Dawn rejects with a warning before falling back to its Null adapter).
#ifndef __EMSCRIPTEN__  // the browser build has no Vulkan loader; the browser picks its own adapter
std::string vulkan_unusable_for_dawn() {
  try {
    const auto devices = list_vulkan_devices();
    for (const auto& d : devices)
      if (!d.software) return {};
    return devices.empty() ? "no Vulkan device"
                           : "only CPU Vulkan devices (" + devices.front().name + "), which Dawn does not take";
  } catch (const Error& e) {
    return e.what();
  }
}

// Dawn logs straight to stderr (fprintf, no callback). While it enumerates adapters it warns that it clamped a
// driver's dynamic-buffer limits (llvmpipe: "maxDynamicUniformBuffersPerPipelineLayout artificially reduced from
// 90 to 16"), which says nothing to a user (wgtrain binds no dynamic offsets) and would precede every CLI message.
// This holds stderr in a temporary file for that span and passes every other line through afterwards.
class DawnLimitWarningFilter {
 public:
  DawnLimitWarningFilter() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    if (!file_) return;
    saved_ = dup(STDERR_FILENO);
    if (saved_ < 0 || dup2(fileno(file_), STDERR_FILENO) < 0) restore_and_close();
  }
  ~DawnLimitWarningFilter() {
    if (!file_) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    std::rewind(file_);
    char line[4096];
    while (std::fgets(line, sizeof line, file_))
      if (!std::strstr(line, "artificially reduced from")) std::fputs(line, stderr);
    restore_and_close();
  }
  DawnLimitWarningFilter(const DawnLimitWarningFilter&) = delete;
  DawnLimitWarningFilter& operator=(const DawnLimitWarningFilter&) = delete;

 private:
  void restore_and_close() {
    if (saved_ >= 0) close(saved_);
    saved_ = -1;
    std::fclose(file_);
    file_ = nullptr;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};
#endif

constexpr size_t kUniformChunkBytes = 64 * 1024;
// Largest single queue write or read-back copy, and the most queue-write staging left outstanding.
constexpr uint64_t kTransferChunkBytes = uint64_t{64} << 20;
constexpr uint64_t kStagingBudgetBytes = uint64_t{256} << 20;
constexpr size_t kMaxDispatchesPerBatch = 1024;

WGPUBuffer raw(BufferHandle b) { return reinterpret_cast<WGPUBuffer>(b); }
BufferHandle handle(WGPUBuffer b) { return reinterpret_cast<BufferHandle>(b); }
WGPUComputePipeline compute_of(const Pipeline& p) { return static_cast<WGPUComputePipeline>(p.native); }

}  // namespace

std::string error_type_name(uint32_t type) {
  switch (type) {
    case WGPUErrorType_Validation: return "validation error";
    case WGPUErrorType_OutOfMemory: return "out of memory";
    case WGPUErrorType_Internal: return "internal error";
    default: return "unknown error";
  }
}

void WebGpuBackend::trim() {
  for (auto& [cap, list] : free_readback_)
    for (auto b : list) api.BufferRelease(b);
  free_readback_.clear();
}

WebGpuBackend::~WebGpuBackend() {
  try {
    if (device && !lost_) synchronize();
    lost_ = true;  // from here on the lost callback reports our own DeviceDestroy
  } catch (...) {
    // Teardown must not throw; a failing last submit has nothing left to report to.
  }
  if (pass_) api.ComputePassEncoderRelease(pass_);
  if (encoder_) api.CommandEncoderRelease(encoder_);
  for (auto& [cap, list] : free_readback_)
    for (auto b : list) api.BufferRelease(b);
  for (auto& c : uniform_chunks_) api.BufferRelease(c.buffer);
  for (auto& [key, p] : pipelines_) {
    api.BindGroupLayoutRelease(p.layout);
    api.ComputePipelineRelease(p.compute);
  }
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

void WebGpuBackend::check(std::string_view op) {
  if (lost_) throw DeviceLostError("the GPU device was lost (during or before '" + std::string(op) + "'): " +
                                   lost_message + ". Open a new device.");
  if (pending_errors.empty()) return;
  std::string msg = "'" + std::string(op) + "': the device reported ";
  for (size_t i = 0; i < pending_errors.size(); ++i) msg += (i ? "; then " : "") + pending_errors[i];
  pending_errors.clear();
  throw GpuError(msg);
}

void WebGpuBackend::wait(const bool& done, const char* what) {
  int spins = 0;
  while (!done) {
    api.InstanceProcessEvents(instance);
    if (done) break;
    if (lost_) check(what);
    // Spin briefly for low latency, then back off so that a CPU device (llvmpipe) keeps its cores.
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 200 : 20));
  }
}

// ---- buffers ------------------------------------------------------------------------------------------------------

WGPUBuffer WebGpuBackend::create_raw(uint64_t bytes, WGPUFlags usage, std::string_view what) {
  api.DevicePushErrorScope(device, WGPUErrorFilter_OutOfMemory);
  WGPUBufferDescriptor bd{};
  bd.label = sv(what);
  bd.usage = usage;
  bd.size = bytes;
  WGPUBuffer b = api.DeviceCreateBuffer(device, &bd);
  const ScopeResult r = pop_error_scope(api, device, [this](const bool& done) { wait(done, "buffer allocation"); });
  if (r.type == WGPUErrorType_NoError && b) return b;
  if (b) api.BufferRelease(b);
  return nullptr;
}

BufferHandle WebGpuBackend::create_buffer(uint64_t bytes, std::string_view what) {
  return handle(create_raw(bytes, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst, what));
}

void WebGpuBackend::destroy_buffer(BufferHandle b) {
  api.BufferDestroy(raw(b));
  api.BufferRelease(raw(b));
}

void WebGpuBackend::write(BufferHandle b, uint64_t offset, const void* data, uint64_t bytes, bool idle) {
  // Issued work that reads this buffer must see the old contents: submit it before the queue write.
  if (!idle && encoder_) flush();
  write_now(raw(b), offset, data, bytes);
}

void WebGpuBackend::write_now(WGPUBuffer b, uint64_t offset, const void* data, uint64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t at = 0; at < bytes; at += kTransferChunkBytes) {
    // Dawn holds each write's staging memory until the GPU is past it: let it catch up every few chunks, or a
    // multi-GB upload exhausts device memory (seen on the H200).
    if (at && at % kStagingBudgetBytes == 0) synchronize();
    api.QueueWriteBuffer(queue, b, offset + at, p + at, std::min<uint64_t>(kTransferChunkBytes, bytes - at));
  }
}

WGPUBuffer WebGpuBackend::take_readback(uint64_t bytes) {
  auto& list = free_readback_[bytes];
  if (!list.empty()) {
    WGPUBuffer b = list.back();
    list.pop_back();
    return b;
  }
  WGPUBuffer b = create_raw(bytes, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "read-back staging");
  if (!b) throw GpuError("out of memory for a read-back staging buffer of " + std::to_string(bytes) + " bytes");
  return b;
}

void WebGpuBackend::read(std::span<const ReadRange> ranges) {
  // In pieces of at most kTransferChunkBytes (one staging buffer the size of a multi-GB tensor may not be
  // allocatable where a smaller one is), as few round trips as the pieces allow.
  std::vector<ReadRange> group;
  uint64_t group_bytes = 0;
  for (const ReadRange& r : ranges)
    for (uint64_t at = 0; at < r.bytes; at += kTransferChunkBytes) {
      const uint64_t n = std::min<uint64_t>(kTransferChunkBytes, r.bytes - at);
      if (group_bytes + n > kTransferChunkBytes && !group.empty()) {
        read_group(group);
        group.clear();
        group_bytes = 0;
      }
      group.push_back({r.buffer, r.offset + at, n, static_cast<uint8_t*>(r.dst) + at});
      group_bytes += n;
    }
  if (!group.empty()) read_group(group);
}

void WebGpuBackend::read_group(std::span<const ReadRange> ranges) {
  struct MapState {
    WGPUBuffer staging = nullptr;
    uint64_t padded = 0;
    bool done = false;
    uint32_t status = 0;
    std::string message;
  };
  std::vector<MapState> st(ranges.size());
  ensure_encoder();
  end_pass();
  for (size_t i = 0; i < ranges.size(); ++i) {
    st[i].padded = (ranges[i].bytes + 3) / 4 * 4;
    uint64_t cap = 256;
    while (cap < st[i].padded) cap <<= 1;
    st[i].staging = take_readback(cap);
    api.CommandEncoderCopyBufferToBuffer(encoder_, raw(ranges[i].buffer), ranges[i].offset, st[i].staging, 0,
                                         st[i].padded);
  }
  flush();
  for (auto& s : st) {
    WGPUBufferMapCallbackInfo ci{};
    ci.mode = WGPUCallbackMode_AllowProcessEvents;
    ci.callback = [](uint32_t status, WGPUStringView message, void* ud1, void*) {
      auto* m = static_cast<MapState*>(ud1);
      m->status = status;
      m->message = to_string(message);
      m->done = true;
    };
    ci.userdata1 = &s;
    api.BufferMapAsync(s.staging, WGPUMapMode_Read, 0, s.padded, ci);
  }
  std::string failure;
  for (size_t i = 0; i < st.size(); ++i) {
    MapState& s = st[i];
    wait(s.done, "read-back");
    if (s.status != WGPUMapAsyncStatus_Success) {
      failure = "mapping the staging buffer returned status " + std::to_string(s.status) + ": " + s.message;
      api.BufferRelease(s.staging);
      continue;
    }
    const void* p = api.BufferGetConstMappedRange(s.staging, 0, s.padded);
    if (p) std::memcpy(ranges[i].dst, p, ranges[i].bytes);
    else failure = "the mapped range is null";
    api.BufferUnmap(s.staging);
    uint64_t cap = 256;
    while (cap < s.padded) cap <<= 1;
    free_readback_[cap].push_back(s.staging);
  }
  if (!failure.empty()) {
    check("read-back");
    throw GpuError("read-back failed: " + failure);
  }
}

void WebGpuBackend::copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset,
                         uint64_t bytes) {
  ensure_encoder();
  end_pass();
  api.CommandEncoderCopyBufferToBuffer(encoder_, raw(src), src_offset, raw(dst), dst_offset, bytes);
}

// ---- pipelines and dispatch -----------------------------------------------------------------------------------------

bool WebGpuBackend::has_kernel(std::string_view kernel) const { return kernels_.count(kernel) != 0; }

const Pipeline& WebGpuBackend::pipeline(const std::string& kernel, const KernelDefs& defs) {
  auto key = std::make_pair(kernel, defs);
  std::sort(key.second.begin(), key.second.end());
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second.pipeline;
  if (!has_kernel(kernel)) throw UnsupportedError("the WebGPU backend has no kernel '" + kernel + "'");
  const std::string source = render_kernel(kernel, kernel_source(kernel), defs);
  note_compiled_kernel(kernel, key.second, source);  // WGTRAIN_DUMP_KERNELS (gpu/kernels.h)
  std::string label = kernel;
  for (const auto& [k, v] : key.second) label += " " + k + "=" + v;
  Pipeline p = build_pipeline(label, source);
  Built b;
  b.compute = compute_of(p);
  b.layout = api.ComputePipelineGetBindGroupLayout(b.compute, 0);
  b.pipeline = std::move(p);
  auto& built = pipelines_.emplace(std::move(key), std::move(b)).first->second;
  built.pipeline.native = &built;
  return built.pipeline;
}

Pipeline WebGpuBackend::build_pipeline(const std::string& label, const std::string& source) {
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
  p.native = pipe;
  p.label = label;
  ++pipelines_created;
  check(label);
  return p;
}

std::pair<WGPUBuffer, uint64_t> WebGpuBackend::stage_uniforms(const void* data, size_t bytes) {
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
    c->buffer = create_raw(kUniformChunkBytes, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "uniforms");
    if (!c->buffer) throw GpuError("out of memory for a uniform buffer");
    c->host.assign(kUniformChunkBytes, 0);
  }
  std::memcpy(c->host.data() + at, data, bytes);
  c->used = at + bytes;
  return {c->buffer, at};
}

void WebGpuBackend::ensure_encoder() {
  if (encoder_) return;
  WGPUCommandEncoderDescriptor d{};
  d.label = sv("wgtrain batch");
  encoder_ = api.DeviceCreateCommandEncoder(device, &d);
}

void WebGpuBackend::ensure_pass() {
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

void WebGpuBackend::end_pass() {
  if (!pass_) return;
  api.ComputePassEncoderEnd(pass_);
  api.ComputePassEncoderRelease(pass_);
  pass_ = nullptr;
}

void WebGpuBackend::dispatch(const DispatchCommand& d) {
  const Built& built = *static_cast<const Built*>(d.pipeline->native);
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
    entries[n].buffer = raw(d.storage[i]);
    entries[n].offset = 0;
    entries[n].size = WGPU_WHOLE_SIZE;
  }
  WGPUBindGroupDescriptor bgd{};
  bgd.label = sv(d.op);
  bgd.layout = built.layout;
  bgd.entryCount = n;
  bgd.entries = entries;
  // The bind group is where a wrong binding shows; Dawn reports it only through an error scope right away (its
  // uncaptured-error path defers it to the submit, where the op's name is lost). Whole-buffer bindings of storage
  // buffers can only go wrong in their number, so each (pipeline, count) is checked under a scope once.
  const auto shape = std::make_tuple(d.pipeline, d.storage.size(), d.uniforms != nullptr);
  const bool validate = !validated_.count(shape);
  if (validate) api.DevicePushErrorScope(device, WGPUErrorFilter_Validation);
  WGPUBindGroup bg = api.DeviceCreateBindGroup(device, &bgd);
  if (validate) {
    const ScopeResult scope = pop_error_scope(api, device, [this](const bool& done) { wait(done, "dispatch"); });
    if (scope.type != WGPUErrorType_NoError) {
      if (bg) api.BindGroupRelease(bg);
      throw GpuError("'" + std::string(d.op) + "': the device rejected the dispatch's bindings: " + scope.message);
    }
    validated_.insert(shape);
  }
  encode_dispatch(d.op, built.compute, bg, d.groups_x, d.groups_y, d.groups_z);
  api.BindGroupRelease(bg);  // the encoder holds its own reference
  if (d.counted) ++dispatches;
  ++batch_dispatches_;
  check(d.op);
  if (batch_dispatches_ >= kMaxDispatchesPerBatch) flush();
}

void WebGpuBackend::encode_dispatch(std::string_view op, WGPUComputePipeline pipeline, WGPUBindGroup bg, uint32_t gx,
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
      profile_resolve_ = create_raw(16 * kProfileSlots, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc,
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

void WebGpuBackend::settle_profile() {
  if (profile_pending_.empty()) return;
  const std::vector<std::string> ops = std::move(profile_pending_);
  profile_pending_.clear();
  ensure_encoder();
  end_pass();
  const uint32_t n = static_cast<uint32_t>(ops.size());
  api.CommandEncoderResolveQuerySet(encoder_, profile_queries_, 0, 2 * n, profile_resolve_, 0);
  std::vector<uint64_t> ts(2 * n);
  const ReadRange r{handle(profile_resolve_), 0, ts.size() * 8, ts.data()};
  read({&r, 1});
  for (uint32_t k = 0; k < n; ++k) {
    auto& e = profile_.try_emplace(ops[k]).first->second;
    e.op = ops[k];
    ++e.dispatches;
    e.from_timestamps = true;
    if (ts[2 * k + 1] >= ts[2 * k]) e.seconds += static_cast<double>(ts[2 * k + 1] - ts[2 * k]) * 1e-9;
  }
}

std::vector<OpProfile> WebGpuBackend::profile() {
  settle_profile();
  std::vector<OpProfile> out;
  for (const auto& [k, v] : profile_) out.push_back(v);
  std::sort(out.begin(), out.end(), [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
  return out;
}

// ---- submission -----------------------------------------------------------------------------------------------------

void WebGpuBackend::flush() {
  if (!encoder_) return;
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
  ++submits;
  batch_dispatches_ = 0;
}

void WebGpuBackend::synchronize() {
  flush();
  bool done = false;
  WGPUQueueWorkDoneCallbackInfo ci{};
  ci.mode = WGPUCallbackMode_AllowProcessEvents;
  ci.callback = [](uint32_t, WGPUStringView, void* ud1, void*) { *static_cast<bool*>(ud1) = true; };
  ci.userdata1 = &done;
  api.QueueOnSubmittedWorkDone(queue, ci);
  wait(done, "synchronize");
}

// ---- timing -----------------------------------------------------------------------------------------------------------

void WebGpuBackend::begin_timing() {
  if (timing_) throw Error("begin_timing: a timing region is already open");
  if (features.timestamp_query) {
    if (!query_set_) {
      WGPUQuerySetDescriptor qd{};
      qd.label = sv("wgtrain timing");
      qd.type = WGPUQueryType_Timestamp;
      qd.count = 2;
      query_set_ = api.DeviceCreateQuerySet(device, &qd);
      query_resolve_ = create_raw(256, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc, "timestamps");
    }
    end_pass();
    timing_first_pass_ = true;
  } else {
    synchronize();
    timing_start_ = std::chrono::steady_clock::now();
  }
  timing_ = true;
}

Device::Timing WebGpuBackend::end_timing() {
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
  const ReadRange r{handle(query_resolve_), 0, sizeof ts, ts};
  read({&r, 1});
  return {ts[1] >= ts[0] ? static_cast<double>(ts[1] - ts[0]) * 1e-9 : 0.0, true};
}

// ---- recordings -------------------------------------------------------------------------------------------------------

void WebGpuBackend::prepare(RecordingImpl& r) {
  WGPUBuffer uniforms = nullptr;
  if (!r.uniforms.empty()) {
    const uint64_t bytes = (r.uniforms.size() + 3) / 4 * 4;
    r.uniforms.resize(bytes, 0);
    uniforms = create_raw(bytes, WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst, "recorded uniforms");
    if (!uniforms) throw GpuError("out of GPU memory for a recording's " + std::to_string(bytes) + " uniform bytes");
    r.prepared = uniforms;
    write_now(uniforms, 0, r.uniforms.data(), bytes);
  }
  for (auto& c : r.commands) {
    if (c.kind != RecordingImpl::Command::Dispatch) continue;
    WGPUBindGroupEntry entries[16]{};
    size_t n = 0;
    if (c.uniform_bytes) {
      entries[n].binding = 0;
      entries[n].buffer = uniforms;
      entries[n].offset = c.uniform_offset;
      entries[n].size = c.uniform_bytes;
      ++n;
    }
    for (size_t i = 0; i < c.storage.size(); ++i, ++n) {
      entries[n].binding = static_cast<uint32_t>(i + 1);
      entries[n].buffer = raw(c.storage[i]);
      entries[n].size = WGPU_WHOLE_SIZE;
    }
    WGPUBindGroupDescriptor bgd{};
    bgd.label = sv(c.op);
    bgd.layout = static_cast<const Built*>(c.pipeline->native)->layout;
    bgd.entryCount = n;
    bgd.entries = entries;
    api.DevicePushErrorScope(device, WGPUErrorFilter_Validation);
    c.prepared = api.DeviceCreateBindGroup(device, &bgd);
    const ScopeResult scope = pop_error_scope(api, device, [this](const bool& done) { wait(done, "recording"); });
    if (scope.type != WGPUErrorType_NoError)
      throw GpuError("'" + c.op + "': the device rejected the recorded dispatch's bindings: " + scope.message);
  }
}

void WebGpuBackend::replay(const RecordingImpl& r) {
  for (const auto& c : r.commands) {
    if (c.kind == RecordingImpl::Command::Copy) {
      copy(c.src, c.src_offset, c.dst, c.dst_offset, c.bytes);
      continue;
    }
    encode_dispatch(c.op, static_cast<const Built*>(c.pipeline->native)->compute,
                    static_cast<WGPUBindGroup>(c.prepared), c.groups_x, c.groups_y, c.groups_z);
    if (c.counted) ++dispatches;
    ++batch_dispatches_;
  }
}

void WebGpuBackend::release(RecordingImpl& r) {
  for (auto& c : r.commands)
    if (c.prepared) api.BindGroupRelease(static_cast<WGPUBindGroup>(c.prepared));
  if (r.prepared) api.BufferRelease(static_cast<WGPUBuffer>(r.prepared));
}

// ---- opening ------------------------------------------------------------------------------------------------------------

std::unique_ptr<GpuBackend> open_webgpu(const DeviceOptions& options) {
  const Api& api = gpu::dawn();
  // Dawn's OpenGL backends reach Mesa through EGL; without a display, EGL must use its surfaceless platform.
  setenv("EGL_PLATFORM", "surfaceless", 0);

  // Dawn's toggles. allow_unsafe_apis (experimental features: subgroup matrices) is an instance toggle, inherited by
  // adapters and devices; use_vulkan_memory_model (subgroup matrices on Vulkan) and vulkan_enable_f16_on_nvidia
  // (without it Dawn hides shader-f16 on NVIDIA's Vulkan driver, pending a conformance investigation) are adapter
  // toggles. A descriptor may also set toggles of earlier stages (Dawn then overrides what was inherited), so the
  // adapter's list is chained to the device too, as the H200 probe did (bench/subgroup_matrix/probe.c).
  std::vector<const char*> instance_toggles, adapter_toggles = {kToggleVulkanEnableF16OnNvidia};
  if (options.subgroup_matrix) {
    instance_toggles.push_back(kToggleAllowUnsafeApis);
    adapter_toggles.push_back(kToggleAllowUnsafeApis);
    adapter_toggles.push_back(kToggleUseVulkanMemoryModel);
  }
  WGPUDawnTogglesDescriptor instance_td{}, adapter_td{};
  instance_td.chain.sType = adapter_td.chain.sType = WGPUSType_DawnTogglesDescriptor;
  instance_td.enabledToggleCount = instance_toggles.size();
  instance_td.enabledToggles = instance_toggles.data();
  adapter_td.enabledToggleCount = adapter_toggles.size();
  adapter_td.enabledToggles = adapter_toggles.data();

  auto impl = std::make_unique<WebGpuBackend>(api);
  impl->options = options;
  WGPUInstanceDescriptor id{};
  if (!instance_toggles.empty()) id.nextInChain = &instance_td.chain;
  impl->instance = api.CreateInstance(&id);
  if (!impl->instance) throw Error("Dawn could not create a WebGPU instance");

  struct Candidate {
    uint32_t backend;
    uint32_t level;
  };
  std::vector<Candidate> candidates;
  switch (options.backend) {
    case Backend::Auto:
    case Backend::WebGpu:
    case Backend::NativeVulkan:
      candidates = {{WGPUBackendType_Vulkan, WGPUFeatureLevel_Core},
                    {WGPUBackendType_OpenGL, WGPUFeatureLevel_Compatibility},
                    {WGPUBackendType_OpenGLES, WGPUFeatureLevel_Compatibility}};
      break;
    case Backend::WebGpuVulkan: candidates = {{WGPUBackendType_Vulkan, WGPUFeatureLevel_Core}}; break;
    case Backend::WebGpuOpenGL: candidates = {{WGPUBackendType_OpenGL, WGPUFeatureLevel_Compatibility}}; break;
    case Backend::WebGpuOpenGLES: candidates = {{WGPUBackendType_OpenGLES, WGPUFeatureLevel_Compatibility}}; break;
  }

  std::string tried;
#ifdef __EMSCRIPTEN__
  // In a browser there is one WebGPU, whatever is under it. Asked for in compatibility mode, which a browser
  // answers with a core adapter where it has one (and ANGLE's OpenGL ES adapter, on lavapipe, where it has not).
  candidates = {{WGPUBackendType_WebGPU, WGPUFeatureLevel_Compatibility}};
#else
  if (options.backend == Backend::WebGpu) {
    // Dawn would only print a warning and find nothing: skip the attempt (and the noise) where it cannot work.
    if (const std::string why = vulkan_unusable_for_dawn(); !why.empty()) {
      candidates.erase(candidates.begin());
      tried = "Vulkan: " + why;
    }
  }
#endif
  for (const auto& c : candidates) {
    AdapterRequest req;
    WGPURequestAdapterOptions ro{};
#ifndef __EMSCRIPTEN__
    ro.nextInChain = &adapter_td.chain;
#endif
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
    {
#ifndef __EMSCRIPTEN__
      DawnLimitWarningFilter quiet;
#endif
      api.InstanceRequestAdapter(impl->instance, &ro, ci);
      while (!req.done) api.InstanceProcessEvents(impl->instance);
    }
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
  if (offered(WGPUFeatureName_SubgroupMatrix)) {
    // The shapes, for `wgtrain devices` and the kernels (the query errs where the feature is absent: ask only here).
    WGPUAdapterPropertiesSubgroupMatrixConfigs smc{};
    smc.chain.sType = WGPUSType_AdapterPropertiesSubgroupMatrixConfigs;
    WGPUAdapterInfo ai{};
    ai.nextInChain = &smc.chain;
    if (api.AdapterGetInfo(impl->adapter, &ai) == WGPUStatus_Success) {
      auto type = [](uint32_t t) -> std::string {
        switch (t) {
          case WGPUSubgroupMatrixComponentType_F32: return "f32";
          case WGPUSubgroupMatrixComponentType_F16: return "f16";
          case WGPUSubgroupMatrixComponentType_U32: return "u32";
          case WGPUSubgroupMatrixComponentType_I32: return "i32";
          default: return "type " + std::to_string(t);
        }
      };
      for (size_t i = 0; i < smc.configCount; ++i) {
        const WGPUSubgroupMatrixConfig& m = smc.configs[i];
        impl->features.subgroup_matrix_configs.push_back(
            {type(m.componentType), type(m.resultComponentType), m.M, m.N, m.K});
      }
      api.AdapterPropertiesSubgroupMatrixConfigsFreeMembers(smc);
      api.AdapterInfoFreeMembers(ai);
    }
    if (options.subgroup_matrix) want.push_back(WGPUFeatureName_SubgroupMatrix);
  }

  // Limits: the adapter's own, so large buffers and 1024-wide workgroups are available where the hardware has them.
  WGPULimits adapter_limits{};
  if (api.AdapterGetLimits(impl->adapter, &adapter_limits) != WGPUStatus_Success)
    throw Error("could not read the adapter's limits");

  DeviceRequest dreq;
  WGPUDeviceDescriptor dd{};
#ifndef __EMSCRIPTEN__
  dd.nextInChain = &adapter_td.chain;
#endif
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
  f.subgroup_matrix = api.DeviceHasFeature(impl->device, WGPUFeatureName_SubgroupMatrix) != 0;
  for (const auto& k : embedded_kernels()) impl->kernels_.insert(k.name);
  impl->check("device creation");
  return impl;
}

}  // namespace wgtrain::detail
