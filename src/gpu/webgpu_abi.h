// The part of the WebGPU C API (webgpu.h) that wgtrain calls, declared by the project itself.
//
// Why not a published header: the pinned Dawn build (npm bun-webgpu-linux-x64@0.1.7) ships none, and the nearest
// published Dawn header differs from it (feature-name numbering, the instance descriptor). So the project declares
// exactly what it uses, in the library's own numbering, and tests/abi_test.cpp checks it mechanically:
//   - every struct below against the library's DWARF (pahole), field by field: name, offset, size, total size;
//   - every enum constant (the WGPU_ABI_ENUMS list) against the enum tables of the matching JavaScript bindings
//     (npm bun-webgpu@0.1.7), or, for the few those lack, against the nearest header and observed behaviour;
//   - the few structs the DWARF lacks (Dawn's own, reached only through nextInChain) against the library's machine
//     code: the member-by-member operator== of Dawn's mirror of each struct, disassembled (objdump);
//   - every toggle name (WGPU_ABI_TOGGLES) is a string of the library's toggle table;
//   - every function in WGPU_ABI_FUNCTIONS is resolved from the library at load time (dawn.cpp), by name.
// Adding a struct or a constant here without adding it to that test fails the test.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wgtrain::webgpu {

// ---- Handles (opaque) --------------------------------------------------------------------------------------------
using WGPUInstance = struct WGPUInstanceImpl*;
using WGPUAdapter = struct WGPUAdapterImpl*;
using WGPUDevice = struct WGPUDeviceImpl*;
using WGPUQueue = struct WGPUQueueImpl*;
using WGPUBuffer = struct WGPUBufferImpl*;
using WGPUShaderModule = struct WGPUShaderModuleImpl*;
using WGPUBindGroupLayout = struct WGPUBindGroupLayoutImpl*;
using WGPUBindGroup = struct WGPUBindGroupImpl*;
using WGPUPipelineLayout = struct WGPUPipelineLayoutImpl*;
using WGPUComputePipeline = struct WGPUComputePipelineImpl*;
using WGPUCommandEncoder = struct WGPUCommandEncoderImpl*;
using WGPUComputePassEncoder = struct WGPUComputePassEncoderImpl*;
using WGPUCommandBuffer = struct WGPUCommandBufferImpl*;
using WGPUQuerySet = struct WGPUQuerySetImpl*;
using WGPUSurface = struct WGPUSurfaceImpl*;
using WGPUSampler = struct WGPUSamplerImpl*;
using WGPUTextureView = struct WGPUTextureViewImpl*;

using WGPUBool = uint32_t;
using WGPUFlags = uint64_t;
using WGPUEnum = uint32_t;  // every C enum of the API is a 32-bit unsigned in this library (DWARF: c_uint)

constexpr uint64_t WGPU_WHOLE_SIZE = UINT64_MAX;
constexpr size_t WGPU_STRLEN = SIZE_MAX;
constexpr uint32_t WGPU_QUERY_SET_INDEX_UNDEFINED = UINT32_MAX;

// ---- Enum constants -----------------------------------------------------------------------------------------------
// X(C name, value, source table, key in that table). Source "js:NAME" is a table in bun-webgpu's index.js;
// "header" is the nearest published Dawn header, backed by a behavioural check in the ABI test.
#define WGPU_ABI_ENUMS(X)                                                                  \
  X(WGPUSType_ShaderSourceWGSL, 0x00000002u, "js:WGPUSType", "ShaderSourceWGSL")            \
  X(WGPUSType_DawnTogglesDescriptor, 327690u, "js:WGPUSType", "DawnTogglesDescriptor")      \
  X(WGPUSType_AdapterPropertiesSubgroupMatrixConfigs, 327739u, "js:WGPUSType",              \
    "AdapterPropertiesSubgroupMatrixConfigs")                                               \
  X(WGPUCallbackMode_AllowProcessEvents, 2u, "js:WGPUCallbackMode", "AllowProcessEvents")   \
  X(WGPURequestAdapterStatus_Success, 1u, "js:RequestAdapterStatus", "Success")             \
  X(WGPURequestDeviceStatus_Success, 1u, "js:RequestDeviceStatus", "Success")               \
  X(WGPUMapAsyncStatus_Success, 1u, "js:AsyncStatus", "Success")                            \
  X(WGPUPopErrorScopeStatus_Success, 1u, "js:PopErrorScopeStatus", "Success")               \
  X(WGPUQueueWorkDoneStatus_Success, 1u, "js:QueueWorkDoneStatus", "Success")               \
  X(WGPUErrorType_NoError, 1u, "js:WGPUErrorType", "no-error")                              \
  X(WGPUErrorType_Validation, 2u, "js:WGPUErrorType", "validation")                         \
  X(WGPUErrorType_OutOfMemory, 3u, "js:WGPUErrorType", "out-of-memory")                     \
  X(WGPUErrorType_Internal, 4u, "js:WGPUErrorType", "internal")                             \
  X(WGPUErrorType_Unknown, 5u, "js:WGPUErrorType", "unknown")                               \
  X(WGPUErrorFilter_Validation, 1u, "js:WGPUErrorFilter", "validation")                     \
  X(WGPUErrorFilter_OutOfMemory, 2u, "js:WGPUErrorFilter", "out-of-memory")                 \
  X(WGPUErrorFilter_Internal, 3u, "js:WGPUErrorFilter", "internal")                         \
  X(WGPUDeviceLostReason_Unknown, 1u, "js:WGPUDeviceLostReason", "unknown")                 \
  X(WGPUDeviceLostReason_Destroyed, 2u, "js:WGPUDeviceLostReason", "destroyed")             \
  X(WGPUDeviceLostReason_CallbackCancelled, 3u, "js:WGPUDeviceLostReason", "callback-cancelled") \
  X(WGPUDeviceLostReason_FailedCreation, 4u, "js:WGPUDeviceLostReason", "failed-creation")  \
  X(WGPUBackendType_Undefined, 0u, "js:WGPUBackendType", "Undefined")                       \
  X(WGPUBackendType_Null, 1u, "js:WGPUBackendType", "Null")                                 \
  X(WGPUBackendType_WebGPU, 2u, "js:WGPUBackendType", "WebGPU")                             \
  X(WGPUBackendType_D3D11, 3u, "js:WGPUBackendType", "D3D11")                               \
  X(WGPUBackendType_D3D12, 4u, "js:WGPUBackendType", "D3D12")                               \
  X(WGPUBackendType_Metal, 5u, "js:WGPUBackendType", "Metal")                               \
  X(WGPUBackendType_Vulkan, 6u, "js:WGPUBackendType", "Vulkan")                             \
  X(WGPUBackendType_OpenGL, 7u, "js:WGPUBackendType", "OpenGL")                             \
  X(WGPUBackendType_OpenGLES, 8u, "js:WGPUBackendType", "OpenGLES")                         \
  X(WGPUFeatureLevel_Undefined, 0u, "js:WGPUFeatureLevel", "undefined")                     \
  X(WGPUFeatureLevel_Compatibility, 1u, "js:WGPUFeatureLevel", "compatibility")             \
  X(WGPUFeatureLevel_Core, 2u, "js:WGPUFeatureLevel", "core")                               \
  X(WGPUPowerPreference_HighPerformance, 2u, "js:PowerPreference", "high-performance")      \
  X(WGPUFeatureName_TimestampQuery, 3u, "js:WGPUFeatureNameDef", "timestamp-query")         \
  X(WGPUFeatureName_ShaderF16, 10u, "js:WGPUFeatureNameDef", "shader-f16")                  \
  X(WGPUFeatureName_Subgroups, 17u, "js:WGPUFeatureNameDef", "subgroups")                   \
  X(WGPUFeatureName_SubgroupMatrix, 327736u, "js:WGPUFeatureNameDef", "chromium-experimental-subgroup-matrix") \
  X(WGPUQueryType_Timestamp, 2u, "js:WGPUQueryType", "timestamp")                           \
  X(WGPUBufferUsage_MapRead, 1u << 0, "js:BufferUsageFlags", "MAP_READ")                    \
  X(WGPUBufferUsage_MapWrite, 1u << 1, "js:BufferUsageFlags", "MAP_WRITE")                  \
  X(WGPUBufferUsage_CopySrc, 1u << 2, "js:BufferUsageFlags", "COPY_SRC")                    \
  X(WGPUBufferUsage_CopyDst, 1u << 3, "js:BufferUsageFlags", "COPY_DST")                    \
  X(WGPUBufferUsage_Uniform, 1u << 6, "js:BufferUsageFlags", "UNIFORM")                     \
  X(WGPUBufferUsage_Storage, 1u << 7, "js:BufferUsageFlags", "STORAGE")                     \
  X(WGPUBufferUsage_QueryResolve, 1u << 9, "js:BufferUsageFlags", "QUERY_RESOLVE")          \
  X(WGPUMapMode_Read, 1u << 0, "js:MapModeFlags", "READ")                                   \
  X(WGPUAdapterType_DiscreteGPU, 1u, "header", "WGPUAdapterType_DiscreteGPU")               \
  X(WGPUAdapterType_IntegratedGPU, 2u, "header", "WGPUAdapterType_IntegratedGPU")           \
  X(WGPUAdapterType_CPU, 3u, "header", "WGPUAdapterType_CPU")                               \
  X(WGPUAdapterType_Unknown, 4u, "header", "WGPUAdapterType_Unknown")                       \
  X(WGPUStatus_Success, 1u, "header", "WGPUStatus_Success")                                 \
  X(WGPUSubgroupMatrixComponentType_F32, 1u, "header", "WGPUSubgroupMatrixComponentType_F32") \
  X(WGPUSubgroupMatrixComponentType_F16, 2u, "header", "WGPUSubgroupMatrixComponentType_F16") \
  X(WGPUSubgroupMatrixComponentType_U32, 3u, "header", "WGPUSubgroupMatrixComponentType_U32") \
  X(WGPUSubgroupMatrixComponentType_I32, 4u, "header", "WGPUSubgroupMatrixComponentType_I32")

#define WGTRAIN_WGPU_DECLARE_ENUM(name, value, source, key) constexpr uint32_t name = (value);
WGPU_ABI_ENUMS(WGTRAIN_WGPU_DECLARE_ENUM)
#undef WGTRAIN_WGPU_DECLARE_ENUM

// ---- Structs (layouts checked against the library's DWARF) ---------------------------------------------------------
struct WGPUStringView {
  const char* data;
  size_t length;
};

struct WGPUChainedStruct {
  const WGPUChainedStruct* next;
  WGPUEnum sType;
};

struct WGPUFuture {
  uint64_t id;
};

// Not in the library's DWARF (it is only ever reached through nextInChain); its two members are, and the ABI test
// checks the JavaScript bindings' definition lists exactly them, in this order.
struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
};

// Dawn's toggles, chained to an adapter request or a device descriptor: names from the library's toggle table.
// Not in the DWARF; its layout is checked against the library's machine code.
struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};

// One shape the adapter's subgroup matrices (tensor cores from WGSL) come in: operand and result component types
// (WGPUSubgroupMatrixComponentType_*), the result tile M x N and the reduction depth K. Not in the DWARF.
struct WGPUSubgroupMatrixConfig {
  WGPUEnum componentType;
  WGPUEnum resultComponentType;
  uint32_t M;
  uint32_t N;
  uint32_t K;
};

// Chained to WGPUAdapterInfo, AdapterGetInfo fills it (where the adapter has the subgroup-matrix feature); free
// with AdapterPropertiesSubgroupMatrixConfigsFreeMembers. Not in the DWARF.
struct WGPUAdapterPropertiesSubgroupMatrixConfigs {
  WGPUChainedStruct chain;
  size_t configCount;
  const WGPUSubgroupMatrixConfig* configs;
};

// Toggle names: X(C++ name, the name in the library's toggle table).
#define WGPU_ABI_TOGGLES(X)                                                                                 \
  X(kToggleAllowUnsafeApis, "allow_unsafe_apis")           /* experimental features, subgroup matrices */    \
  X(kToggleUseVulkanMemoryModel, "use_vulkan_memory_model") /* subgroup matrices need it on Vulkan */
#define WGTRAIN_WGPU_DECLARE_TOGGLE(name, text) inline constexpr const char* name = text;
WGPU_ABI_TOGGLES(WGTRAIN_WGPU_DECLARE_TOGGLE)
#undef WGTRAIN_WGPU_DECLARE_TOGGLE

struct WGPUInstanceCapabilities {
  WGPUChainedStruct* nextInChain;
  WGPUBool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
};

struct WGPUInstanceDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUInstanceCapabilities capabilities;
};

struct WGPURequestAdapterOptions {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum featureLevel;
  WGPUEnum powerPreference;
  WGPUBool forceFallbackAdapter;
  WGPUEnum backendType;
  WGPUSurface compatibleSurface;
};

struct WGPUAdapterInfo {
  WGPUChainedStruct* nextInChain;
  WGPUStringView vendor;
  WGPUStringView architecture;
  WGPUStringView device;
  WGPUStringView description;
  WGPUEnum backendType;
  WGPUEnum adapterType;
  uint32_t vendorID;
  uint32_t deviceID;
  uint32_t subgroupMinSize;
  uint32_t subgroupMaxSize;
};

struct WGPULimits {
  WGPUChainedStruct* nextInChain;
  uint32_t maxTextureDimension1D;
  uint32_t maxTextureDimension2D;
  uint32_t maxTextureDimension3D;
  uint32_t maxTextureArrayLayers;
  uint32_t maxBindGroups;
  uint32_t maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage;
  uint32_t maxSamplersPerShaderStage;
  uint32_t maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage;
  uint32_t maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment;
  uint32_t minStorageBufferOffsetAlignment;
  uint32_t maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes;
  uint32_t maxVertexBufferArrayStride;
  uint32_t maxInterStageShaderVariables;
  uint32_t maxColorAttachments;
  uint32_t maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize;
  uint32_t maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX;
  uint32_t maxComputeWorkgroupSizeY;
  uint32_t maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
  uint32_t maxImmediateSize;
};

struct WGPUSupportedFeatures {
  size_t featureCount;
  const WGPUEnum* features;
};

using WGPURequestAdapterCallback = void (*)(WGPUEnum status, WGPUAdapter adapter, WGPUStringView message,
                                            void* userdata1, void* userdata2);
using WGPURequestDeviceCallback = void (*)(WGPUEnum status, WGPUDevice device, WGPUStringView message,
                                           void* userdata1, void* userdata2);
using WGPUDeviceLostCallback = void (*)(const WGPUDevice* device, WGPUEnum reason, WGPUStringView message,
                                        void* userdata1, void* userdata2);
using WGPUUncapturedErrorCallback = void (*)(const WGPUDevice* device, WGPUEnum type, WGPUStringView message,
                                             void* userdata1, void* userdata2);
using WGPUBufferMapCallback = void (*)(WGPUEnum status, WGPUStringView message, void* userdata1, void* userdata2);
using WGPUPopErrorScopeCallback = void (*)(WGPUEnum status, WGPUEnum type, WGPUStringView message, void* userdata1,
                                           void* userdata2);
using WGPUQueueWorkDoneCallback = void (*)(WGPUEnum status, WGPUStringView message, void* userdata1,
                                           void* userdata2);

struct WGPURequestAdapterCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPURequestAdapterCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPURequestDeviceCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPURequestDeviceCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUDeviceLostCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPUDeviceLostCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUUncapturedErrorCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUUncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUBufferMapCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPUBufferMapCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUPopErrorScopeCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPUPopErrorScopeCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUQueueWorkDoneCallbackInfo {
  const WGPUChainedStruct* nextInChain;
  WGPUEnum mode;
  WGPUQueueWorkDoneCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUQueueDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUDeviceDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  const WGPUEnum* requiredFeatures;
  const WGPULimits* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
};

struct WGPUBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUFlags usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
};

struct WGPUShaderModuleDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUConstantEntry {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView key;
  double value;
};

struct WGPUComputeState {
  const WGPUChainedStruct* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  const WGPUConstantEntry* constants;
};

struct WGPUComputePipelineDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout;
  WGPUComputeState compute;
};

struct WGPUBindGroupEntry {
  const WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  WGPUSampler sampler;
  WGPUTextureView textureView;
};

struct WGPUBindGroupDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry* entries;
};

struct WGPUCommandEncoderDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUPassTimestampWrites {
  const WGPUChainedStruct* nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
};

struct WGPUComputePassDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  const WGPUPassTimestampWrites* timestampWrites;
};

struct WGPUCommandBufferDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

struct WGPUQuerySetDescriptor {
  const WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUEnum type;
  uint32_t count;
};

// ---- Functions (resolved by name from the library at load time) ----------------------------------------------------
// X(return type, name without the "wgpu" prefix, parameter list)
#define WGPU_ABI_FUNCTIONS(X)                                                                                     \
  X(WGPUInstance, CreateInstance, (const WGPUInstanceDescriptor*))                                                \
  X(WGPUFuture, InstanceRequestAdapter,                                                                           \
    (WGPUInstance, const WGPURequestAdapterOptions*, WGPURequestAdapterCallbackInfo))                             \
  X(void, InstanceProcessEvents, (WGPUInstance))                                                                  \
  X(void, InstanceRelease, (WGPUInstance))                                                                        \
  X(WGPUEnum, AdapterGetInfo, (WGPUAdapter, WGPUAdapterInfo*))                                                    \
  X(void, AdapterInfoFreeMembers, (WGPUAdapterInfo))                                                              \
  X(void, AdapterPropertiesSubgroupMatrixConfigsFreeMembers, (WGPUAdapterPropertiesSubgroupMatrixConfigs))        \
  X(WGPUEnum, AdapterGetLimits, (WGPUAdapter, WGPULimits*))                                                       \
  X(void, AdapterGetFeatures, (WGPUAdapter, WGPUSupportedFeatures*))                                              \
  X(WGPUBool, AdapterHasFeature, (WGPUAdapter, WGPUEnum))                                                         \
  X(void, SupportedFeaturesFreeMembers, (WGPUSupportedFeatures))                                                  \
  X(WGPUFuture, AdapterRequestDevice, (WGPUAdapter, const WGPUDeviceDescriptor*, WGPURequestDeviceCallbackInfo))  \
  X(void, AdapterRelease, (WGPUAdapter))                                                                          \
  X(WGPUEnum, DeviceGetLimits, (WGPUDevice, WGPULimits*))                                                         \
  X(WGPUBool, DeviceHasFeature, (WGPUDevice, WGPUEnum))                                                           \
  X(WGPUQueue, DeviceGetQueue, (WGPUDevice))                                                                      \
  X(WGPUBuffer, DeviceCreateBuffer, (WGPUDevice, const WGPUBufferDescriptor*))                                    \
  X(WGPUShaderModule, DeviceCreateShaderModule, (WGPUDevice, const WGPUShaderModuleDescriptor*))                  \
  X(WGPUComputePipeline, DeviceCreateComputePipeline, (WGPUDevice, const WGPUComputePipelineDescriptor*))         \
  X(WGPUBindGroup, DeviceCreateBindGroup, (WGPUDevice, const WGPUBindGroupDescriptor*))                           \
  X(WGPUCommandEncoder, DeviceCreateCommandEncoder, (WGPUDevice, const WGPUCommandEncoderDescriptor*))            \
  X(WGPUQuerySet, DeviceCreateQuerySet, (WGPUDevice, const WGPUQuerySetDescriptor*))                              \
  X(void, DevicePushErrorScope, (WGPUDevice, WGPUEnum))                                                           \
  X(WGPUFuture, DevicePopErrorScope, (WGPUDevice, WGPUPopErrorScopeCallbackInfo))                                 \
  X(void, DeviceDestroy, (WGPUDevice))                                                                            \
  X(void, DeviceRelease, (WGPUDevice))                                                                            \
  X(void, QueueWriteBuffer, (WGPUQueue, WGPUBuffer, uint64_t, const void*, size_t))                               \
  X(void, QueueSubmit, (WGPUQueue, size_t, const WGPUCommandBuffer*))                                             \
  X(WGPUFuture, QueueOnSubmittedWorkDone, (WGPUQueue, WGPUQueueWorkDoneCallbackInfo))                             \
  X(void, QueueRelease, (WGPUQueue))                                                                              \
  X(WGPUFuture, BufferMapAsync, (WGPUBuffer, WGPUFlags, size_t, size_t, WGPUBufferMapCallbackInfo))               \
  X(const void*, BufferGetConstMappedRange, (WGPUBuffer, size_t, size_t))                                         \
  X(void, BufferUnmap, (WGPUBuffer))                                                                              \
  X(void, BufferDestroy, (WGPUBuffer))                                                                            \
  X(void, BufferRelease, (WGPUBuffer))                                                                            \
  X(void, ShaderModuleRelease, (WGPUShaderModule))                                                                \
  X(WGPUBindGroupLayout, ComputePipelineGetBindGroupLayout, (WGPUComputePipeline, uint32_t))                      \
  X(void, ComputePipelineRelease, (WGPUComputePipeline))                                                          \
  X(void, BindGroupLayoutRelease, (WGPUBindGroupLayout))                                                          \
  X(void, BindGroupRelease, (WGPUBindGroup))                                                                      \
  X(WGPUComputePassEncoder, CommandEncoderBeginComputePass, (WGPUCommandEncoder, const WGPUComputePassDescriptor*)) \
  X(void, CommandEncoderCopyBufferToBuffer, (WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t)) \
  X(void, CommandEncoderResolveQuerySet, (WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t)) \
  X(WGPUCommandBuffer, CommandEncoderFinish, (WGPUCommandEncoder, const WGPUCommandBufferDescriptor*))            \
  X(void, CommandEncoderRelease, (WGPUCommandEncoder))                                                            \
  X(void, CommandBufferRelease, (WGPUCommandBuffer))                                                              \
  X(void, ComputePassEncoderSetPipeline, (WGPUComputePassEncoder, WGPUComputePipeline))                           \
  X(void, ComputePassEncoderSetBindGroup, (WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t*)) \
  X(void, ComputePassEncoderDispatchWorkgroups, (WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t))           \
  X(void, ComputePassEncoderEnd, (WGPUComputePassEncoder))                                                        \
  X(void, ComputePassEncoderRelease, (WGPUComputePassEncoder))                                                    \
  X(void, QuerySetDestroy, (WGPUQuerySet))                                                                        \
  X(void, QuerySetRelease, (WGPUQuerySet))

// The resolved entry points; get it from wgtrain::gpu::dawn() (dawn.h).
struct Api {
#define WGTRAIN_WGPU_DECLARE_FN(ret, name, params) ret(*name) params = nullptr;
  WGPU_ABI_FUNCTIONS(WGTRAIN_WGPU_DECLARE_FN)
#undef WGTRAIN_WGPU_DECLARE_FN
};

inline WGPUStringView sv(const char* s, size_t n) { return WGPUStringView{s, n}; }

}  // namespace wgtrain::webgpu
