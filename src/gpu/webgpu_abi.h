// The part of the WebGPU C API (webgpu.h) that wgtrain calls, declared by the project itself.
//
// The pinned Dawn build (npm webgpu@0.4.0's dist/linux-x64.dawn.node, Dawn commit c5d549e) ships no header and no
// DWARF. Its own generated header at that commit is committed as third_party/dawn/webgpu.h (provenance and a script
// that regenerates it: third_party/dawn/README.md), and tests/abi_test.cpp checks this file against it mechanically:
//   - every struct below: sizeof, and each member's offset and size, against the header's struct of the same name;
//   - every enum constant (WGPU_ABI_ENUMS) against the header's constant named in its third column;
//   - every function (WGPU_ABI_FUNCTIONS): the size and kind of its result and of each parameter against the
//     header's prototype; and it is resolved from the library's symbol table at load time (dawn.cpp), by name;
//   - every toggle name (WGPU_ABI_TOGGLES) is a string of the library's toggle table.
// Why not include the header directly: wgtrain keeps the browser build (web/) and Dawn's on one small table, and the
// header's typed enums would leak into every file that touches the API. Adding a struct or a constant here without
// adding it to that test fails the test.
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
using WGPUEnum = uint32_t;  // every C enum of the API is 32 bits wide (each has a Force32 = 0x7FFFFFFF member)

constexpr uint64_t WGPU_WHOLE_SIZE = UINT64_MAX;
constexpr size_t WGPU_STRLEN = SIZE_MAX;
constexpr uint32_t WGPU_QUERY_SET_INDEX_UNDEFINED = UINT32_MAX;

// ---- Enum constants -----------------------------------------------------------------------------------------------
// X(our name, value, the name in third_party/dawn/webgpu.h).
#define WGPU_ABI_ENUMS(X)                                                                  \
  X(WGPUSType_ShaderSourceWGSL, 0x00000002u, WGPUSType_ShaderSourceWGSL)            \
  X(WGPUSType_DawnTogglesDescriptor, 0x5000Au, WGPUSType_DawnTogglesDescriptor)      \
  X(WGPUSType_AdapterPropertiesSubgroupMatrixConfigs, 0x5003Bu, WGPUSType_AdapterPropertiesSubgroupMatrixConfigs)                                               \
  X(WGPUCallbackMode_AllowProcessEvents, 2u, WGPUCallbackMode_AllowProcessEvents)   \
  X(WGPURequestAdapterStatus_Success, 1u, WGPURequestAdapterStatus_Success)             \
  X(WGPURequestDeviceStatus_Success, 1u, WGPURequestDeviceStatus_Success)               \
  X(WGPUMapAsyncStatus_Success, 1u, WGPUMapAsyncStatus_Success)                            \
  X(WGPUPopErrorScopeStatus_Success, 1u, WGPUPopErrorScopeStatus_Success)               \
  X(WGPUQueueWorkDoneStatus_Success, 1u, WGPUQueueWorkDoneStatus_Success)               \
  X(WGPUErrorType_NoError, 1u, WGPUErrorType_NoError)                              \
  X(WGPUErrorType_Validation, 2u, WGPUErrorType_Validation)                         \
  X(WGPUErrorType_OutOfMemory, 3u, WGPUErrorType_OutOfMemory)                     \
  X(WGPUErrorType_Internal, 4u, WGPUErrorType_Internal)                             \
  X(WGPUErrorType_Unknown, 5u, WGPUErrorType_Unknown)                               \
  X(WGPUErrorFilter_Validation, 1u, WGPUErrorFilter_Validation)                     \
  X(WGPUErrorFilter_OutOfMemory, 2u, WGPUErrorFilter_OutOfMemory)                 \
  X(WGPUErrorFilter_Internal, 3u, WGPUErrorFilter_Internal)                         \
  X(WGPUDeviceLostReason_Unknown, 1u, WGPUDeviceLostReason_Unknown)                 \
  X(WGPUDeviceLostReason_Destroyed, 2u, WGPUDeviceLostReason_Destroyed)             \
  X(WGPUDeviceLostReason_CallbackCancelled, 3u, WGPUDeviceLostReason_CallbackCancelled) \
  X(WGPUDeviceLostReason_FailedCreation, 4u, WGPUDeviceLostReason_FailedCreation)  \
  X(WGPUBackendType_Undefined, 0u, WGPUBackendType_Undefined)                       \
  X(WGPUBackendType_Null, 1u, WGPUBackendType_Null)                                 \
  X(WGPUBackendType_WebGPU, 2u, WGPUBackendType_WebGPU)                             \
  X(WGPUBackendType_D3D11, 3u, WGPUBackendType_D3D11)                               \
  X(WGPUBackendType_D3D12, 4u, WGPUBackendType_D3D12)                               \
  X(WGPUBackendType_Metal, 5u, WGPUBackendType_Metal)                               \
  X(WGPUBackendType_Vulkan, 6u, WGPUBackendType_Vulkan)                             \
  X(WGPUBackendType_OpenGL, 7u, WGPUBackendType_OpenGL)                             \
  X(WGPUBackendType_OpenGLES, 8u, WGPUBackendType_OpenGLES)                         \
  X(WGPUFeatureLevel_Undefined, 0u, WGPUFeatureLevel_Undefined)                     \
  X(WGPUFeatureLevel_Compatibility, 1u, WGPUFeatureLevel_Compatibility)             \
  X(WGPUFeatureLevel_Core, 2u, WGPUFeatureLevel_Core)                               \
  X(WGPUPowerPreference_HighPerformance, 2u, WGPUPowerPreference_HighPerformance)      \
  X(WGPUFeatureName_TimestampQuery, 0x9u, WGPUFeatureName_TimestampQuery)         \
  X(WGPUFeatureName_ShaderF16, 0xBu, WGPUFeatureName_ShaderF16)                  \
  X(WGPUFeatureName_Subgroups, 0x12u, WGPUFeatureName_Subgroups)                   \
  X(WGPUFeatureName_SubgroupMatrix, 0x50034u, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix) \
  X(WGPUQueryType_Timestamp, 2u, WGPUQueryType_Timestamp)                           \
  X(WGPUBufferUsage_MapRead, 1u << 0, WGPUBufferUsage_MapRead)                    \
  X(WGPUBufferUsage_MapWrite, 1u << 1, WGPUBufferUsage_MapWrite)                  \
  X(WGPUBufferUsage_CopySrc, 1u << 2, WGPUBufferUsage_CopySrc)                    \
  X(WGPUBufferUsage_CopyDst, 1u << 3, WGPUBufferUsage_CopyDst)                    \
  X(WGPUBufferUsage_Uniform, 1u << 6, WGPUBufferUsage_Uniform)                     \
  X(WGPUBufferUsage_Storage, 1u << 7, WGPUBufferUsage_Storage)                     \
  X(WGPUBufferUsage_QueryResolve, 1u << 9, WGPUBufferUsage_QueryResolve)          \
  X(WGPUMapMode_Read, 1u << 0, WGPUMapMode_Read)                                   \
  X(WGPUAdapterType_DiscreteGPU, 1u, WGPUAdapterType_DiscreteGPU)               \
  X(WGPUAdapterType_IntegratedGPU, 2u, WGPUAdapterType_IntegratedGPU)           \
  X(WGPUAdapterType_CPU, 3u, WGPUAdapterType_CPU)                               \
  X(WGPUAdapterType_Unknown, 4u, WGPUAdapterType_Unknown)                       \
  X(WGPUStatus_Success, 1u, WGPUStatus_Success)                                 \
  X(WGPUSubgroupMatrixComponentType_F32, 1u, WGPUSubgroupMatrixComponentType_F32) \
  X(WGPUSubgroupMatrixComponentType_F16, 2u, WGPUSubgroupMatrixComponentType_F16) \
  X(WGPUSubgroupMatrixComponentType_U32, 3u, WGPUSubgroupMatrixComponentType_U32) \
  X(WGPUSubgroupMatrixComponentType_I32, 4u, WGPUSubgroupMatrixComponentType_I32) \
  X(WGPUSubgroupMatrixComponentType_U8, 5u, WGPUSubgroupMatrixComponentType_U8)   \
  X(WGPUSubgroupMatrixComponentType_I8, 6u, WGPUSubgroupMatrixComponentType_I8)

#define WGTRAIN_WGPU_DECLARE_ENUM(name, value, header_name) constexpr uint32_t name = (value);
WGPU_ABI_ENUMS(WGTRAIN_WGPU_DECLARE_ENUM)
#undef WGTRAIN_WGPU_DECLARE_ENUM

// ---- Structs (layouts checked against third_party/dawn/webgpu.h) ----------------------------------------------------
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

struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
};

// Dawn's toggles, chained to the instance descriptor, an adapter request or a device descriptor: names from the
// library's toggle table.
struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};

// One shape the adapter's subgroup matrices (tensor cores from WGSL) come in: operand and result component types
// (WGPUSubgroupMatrixComponentType_*), the result tile M x N and the reduction depth K.
struct WGPUSubgroupMatrixConfig {
  WGPUEnum componentType;
  WGPUEnum resultComponentType;
  uint32_t M;
  uint32_t N;
  uint32_t K;
};

// Chained to WGPUAdapterInfo, AdapterGetInfo fills it (where the adapter has the subgroup-matrix feature); free
// with AdapterPropertiesSubgroupMatrixConfigsFreeMembers.
struct WGPUAdapterPropertiesSubgroupMatrixConfigs {
  WGPUChainedStruct chain;
  size_t configCount;
  const WGPUSubgroupMatrixConfig* configs;
};

// Toggle names: X(C++ name, the name in the library's toggle table).
#define WGPU_ABI_TOGGLES(X)                                                                                 \
  X(kToggleAllowUnsafeApis, "allow_unsafe_apis")           /* experimental features, subgroup matrices */    \
  X(kToggleUseVulkanMemoryModel, "use_vulkan_memory_model") /* subgroup matrices need it on Vulkan */        \
  X(kToggleVulkanEnableF16OnNvidia, "vulkan_enable_f16_on_nvidia") /* shader-f16 on NVIDIA's Vulkan driver */
#define WGTRAIN_WGPU_DECLARE_TOGGLE(name, text) inline constexpr const char* name = text;
WGPU_ABI_TOGGLES(WGTRAIN_WGPU_DECLARE_TOGGLE)
#undef WGTRAIN_WGPU_DECLARE_TOGGLE

struct WGPUInstanceLimits {
  WGPUChainedStruct* nextInChain;
  size_t timedWaitAnyMaxCount;
};

struct WGPUInstanceDescriptor {
  const WGPUChainedStruct* nextInChain;
  size_t requiredFeatureCount;
  const WGPUEnum* requiredFeatures;  // WGPUInstanceFeatureName values; wgtrain needs none
  const WGPUInstanceLimits* requiredLimits;
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
