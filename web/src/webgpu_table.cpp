// The browser's WebGPU as the function table of src/gpu/webgpu_abi.h: what the native build resolves from Dawn with
// dlopen, the browser build gets from here. Each entry unpacks the C structs it is given into plain numbers and
// strings and calls a JavaScript import (web/src/webgpu_table.js) that speaks to navigator.gpu; no struct layout is
// known to the JavaScript side.
//
// Asynchronous calls (adapter, device, error scopes, buffer mapping, queue completion) start a promise in
// JavaScript and leave a Pending here; the answer is delivered only inside InstanceProcessEvents, as Dawn does in
// WGPUCallbackMode_AllowProcessEvents, the only mode wgtrain uses. InstanceProcessEvents is where the wasm module
// waits: its import suspends (ASYNCIFY) until a promise has settled, giving the browser's event loop the thread.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/webgpu_abi.h"

using namespace wgtrain::webgpu;

extern "C" {
// web/src/webgpu_table.js. Handles are small integers (0: none); 64-bit sizes and offsets travel as doubles
// (exact up to 2^53, far above any buffer a browser grants).
uint32_t wgtrain_js_create_instance();
void wgtrain_js_release(uint32_t handle);
void wgtrain_js_request_adapter(uint32_t feature_level, uint32_t power, void* token);
void wgtrain_js_adapter_info(uint32_t adapter, char** strings /* [4] */, uint32_t* numbers /* [4] */);
void wgtrain_js_limits(uint32_t adapter_or_device, double* out /* [kLimitCount] */);
uint32_t wgtrain_js_features(uint32_t adapter_or_device, uint32_t* out, uint32_t capacity);
void wgtrain_js_request_device(uint32_t adapter, const uint32_t* features, uint32_t feature_count,
                               const double* limits, const char* label, void* token, void* lost_token,
                               void* error_token);
uint32_t wgtrain_js_device_queue(uint32_t device);
uint32_t wgtrain_js_create_buffer(uint32_t device, const char* label, double usage, double size, uint32_t mapped);
uint32_t wgtrain_js_create_shader_module(uint32_t device, const char* label, const char* code, uint32_t code_len);
uint32_t wgtrain_js_create_compute_pipeline(uint32_t device, const char* label, uint32_t layout, uint32_t module,
                                            const char* entry, const char* keys, const double* values,
                                            uint32_t constant_count);
uint32_t wgtrain_js_pipeline_layout(uint32_t pipeline, uint32_t group);
uint32_t wgtrain_js_create_bind_group(uint32_t device, const char* label, uint32_t layout, uint32_t count,
                                      const uint32_t* bindings, const uint32_t* buffers, const double* offsets,
                                      const double* sizes);
uint32_t wgtrain_js_create_command_encoder(uint32_t device, const char* label);
uint32_t wgtrain_js_create_query_set(uint32_t device, const char* label, uint32_t type, uint32_t count);
void wgtrain_js_push_error_scope(uint32_t device, uint32_t filter);
void wgtrain_js_pop_error_scope(uint32_t device, void* token);
void wgtrain_js_device_destroy(uint32_t device);
void wgtrain_js_queue_write(uint32_t queue, uint32_t buffer, double offset, const void* data, double size);
void wgtrain_js_queue_submit(uint32_t queue, uint32_t count, const uint32_t* buffers);
void wgtrain_js_queue_done(uint32_t queue, void* token);
void wgtrain_js_buffer_map(uint32_t buffer, uint32_t mode, double offset, double size, void* token);
void* wgtrain_js_buffer_mapped_range(uint32_t buffer, double offset, double size);
void wgtrain_js_buffer_unmap(uint32_t buffer);
void wgtrain_js_buffer_destroy(uint32_t buffer);
uint32_t wgtrain_js_begin_compute_pass(uint32_t encoder, const char* label, uint32_t query_set, uint32_t begin_index,
                                       uint32_t end_index);
void wgtrain_js_copy_buffer(uint32_t encoder, uint32_t src, double src_offset, uint32_t dst, double dst_offset,
                            double size);
void wgtrain_js_resolve_query_set(uint32_t encoder, uint32_t query_set, uint32_t first, uint32_t count,
                                  uint32_t dst, double dst_offset);
uint32_t wgtrain_js_finish(uint32_t encoder, const char* label);
void wgtrain_js_pass_set_pipeline(uint32_t pass, uint32_t pipeline);
void wgtrain_js_pass_set_bind_group(uint32_t pass, uint32_t index, uint32_t group, uint32_t offset_count,
                                    const uint32_t* offsets);
void wgtrain_js_pass_dispatch(uint32_t pass, uint32_t x, uint32_t y, uint32_t z);
void wgtrain_js_pass_end(uint32_t pass);
void wgtrain_js_query_set_destroy(uint32_t query_set);
// Suspends until at least one asynchronous call has settled (returns at once if one has).
void wgtrain_js_wait_events();
// The next settled call: its token and results (message malloc'd, or null), or 0 when none is left.
void* wgtrain_js_take_event(uint32_t* status, uint32_t* handle, uint32_t* type, char** message);
}

namespace {

// The WGPULimits fields in the order wgtrain_js_limits writes them (web/src/webgpu_table.js, kLimitNames).
#define WGTRAIN_BROWSER_LIMITS(X)                                                                              \
  X(maxTextureDimension1D) X(maxTextureDimension2D) X(maxTextureDimension3D) X(maxTextureArrayLayers)           \
  X(maxBindGroups) X(maxBindGroupsPlusVertexBuffers) X(maxBindingsPerBindGroup)                                 \
  X(maxDynamicUniformBuffersPerPipelineLayout) X(maxDynamicStorageBuffersPerPipelineLayout)                     \
  X(maxSampledTexturesPerShaderStage) X(maxSamplersPerShaderStage) X(maxStorageBuffersPerShaderStage)            \
  X(maxStorageTexturesPerShaderStage) X(maxUniformBuffersPerShaderStage) X(maxUniformBufferBindingSize)          \
  X(maxStorageBufferBindingSize) X(minUniformBufferOffsetAlignment) X(minStorageBufferOffsetAlignment)           \
  X(maxVertexBuffers) X(maxBufferSize) X(maxVertexAttributes) X(maxVertexBufferArrayStride)                      \
  X(maxInterStageShaderVariables) X(maxColorAttachments) X(maxColorAttachmentBytesPerSample)                    \
  X(maxComputeWorkgroupStorageSize) X(maxComputeInvocationsPerWorkgroup) X(maxComputeWorkgroupSizeX)            \
  X(maxComputeWorkgroupSizeY) X(maxComputeWorkgroupSizeZ) X(maxComputeWorkgroupsPerDimension)

constexpr size_t kLimitCount = 0
#define WGTRAIN_COUNT(name) +1
    WGTRAIN_BROWSER_LIMITS(WGTRAIN_COUNT)
#undef WGTRAIN_COUNT
    ;
static_assert(kLimitCount == 31, "web/src/webgpu_table.js lists 31 limits in this order");

uint32_t id(const void* handle) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle)); }
template <class T>
T as(uint32_t h) {
  return reinterpret_cast<T>(static_cast<uintptr_t>(h));
}

// A C string of a string view (the JavaScript side reads NUL-terminated UTF-8).
std::string str(WGPUStringView v) {
  if (!v.data) return {};
  if (v.length == WGPU_STRLEN) return std::string(v.data);
  return std::string(v.data, v.length);
}

// A call in flight: what to do with its answer.
struct Pending {
  std::function<void(uint32_t status, uint32_t handle, uint32_t type, WGPUStringView message)> deliver;
  bool persistent = false;  // the device's lost and uncaptured-error callbacks answer more than once
};

Pending* pending(std::function<void(uint32_t, uint32_t, uint32_t, WGPUStringView)> f, bool persistent = false) {
  return new Pending{std::move(f), persistent};
}

// ---- the table's entries ---------------------------------------------------------------------------------------

WGPUInstance CreateInstance(const WGPUInstanceDescriptor*) { return as<WGPUInstance>(wgtrain_js_create_instance()); }

WGPUFuture InstanceRequestAdapter(WGPUInstance, const WGPURequestAdapterOptions* o, WGPURequestAdapterCallbackInfo ci) {
  auto* p = pending([ci](uint32_t status, uint32_t handle, uint32_t, WGPUStringView message) {
    ci.callback(status, as<WGPUAdapter>(handle), message, ci.userdata1, ci.userdata2);
  });
  wgtrain_js_request_adapter(o ? o->featureLevel : WGPUFeatureLevel_Core, o ? o->powerPreference : 0, p);
  return {0};
}

void InstanceProcessEvents(WGPUInstance) {
  wgtrain_js_wait_events();
  uint32_t status = 0, handle = 0, type = 0;
  char* message = nullptr;
  while (void* token = wgtrain_js_take_event(&status, &handle, &type, &message)) {
    auto* p = static_cast<Pending*>(token);
    const WGPUStringView mv{message, message ? std::strlen(message) : 0};
    p->deliver(status, handle, type, mv);
    std::free(message);
    message = nullptr;
    if (!p->persistent) delete p;
  }
}

void Release(const void* h) {
  if (h) wgtrain_js_release(id(h));
}
void InstanceRelease(WGPUInstance i) { Release(i); }
void AdapterRelease(WGPUAdapter a) { Release(a); }

WGPUEnum AdapterGetInfo(WGPUAdapter a, WGPUAdapterInfo* info) {
  char* s[4] = {nullptr, nullptr, nullptr, nullptr};
  uint32_t n[4] = {0, 0, 0, 0};
  wgtrain_js_adapter_info(id(a), s, n);
  auto view = [](char* c) { return WGPUStringView{c, c ? std::strlen(c) : 0}; };
  info->vendor = view(s[0]);
  info->architecture = view(s[1]);
  info->device = view(s[2]);
  info->description = view(s[3]);
  info->backendType = n[0];
  info->adapterType = n[1];
  info->vendorID = 0;
  info->deviceID = 0;
  info->subgroupMinSize = n[2];
  info->subgroupMaxSize = n[3];
  return WGPUStatus_Success;
}

void AdapterInfoFreeMembers(WGPUAdapterInfo info) {
  for (WGPUStringView v : {info.vendor, info.architecture, info.device, info.description})
    std::free(const_cast<char*>(v.data));
}

WGPUEnum GetLimits(uint32_t h, WGPULimits* l) {
  double v[kLimitCount];
  wgtrain_js_limits(h, v);
  size_t i = 0;
#define WGTRAIN_SET(name) l->name = static_cast<decltype(l->name)>(v[i++]);
  WGTRAIN_BROWSER_LIMITS(WGTRAIN_SET)
#undef WGTRAIN_SET
  l->maxImmediateSize = 0;
  return WGPUStatus_Success;
}
WGPUEnum AdapterGetLimits(WGPUAdapter a, WGPULimits* l) { return GetLimits(id(a), l); }
WGPUEnum DeviceGetLimits(WGPUDevice d, WGPULimits* l) { return GetLimits(id(d), l); }

std::vector<WGPUEnum> features_of(uint32_t h) {
  std::vector<WGPUEnum> f(16);
  f.resize(wgtrain_js_features(h, f.data(), static_cast<uint32_t>(f.size())));
  return f;
}

void AdapterGetFeatures(WGPUAdapter a, WGPUSupportedFeatures* out) {
  const auto f = features_of(id(a));
  auto* list = static_cast<WGPUEnum*>(std::malloc(sizeof(WGPUEnum) * (f.size() + 1)));
  std::copy(f.begin(), f.end(), list);
  out->featureCount = f.size();
  out->features = list;
}
void SupportedFeaturesFreeMembers(WGPUSupportedFeatures f) { std::free(const_cast<WGPUEnum*>(f.features)); }

WGPUBool has(uint32_t h, WGPUEnum feature) {
  for (WGPUEnum f : features_of(h))
    if (f == feature) return 1;
  return 0;
}
WGPUBool AdapterHasFeature(WGPUAdapter a, WGPUEnum f) { return has(id(a), f); }
WGPUBool DeviceHasFeature(WGPUDevice d, WGPUEnum f) { return has(id(d), f); }

WGPUFuture AdapterRequestDevice(WGPUAdapter a, const WGPUDeviceDescriptor* d, WGPURequestDeviceCallbackInfo ci) {
  double limits[kLimitCount];
  const bool with_limits = d && d->requiredLimits;
  if (with_limits) {
    size_t i = 0;
#define WGTRAIN_GET(name) limits[i++] = static_cast<double>(d->requiredLimits->name);
    WGTRAIN_BROWSER_LIMITS(WGTRAIN_GET)
#undef WGTRAIN_GET
  }
  auto* p = pending([ci](uint32_t status, uint32_t handle, uint32_t, WGPUStringView message) {
    ci.callback(status, as<WGPUDevice>(handle), message, ci.userdata1, ci.userdata2);
  });
  // The device's lost and error callbacks get the device's handle when they fire.
  Pending* lost = nullptr;
  Pending* error = nullptr;
  if (d && d->deviceLostCallbackInfo.callback) {
    const WGPUDeviceLostCallbackInfo li = d->deviceLostCallbackInfo;
    lost = pending(
        [li](uint32_t reason, uint32_t handle, uint32_t, WGPUStringView message) {
          const WGPUDevice dev = as<WGPUDevice>(handle);
          li.callback(&dev, reason, message, li.userdata1, li.userdata2);
        },
        true);
  }
  if (d && d->uncapturedErrorCallbackInfo.callback) {
    const WGPUUncapturedErrorCallbackInfo ei = d->uncapturedErrorCallbackInfo;
    error = pending(
        [ei](uint32_t, uint32_t handle, uint32_t type, WGPUStringView message) {
          const WGPUDevice dev = as<WGPUDevice>(handle);
          ei.callback(&dev, type, message, ei.userdata1, ei.userdata2);
        },
        true);
  }
  const std::string label = d ? str(d->label) : std::string();
  wgtrain_js_request_device(id(a), d ? d->requiredFeatures : nullptr,
                            d ? static_cast<uint32_t>(d->requiredFeatureCount) : 0, with_limits ? limits : nullptr,
                            label.c_str(), p, lost, error);
  return {0};
}

WGPUQueue DeviceGetQueue(WGPUDevice d) { return as<WGPUQueue>(wgtrain_js_device_queue(id(d))); }

WGPUBuffer DeviceCreateBuffer(WGPUDevice d, const WGPUBufferDescriptor* b) {
  return as<WGPUBuffer>(wgtrain_js_create_buffer(id(d), str(b->label).c_str(), static_cast<double>(b->usage),
                                                 static_cast<double>(b->size), b->mappedAtCreation));
}

WGPUShaderModule DeviceCreateShaderModule(WGPUDevice d, const WGPUShaderModuleDescriptor* m) {
  // wgtrain hands WGSL only.
  const auto* chain = m->nextInChain;
  while (chain && chain->sType != WGPUSType_ShaderSourceWGSL) chain = chain->next;
  if (!chain) return nullptr;
  const auto* wgsl = reinterpret_cast<const WGPUShaderSourceWGSL*>(chain);
  const std::string code = str(wgsl->code);
  return as<WGPUShaderModule>(wgtrain_js_create_shader_module(id(d), str(m->label).c_str(), code.data(),
                                                              static_cast<uint32_t>(code.size())));
}

WGPUComputePipeline DeviceCreateComputePipeline(WGPUDevice d, const WGPUComputePipelineDescriptor* p) {
  // Constant keys as one NUL-separated block.
  std::string keys;
  std::vector<double> values;
  for (size_t i = 0; i < p->compute.constantCount; ++i) {
    keys += str(p->compute.constants[i].key);
    keys.push_back('\0');
    values.push_back(p->compute.constants[i].value);
  }
  return as<WGPUComputePipeline>(wgtrain_js_create_compute_pipeline(
      id(d), str(p->label).c_str(), id(p->layout), id(p->compute.module), str(p->compute.entryPoint).c_str(),
      keys.data(), values.data(), static_cast<uint32_t>(values.size())));
}

WGPUBindGroup DeviceCreateBindGroup(WGPUDevice d, const WGPUBindGroupDescriptor* g) {
  std::vector<uint32_t> bindings, buffers;
  std::vector<double> offsets, sizes;
  for (size_t i = 0; i < g->entryCount; ++i) {
    const WGPUBindGroupEntry& e = g->entries[i];
    bindings.push_back(e.binding);
    buffers.push_back(id(e.buffer));
    offsets.push_back(static_cast<double>(e.offset));
    sizes.push_back(e.size == WGPU_WHOLE_SIZE ? -1.0 : static_cast<double>(e.size));  // -1: to the buffer's end
  }
  return as<WGPUBindGroup>(wgtrain_js_create_bind_group(id(d), str(g->label).c_str(), id(g->layout),
                                                        static_cast<uint32_t>(g->entryCount), bindings.data(),
                                                        buffers.data(), offsets.data(), sizes.data()));
}

WGPUCommandEncoder DeviceCreateCommandEncoder(WGPUDevice d, const WGPUCommandEncoderDescriptor* e) {
  return as<WGPUCommandEncoder>(wgtrain_js_create_command_encoder(id(d), e ? str(e->label).c_str() : ""));
}

WGPUQuerySet DeviceCreateQuerySet(WGPUDevice d, const WGPUQuerySetDescriptor* q) {
  return as<WGPUQuerySet>(wgtrain_js_create_query_set(id(d), str(q->label).c_str(), q->type, q->count));
}

void DevicePushErrorScope(WGPUDevice d, WGPUEnum filter) { wgtrain_js_push_error_scope(id(d), filter); }

WGPUFuture DevicePopErrorScope(WGPUDevice d, WGPUPopErrorScopeCallbackInfo ci) {
  wgtrain_js_pop_error_scope(id(d), pending([ci](uint32_t status, uint32_t, uint32_t type, WGPUStringView message) {
                               ci.callback(status, type, message, ci.userdata1, ci.userdata2);
                             }));
  return {0};
}

void DeviceDestroy(WGPUDevice d) { wgtrain_js_device_destroy(id(d)); }
void DeviceRelease(WGPUDevice d) { Release(d); }

void QueueWriteBuffer(WGPUQueue q, WGPUBuffer b, uint64_t offset, const void* data, size_t size) {
  wgtrain_js_queue_write(id(q), id(b), static_cast<double>(offset), data, static_cast<double>(size));
}

void QueueSubmit(WGPUQueue q, size_t count, const WGPUCommandBuffer* buffers) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < count; ++i) ids.push_back(id(buffers[i]));
  wgtrain_js_queue_submit(id(q), static_cast<uint32_t>(count), ids.data());
}

WGPUFuture QueueOnSubmittedWorkDone(WGPUQueue q, WGPUQueueWorkDoneCallbackInfo ci) {
  wgtrain_js_queue_done(id(q), pending([ci](uint32_t status, uint32_t, uint32_t, WGPUStringView message) {
                          ci.callback(status, message, ci.userdata1, ci.userdata2);
                        }));
  return {0};
}

void QueueRelease(WGPUQueue q) { Release(q); }

WGPUFuture BufferMapAsync(WGPUBuffer b, WGPUFlags mode, size_t offset, size_t size, WGPUBufferMapCallbackInfo ci) {
  wgtrain_js_buffer_map(id(b), static_cast<uint32_t>(mode), static_cast<double>(offset),
                        size == WGPU_STRLEN ? -1.0 : static_cast<double>(size),
                        pending([ci](uint32_t status, uint32_t, uint32_t, WGPUStringView message) {
                          ci.callback(status, message, ci.userdata1, ci.userdata2);
                        }));
  return {0};
}

// The mapped bytes are copied into the module's memory (a browser's mapped range is a separate ArrayBuffer); the
// copy lives until BufferUnmap.
const void* BufferGetConstMappedRange(WGPUBuffer b, size_t offset, size_t size) {
  return wgtrain_js_buffer_mapped_range(id(b), static_cast<double>(offset),
                                        size == WGPU_STRLEN ? -1.0 : static_cast<double>(size));
}

void BufferUnmap(WGPUBuffer b) { wgtrain_js_buffer_unmap(id(b)); }
void BufferDestroy(WGPUBuffer b) { wgtrain_js_buffer_destroy(id(b)); }
void BufferRelease(WGPUBuffer b) { Release(b); }
void ShaderModuleRelease(WGPUShaderModule m) { Release(m); }

WGPUBindGroupLayout ComputePipelineGetBindGroupLayout(WGPUComputePipeline p, uint32_t group) {
  return as<WGPUBindGroupLayout>(wgtrain_js_pipeline_layout(id(p), group));
}
void ComputePipelineRelease(WGPUComputePipeline p) { Release(p); }
void BindGroupLayoutRelease(WGPUBindGroupLayout l) { Release(l); }
void BindGroupRelease(WGPUBindGroup g) { Release(g); }

WGPUComputePassEncoder CommandEncoderBeginComputePass(WGPUCommandEncoder e, const WGPUComputePassDescriptor* d) {
  const WGPUPassTimestampWrites* tw = d ? d->timestampWrites : nullptr;
  return as<WGPUComputePassEncoder>(wgtrain_js_begin_compute_pass(
      id(e), d ? str(d->label).c_str() : "", tw ? id(tw->querySet) : 0,
      tw ? tw->beginningOfPassWriteIndex : WGPU_QUERY_SET_INDEX_UNDEFINED,
      tw ? tw->endOfPassWriteIndex : WGPU_QUERY_SET_INDEX_UNDEFINED));
}

void CommandEncoderCopyBufferToBuffer(WGPUCommandEncoder e, WGPUBuffer src, uint64_t so, WGPUBuffer dst, uint64_t d_o,
                                      uint64_t size) {
  wgtrain_js_copy_buffer(id(e), id(src), static_cast<double>(so), id(dst), static_cast<double>(d_o),
                         static_cast<double>(size));
}

void CommandEncoderResolveQuerySet(WGPUCommandEncoder e, WGPUQuerySet q, uint32_t first, uint32_t count, WGPUBuffer dst,
                                   uint64_t offset) {
  wgtrain_js_resolve_query_set(id(e), id(q), first, count, id(dst), static_cast<double>(offset));
}

WGPUCommandBuffer CommandEncoderFinish(WGPUCommandEncoder e, const WGPUCommandBufferDescriptor* d) {
  return as<WGPUCommandBuffer>(wgtrain_js_finish(id(e), d ? str(d->label).c_str() : ""));
}
void CommandEncoderRelease(WGPUCommandEncoder e) { Release(e); }
void CommandBufferRelease(WGPUCommandBuffer b) { Release(b); }

void ComputePassEncoderSetPipeline(WGPUComputePassEncoder p, WGPUComputePipeline pipe) {
  wgtrain_js_pass_set_pipeline(id(p), id(pipe));
}
void ComputePassEncoderSetBindGroup(WGPUComputePassEncoder p, uint32_t index, WGPUBindGroup g, size_t n,
                                    const uint32_t* offsets) {
  wgtrain_js_pass_set_bind_group(id(p), index, id(g), static_cast<uint32_t>(n), offsets);
}
void ComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z) {
  wgtrain_js_pass_dispatch(id(p), x, y, z);
}
void ComputePassEncoderEnd(WGPUComputePassEncoder p) { wgtrain_js_pass_end(id(p)); }
void ComputePassEncoderRelease(WGPUComputePassEncoder p) { Release(p); }
// The browser's WebGPU has no subgroup matrices: AdapterGetInfo never fills the chained list, so nothing to free.
void AdapterPropertiesSubgroupMatrixConfigsFreeMembers(WGPUAdapterPropertiesSubgroupMatrixConfigs) {}
void QuerySetDestroy(WGPUQuerySet q) { wgtrain_js_query_set_destroy(id(q)); }
void QuerySetRelease(WGPUQuerySet q) { Release(q); }

Api make_api() {
  Api api;
  // Every entry of WGPU_ABI_FUNCTIONS by name: one missing here is a compile error, not a null pointer.
#define WGTRAIN_FILL(ret, name, params) api.name = &name;
  WGPU_ABI_FUNCTIONS(WGTRAIN_FILL)
#undef WGTRAIN_FILL
  return api;
}

}  // namespace

namespace wgtrain::gpu {

const webgpu::Api& browser_webgpu() {
  static const Api api = make_api();
  return api;
}

}  // namespace wgtrain::gpu
