// The WebGPU ABI check: every struct, constant and function wgtrain declares (src/gpu/webgpu_abi.h) against Dawn's
// own generated header at the pinned library's commit (third_party/dawn/webgpu.h, c5d549e: the npm library has no
// DWARF and no header), and against the library itself.
//   structs:   sizeof, and every member's offset and size, against the header's struct of the same name (compiled
//              here: offsetof on both), and the member names, in order, against the header's text (so a member we
//              leave out is seen even where padding would hide it);
//   constants: each against the header's constant of the name in WGPU_ABI_ENUMS' third column;
//   functions: the size and kind (integer, float, pointer, struct) of the result and of each parameter against the
//              header's prototype; and each resolved from the library's symbol table;
//   the addon: the Node-API functions it imports are exactly the ones wgtrain stands in for (gpu/napi_imports.h),
//              and this executable exports them all;
//   toggles:   each name is a string of the library's toggle table, and the toggles descriptor reaches it;
//   browser:   web/src/webgpu_table.js numbers the features as we do.
// A struct or constant added to the header without an entry here fails HeaderIsFullyChecked.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/dawn.h"
#include "gpu/features.h"
#include "gpu/device_impl.h"
#include "gpu/napi_imports.h"
#include "gpu/webgpu_abi.h"
#include "gpu/webgpu_backend.h"
#include "support/test_support.h"

// Our sentinel constants, taken before the reference header defines macros of the same names.
namespace snapshot {
constexpr uint64_t kWholeSize = wgtrain::webgpu::WGPU_WHOLE_SIZE;
constexpr size_t kStrlen = wgtrain::webgpu::WGPU_STRLEN;
constexpr uint32_t kQuerySetIndexUndefined = wgtrain::webgpu::WGPU_QUERY_SET_INDEX_UNDEFINED;
}  // namespace snapshot

#include "../third_party/dawn/webgpu.h"  // the reference: global namespace; ours is wgtrain::webgpu

namespace {

namespace ours = wgtrain::webgpu;

struct FieldLayout {
  std::string name;
  size_t offset, size;          // ours
  size_t ref_offset, ref_size;  // the header's
};
struct StructLayout {
  std::string name;
  size_t size, ref_size;
  std::vector<FieldLayout> fields;
};

#define FIELD(T, f) FieldLayout{#f, offsetof(ours::T, f), sizeof(ours::T::f), offsetof(::T, f), sizeof(::T::f)}
#define STRUCT(T, ...) StructLayout{#T, sizeof(ours::T), sizeof(::T), {__VA_ARGS__}}

// Every struct of webgpu_abi.h, member by member.
const std::vector<StructLayout>& our_structs() {
  static const std::vector<StructLayout> s = {
      STRUCT(WGPUStringView, FIELD(WGPUStringView, data), FIELD(WGPUStringView, length)),
      STRUCT(WGPUChainedStruct, FIELD(WGPUChainedStruct, next), FIELD(WGPUChainedStruct, sType)),
      STRUCT(WGPUFuture, FIELD(WGPUFuture, id)),
      STRUCT(WGPUInstanceLimits, FIELD(WGPUInstanceLimits, nextInChain), FIELD(WGPUInstanceLimits, timedWaitAnyMaxCount)),
      STRUCT(WGPUInstanceDescriptor, FIELD(WGPUInstanceDescriptor, nextInChain),
             FIELD(WGPUInstanceDescriptor, requiredFeatureCount), FIELD(WGPUInstanceDescriptor, requiredFeatures),
             FIELD(WGPUInstanceDescriptor, requiredLimits)),
      STRUCT(WGPURequestAdapterOptions, FIELD(WGPURequestAdapterOptions, nextInChain),
             FIELD(WGPURequestAdapterOptions, featureLevel), FIELD(WGPURequestAdapterOptions, powerPreference),
             FIELD(WGPURequestAdapterOptions, forceFallbackAdapter), FIELD(WGPURequestAdapterOptions, backendType),
             FIELD(WGPURequestAdapterOptions, compatibleSurface)),
      STRUCT(WGPUAdapterInfo, FIELD(WGPUAdapterInfo, nextInChain), FIELD(WGPUAdapterInfo, vendor),
             FIELD(WGPUAdapterInfo, architecture), FIELD(WGPUAdapterInfo, device), FIELD(WGPUAdapterInfo, description),
             FIELD(WGPUAdapterInfo, backendType), FIELD(WGPUAdapterInfo, adapterType), FIELD(WGPUAdapterInfo, vendorID),
             FIELD(WGPUAdapterInfo, deviceID), FIELD(WGPUAdapterInfo, subgroupMinSize),
             FIELD(WGPUAdapterInfo, subgroupMaxSize)),
      STRUCT(WGPULimits, FIELD(WGPULimits, nextInChain), FIELD(WGPULimits, maxTextureDimension1D),
             FIELD(WGPULimits, maxTextureDimension2D), FIELD(WGPULimits, maxTextureDimension3D),
             FIELD(WGPULimits, maxTextureArrayLayers), FIELD(WGPULimits, maxBindGroups),
             FIELD(WGPULimits, maxBindGroupsPlusVertexBuffers), FIELD(WGPULimits, maxBindingsPerBindGroup),
             FIELD(WGPULimits, maxDynamicUniformBuffersPerPipelineLayout),
             FIELD(WGPULimits, maxDynamicStorageBuffersPerPipelineLayout),
             FIELD(WGPULimits, maxSampledTexturesPerShaderStage), FIELD(WGPULimits, maxSamplersPerShaderStage),
             FIELD(WGPULimits, maxStorageBuffersPerShaderStage), FIELD(WGPULimits, maxStorageTexturesPerShaderStage),
             FIELD(WGPULimits, maxUniformBuffersPerShaderStage), FIELD(WGPULimits, maxUniformBufferBindingSize),
             FIELD(WGPULimits, maxStorageBufferBindingSize), FIELD(WGPULimits, minUniformBufferOffsetAlignment),
             FIELD(WGPULimits, minStorageBufferOffsetAlignment), FIELD(WGPULimits, maxVertexBuffers),
             FIELD(WGPULimits, maxBufferSize), FIELD(WGPULimits, maxVertexAttributes),
             FIELD(WGPULimits, maxVertexBufferArrayStride), FIELD(WGPULimits, maxInterStageShaderVariables),
             FIELD(WGPULimits, maxColorAttachments), FIELD(WGPULimits, maxColorAttachmentBytesPerSample),
             FIELD(WGPULimits, maxComputeWorkgroupStorageSize), FIELD(WGPULimits, maxComputeInvocationsPerWorkgroup),
             FIELD(WGPULimits, maxComputeWorkgroupSizeX), FIELD(WGPULimits, maxComputeWorkgroupSizeY),
             FIELD(WGPULimits, maxComputeWorkgroupSizeZ), FIELD(WGPULimits, maxComputeWorkgroupsPerDimension),
             FIELD(WGPULimits, maxImmediateSize)),
      STRUCT(WGPUSupportedFeatures, FIELD(WGPUSupportedFeatures, featureCount), FIELD(WGPUSupportedFeatures, features)),
      STRUCT(WGPURequestAdapterCallbackInfo, FIELD(WGPURequestAdapterCallbackInfo, nextInChain),
             FIELD(WGPURequestAdapterCallbackInfo, mode), FIELD(WGPURequestAdapterCallbackInfo, callback),
             FIELD(WGPURequestAdapterCallbackInfo, userdata1), FIELD(WGPURequestAdapterCallbackInfo, userdata2)),
      STRUCT(WGPURequestDeviceCallbackInfo, FIELD(WGPURequestDeviceCallbackInfo, nextInChain),
             FIELD(WGPURequestDeviceCallbackInfo, mode), FIELD(WGPURequestDeviceCallbackInfo, callback),
             FIELD(WGPURequestDeviceCallbackInfo, userdata1), FIELD(WGPURequestDeviceCallbackInfo, userdata2)),
      STRUCT(WGPUDeviceLostCallbackInfo, FIELD(WGPUDeviceLostCallbackInfo, nextInChain),
             FIELD(WGPUDeviceLostCallbackInfo, mode), FIELD(WGPUDeviceLostCallbackInfo, callback),
             FIELD(WGPUDeviceLostCallbackInfo, userdata1), FIELD(WGPUDeviceLostCallbackInfo, userdata2)),
      STRUCT(WGPUUncapturedErrorCallbackInfo, FIELD(WGPUUncapturedErrorCallbackInfo, nextInChain),
             FIELD(WGPUUncapturedErrorCallbackInfo, callback), FIELD(WGPUUncapturedErrorCallbackInfo, userdata1),
             FIELD(WGPUUncapturedErrorCallbackInfo, userdata2)),
      STRUCT(WGPUBufferMapCallbackInfo, FIELD(WGPUBufferMapCallbackInfo, nextInChain),
             FIELD(WGPUBufferMapCallbackInfo, mode), FIELD(WGPUBufferMapCallbackInfo, callback),
             FIELD(WGPUBufferMapCallbackInfo, userdata1), FIELD(WGPUBufferMapCallbackInfo, userdata2)),
      STRUCT(WGPUPopErrorScopeCallbackInfo, FIELD(WGPUPopErrorScopeCallbackInfo, nextInChain),
             FIELD(WGPUPopErrorScopeCallbackInfo, mode), FIELD(WGPUPopErrorScopeCallbackInfo, callback),
             FIELD(WGPUPopErrorScopeCallbackInfo, userdata1), FIELD(WGPUPopErrorScopeCallbackInfo, userdata2)),
      STRUCT(WGPUQueueWorkDoneCallbackInfo, FIELD(WGPUQueueWorkDoneCallbackInfo, nextInChain),
             FIELD(WGPUQueueWorkDoneCallbackInfo, mode), FIELD(WGPUQueueWorkDoneCallbackInfo, callback),
             FIELD(WGPUQueueWorkDoneCallbackInfo, userdata1), FIELD(WGPUQueueWorkDoneCallbackInfo, userdata2)),
      STRUCT(WGPUQueueDescriptor, FIELD(WGPUQueueDescriptor, nextInChain), FIELD(WGPUQueueDescriptor, label)),
      STRUCT(WGPUDeviceDescriptor, FIELD(WGPUDeviceDescriptor, nextInChain), FIELD(WGPUDeviceDescriptor, label),
             FIELD(WGPUDeviceDescriptor, requiredFeatureCount), FIELD(WGPUDeviceDescriptor, requiredFeatures),
             FIELD(WGPUDeviceDescriptor, requiredLimits), FIELD(WGPUDeviceDescriptor, defaultQueue),
             FIELD(WGPUDeviceDescriptor, deviceLostCallbackInfo),
             FIELD(WGPUDeviceDescriptor, uncapturedErrorCallbackInfo)),
      STRUCT(WGPUBufferDescriptor, FIELD(WGPUBufferDescriptor, nextInChain), FIELD(WGPUBufferDescriptor, label),
             FIELD(WGPUBufferDescriptor, usage), FIELD(WGPUBufferDescriptor, size),
             FIELD(WGPUBufferDescriptor, mappedAtCreation)),
      STRUCT(WGPUShaderModuleDescriptor, FIELD(WGPUShaderModuleDescriptor, nextInChain),
             FIELD(WGPUShaderModuleDescriptor, label)),
      STRUCT(WGPUConstantEntry, FIELD(WGPUConstantEntry, nextInChain), FIELD(WGPUConstantEntry, key),
             FIELD(WGPUConstantEntry, value)),
      STRUCT(WGPUComputeState, FIELD(WGPUComputeState, nextInChain), FIELD(WGPUComputeState, module),
             FIELD(WGPUComputeState, entryPoint), FIELD(WGPUComputeState, constantCount),
             FIELD(WGPUComputeState, constants)),
      STRUCT(WGPUComputePipelineDescriptor, FIELD(WGPUComputePipelineDescriptor, nextInChain),
             FIELD(WGPUComputePipelineDescriptor, label), FIELD(WGPUComputePipelineDescriptor, layout),
             FIELD(WGPUComputePipelineDescriptor, compute)),
      STRUCT(WGPUBindGroupEntry, FIELD(WGPUBindGroupEntry, nextInChain), FIELD(WGPUBindGroupEntry, binding),
             FIELD(WGPUBindGroupEntry, buffer), FIELD(WGPUBindGroupEntry, offset), FIELD(WGPUBindGroupEntry, size),
             FIELD(WGPUBindGroupEntry, sampler), FIELD(WGPUBindGroupEntry, textureView)),
      STRUCT(WGPUBindGroupDescriptor, FIELD(WGPUBindGroupDescriptor, nextInChain),
             FIELD(WGPUBindGroupDescriptor, label), FIELD(WGPUBindGroupDescriptor, layout),
             FIELD(WGPUBindGroupDescriptor, entryCount), FIELD(WGPUBindGroupDescriptor, entries)),
      STRUCT(WGPUCommandEncoderDescriptor, FIELD(WGPUCommandEncoderDescriptor, nextInChain),
             FIELD(WGPUCommandEncoderDescriptor, label)),
      STRUCT(WGPUPassTimestampWrites, FIELD(WGPUPassTimestampWrites, nextInChain),
             FIELD(WGPUPassTimestampWrites, querySet), FIELD(WGPUPassTimestampWrites, beginningOfPassWriteIndex),
             FIELD(WGPUPassTimestampWrites, endOfPassWriteIndex)),
      STRUCT(WGPUComputePassDescriptor, FIELD(WGPUComputePassDescriptor, nextInChain),
             FIELD(WGPUComputePassDescriptor, label), FIELD(WGPUComputePassDescriptor, timestampWrites)),
      STRUCT(WGPUCommandBufferDescriptor, FIELD(WGPUCommandBufferDescriptor, nextInChain),
             FIELD(WGPUCommandBufferDescriptor, label)),
      STRUCT(WGPUQuerySetDescriptor, FIELD(WGPUQuerySetDescriptor, nextInChain), FIELD(WGPUQuerySetDescriptor, label),
             FIELD(WGPUQuerySetDescriptor, type), FIELD(WGPUQuerySetDescriptor, count)),
      STRUCT(WGPUShaderSourceWGSL, FIELD(WGPUShaderSourceWGSL, chain), FIELD(WGPUShaderSourceWGSL, code)),
      STRUCT(WGPUDawnTogglesDescriptor, FIELD(WGPUDawnTogglesDescriptor, chain),
             FIELD(WGPUDawnTogglesDescriptor, enabledToggleCount), FIELD(WGPUDawnTogglesDescriptor, enabledToggles),
             FIELD(WGPUDawnTogglesDescriptor, disabledToggleCount), FIELD(WGPUDawnTogglesDescriptor, disabledToggles)),
      STRUCT(WGPUSubgroupMatrixConfig, FIELD(WGPUSubgroupMatrixConfig, componentType),
             FIELD(WGPUSubgroupMatrixConfig, resultComponentType), FIELD(WGPUSubgroupMatrixConfig, M),
             FIELD(WGPUSubgroupMatrixConfig, N), FIELD(WGPUSubgroupMatrixConfig, K)),
      STRUCT(WGPUAdapterPropertiesSubgroupMatrixConfigs, FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, chain),
             FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, configCount),
             FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, configs)),
  };
  return s;
}

// A file of the source tree: at its compiled-in path, or (a copy of the tree elsewhere, as on the GPU machine)
// relative to the working directory.
std::string source_file(const std::string& compiled, const std::string& relative) {
  return std::ifstream(compiled).good() ? compiled : relative;
}
const std::string kDawnHeader = source_file(WGTRAIN_DAWN_HEADER, "third_party/dawn/webgpu.h");
const std::string kWebTable = source_file(WGTRAIN_WEB_TABLE_JS, "web/src/webgpu_table.js");
const std::string kAbiHeader = source_file(WGTRAIN_ABI_HEADER, "src/gpu/webgpu_abi.h");
// The library the runtime loads ($WGTRAIN_DAWN_LIBRARY, else setup.sh's copy).
std::string dawn_library() { return wgtrain::gpu::dawn_library_path(); }

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The member names of each struct of the header, in order, from its text ("typedef struct X {" ... "} X").
std::map<std::string, std::vector<std::string>> header_members() {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(read_file(kDawnHeader));
  const std::regex open(R"(^typedef struct (WGPU\w+) \{$)");
  const std::regex member(R"(^\s+[^/*].*?[\s\*](\w+);$)");
  std::string line, cur;
  std::smatch m;
  while (std::getline(in, line)) {
    if (cur.empty()) {
      if (std::regex_search(line, m, open)) cur = m[1];
    } else if (line.rfind("}", 0) == 0) {
      cur.clear();
    } else if (std::regex_search(line, m, member)) {
      out[cur].push_back(m[1]);
    }
  }
  return out;
}

// One line per difference between our layouts and the header's (none: they agree).
std::vector<std::string> struct_mismatches(const std::vector<StructLayout>& structs,
                                           const std::map<std::string, std::vector<std::string>>& members) {
  std::vector<std::string> out;
  for (const auto& s : structs) {
    if (s.size != s.ref_size)
      out.push_back("sizeof(" + s.name + ") = " + std::to_string(s.size) + ", the header's " +
                    std::to_string(s.ref_size));
    for (const auto& f : s.fields) {
      if (f.offset != f.ref_offset)
        out.push_back(s.name + "::" + f.name + " at offset " + std::to_string(f.offset) + ", the header's " +
                      std::to_string(f.ref_offset));
      if (f.size != f.ref_size)
        out.push_back(s.name + "::" + f.name + " of size " + std::to_string(f.size) + ", the header's " +
                      std::to_string(f.ref_size));
    }
    auto it = members.find(s.name);
    if (it == members.end()) {
      out.push_back(s.name + " is not in the header");
      continue;
    }
    std::vector<std::string> names;
    for (const auto& f : s.fields) names.push_back(f.name);
    if (names != it->second) {
      std::string h;
      for (const auto& n : it->second) h += " " + n;
      out.push_back(s.name + "'s members differ from the header's:" + h);
    }
  }
  return out;
}

struct EnumConstant {
  const char* name;
  uint64_t value, ref_value;
};

const std::vector<EnumConstant>& our_constants() {
#define WGTRAIN_ABI_CONSTANT(name, value, header_name) \
  EnumConstant{#name, ours::name, static_cast<uint64_t>(::header_name)},
  static const std::vector<EnumConstant> c = {WGPU_ABI_ENUMS(WGTRAIN_ABI_CONSTANT)};
#undef WGTRAIN_ABI_CONSTANT
  return c;
}

std::vector<std::string> constant_mismatches(const std::vector<EnumConstant>& constants) {
  std::vector<std::string> out;
  for (const auto& c : constants)
    if (c.value != c.ref_value)
      out.push_back(std::string(c.name) + " = " + std::to_string(c.value) + ", the header's " +
                    std::to_string(c.ref_value));
  return out;
}

// A function type as the calling convention sees it: for the result and each parameter, its size and kind.
template <class T>
std::string arg_shape() {
  if constexpr (std::is_void_v<T>) return "void";
  else {
    const char* kind = std::is_pointer_v<T>          ? "ptr"
                       : std::is_floating_point_v<T> ? "float"
                       : std::is_class_v<T>          ? "struct"
                                                     : "int";
    return std::string(kind) + std::to_string(sizeof(T));
  }
}
template <class F>
struct Shape;
template <class R, class... A>
struct Shape<R (*)(A...)> {
  static std::string text() {
    std::string s = arg_shape<R>() + "(";
    ((s += arg_shape<A>() + ","), ...);
    return s + ")";
  }
};

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "\n  " + l;
  return s;
}

TEST(Abi, EveryStructMatchesTheHeader) {
  const auto members = header_members();
  ASSERT_GT(members.size(), 100u) << "could not read structs from " << kDawnHeader;
  const auto wrong = struct_mismatches(our_structs(), members);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differences:" << joined(wrong);
}

TEST(Abi, EveryConstantMatchesTheHeader) {
  EXPECT_EQ(snapshot::kWholeSize, WGPU_WHOLE_SIZE);
  EXPECT_EQ(snapshot::kStrlen, WGPU_STRLEN);
  EXPECT_EQ(snapshot::kQuerySetIndexUndefined, WGPU_QUERY_SET_INDEX_UNDEFINED);
  const auto wrong = constant_mismatches(our_constants());
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differences:" << joined(wrong);
  EXPECT_GT(our_constants().size(), 50u);
}

TEST(Abi, EveryFunctionMatchesTheHeadersPrototype) {
  int checked = 0;
#define WGTRAIN_ABI_FN(ret, name, params)                                                    \
  EXPECT_EQ(Shape<decltype(ours::Api::name)>::text(), Shape<decltype(&::wgpu##name)>::text()) \
      << "wgpu" #name;                                                                       \
  ++checked;
  WGPU_ABI_FUNCTIONS(WGTRAIN_ABI_FN)
#undef WGTRAIN_ABI_FN
  EXPECT_GT(checked, 50);
  // The shape sees a difference: a 64-bit flags argument declared 32-bit.
  EXPECT_NE(Shape<void (*)(ours::WGPUBuffer, uint32_t)>::text(), Shape<void (*)(ours::WGPUBuffer, uint64_t)>::text());
}

TEST(Abi, EveryFunctionIsInTheLibrarysSymbolTable) {
  std::vector<std::string> names = {"dawnProcSetProcs", "_ZN4dawn6native8GetProcsEv"};
#define WGTRAIN_NAME(ret, name, params) names.push_back("wgpu" #name);
  WGPU_ABI_FUNCTIONS(WGTRAIN_NAME)
#undef WGTRAIN_NAME
  const auto found = wgtrain::gpu::elf_local_symbols(dawn_library(), names);
  for (const auto& n : names) EXPECT_TRUE(found.count(n)) << n;
  EXPECT_FALSE(wgtrain::gpu::elf_local_symbols(dawn_library(), {"wgpuNoSuchFunction"}).count(
      "wgpuNoSuchFunction"));
  // And the loaded table points at distinct functions.
  const ours::Api& api = wgtrain::gpu::dawn();
  std::set<const void*> seen;
#define WGTRAIN_PTR(ret, name, params) seen.insert(reinterpret_cast<const void*>(api.name));
  WGPU_ABI_FUNCTIONS(WGTRAIN_PTR)
#undef WGTRAIN_PTR
  EXPECT_EQ(seen.size(), names.size() - 2);
  EXPECT_FALSE(seen.count(nullptr));
}

// The undefined symbols of an ELF file's dynamic symbol table (what the loader must bind when it is loaded).
std::set<std::string> undefined_dynamic_symbols(const std::string& path) {
  const std::string f = read_file(path);
  std::set<std::string> out;
  if (f.size() < sizeof(Elf64_Ehdr)) return out;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(f.data());
  if (eh->e_shoff + uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr) > f.size()) return out;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(f.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(f.data() + sh[i].sh_offset);
    const char* names = f.data() + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k)
      if (syms[k].st_shndx == SHN_UNDEF && syms[k].st_name) out.insert(names + syms[k].st_name);
  }
  return out;
}

TEST(Abi, TheNodeApiStandInsAreExactlyTheLibrarysImports) {
  std::set<std::string> imported;
  for (const auto& s : undefined_dynamic_symbols(dawn_library()))
    if (s.rfind("napi_", 0) == 0) imported.insert(s);
  std::set<std::string> ours_;
#define WGTRAIN_NAPI(name) ours_.insert(#name);
  WGTRAIN_NAPI_IMPORTS(WGTRAIN_NAPI)
#undef WGTRAIN_NAPI
  EXPECT_GT(imported.size(), 50u);
  EXPECT_EQ(ours_, imported);
  // And the test executable exports every stand-in, as each wgtrain executable must for the loader to bind them.
  for (const auto& name : ours_) EXPECT_NE(dlsym(RTLD_DEFAULT, name.c_str()), nullptr) << name;
}

TEST(Abi, TogglesAreInTheLibrarysToggleTable) {
  const std::string lib = read_file(dawn_library());
  ASSERT_GT(lib.size(), 1000000u);
  auto has = [&](const std::string& name) { return lib.find(std::string(1, '\0') + name + '\0') != std::string::npos; };
#define WGTRAIN_ABI_TOGGLE(name, text) EXPECT_TRUE(has(text)) << text;
  WGPU_ABI_TOGGLES(WGTRAIN_ABI_TOGGLE)
#undef WGTRAIN_ABI_TOGGLE
  EXPECT_FALSE(has("no_such_toggle_name"));
}

// The toggles descriptor and the instance descriptor as the library reads them: allow_unsafe_apis (an instance
// toggle) chained to a new instance's descriptor exposes features the plain adapter lacks (Dawn guards experimental
// ones with it), and the same name also in the disabled list takes them away again (disabled wins). A layout off by
// a member would read a count as a pointer, or miss a list.
TEST(Abi, TheTogglesDescriptorReachesTheLibrary) {
  auto& dev = wgtrain::detail::webgpu_backend(*wgtrain::test::device().impl().backend);
  const auto& info = wgtrain::test::device().info();
  const uint32_t backend = info.backend == wgtrain::Backend::WebGpuVulkan   ? ours::WGPUBackendType_Vulkan
                           : info.backend == wgtrain::Backend::WebGpuOpenGL ? ours::WGPUBackendType_OpenGL
                                                                             : ours::WGPUBackendType_OpenGLES;
  auto features = [&](const ours::WGPUChainedStruct* chain) {
    struct Req {
      bool done = false;
      ours::WGPUAdapter adapter = nullptr;
    } req;
    ours::WGPUInstanceDescriptor id{};
    id.nextInChain = chain;
    ours::WGPUInstance instance = dev.api.CreateInstance(&id);
    std::set<uint32_t> out;
    if (!instance) return out;
    ours::WGPURequestAdapterOptions ro{};
    ro.featureLevel = info.compatibility_mode ? ours::WGPUFeatureLevel_Compatibility : ours::WGPUFeatureLevel_Core;
    ro.powerPreference = ours::WGPUPowerPreference_HighPerformance;
    ro.backendType = backend;
    ours::WGPURequestAdapterCallbackInfo ci{};
    ci.mode = ours::WGPUCallbackMode_AllowProcessEvents;
    ci.callback = [](uint32_t, ours::WGPUAdapter a, ours::WGPUStringView, void* ud1, void*) {
      auto* r = static_cast<Req*>(ud1);
      r->adapter = a;
      r->done = true;
    };
    ci.userdata1 = &req;
    dev.api.InstanceRequestAdapter(instance, &ro, ci);
    while (!req.done) dev.api.InstanceProcessEvents(instance);
    if (req.adapter) {
      ours::WGPUSupportedFeatures sf{};
      dev.api.AdapterGetFeatures(req.adapter, &sf);
      out.insert(sf.features, sf.features + sf.featureCount);
      dev.api.SupportedFeaturesFreeMembers(sf);
      dev.api.AdapterRelease(req.adapter);
    }
    dev.api.InstanceRelease(instance);
    return out;
  };
  const char* const unsafe[] = {ours::kToggleAllowUnsafeApis};
  ours::WGPUDawnTogglesDescriptor enabled{};
  enabled.chain.sType = ours::WGPUSType_DawnTogglesDescriptor;
  enabled.enabledToggleCount = 1;
  enabled.enabledToggles = unsafe;
  ours::WGPUDawnTogglesDescriptor both = enabled;
  both.disabledToggleCount = 1;
  both.disabledToggles = unsafe;
  const std::set<uint32_t> plain = features(nullptr), with = features(&enabled.chain), off = features(&both.chain);
  ASSERT_FALSE(plain.empty());
  if (with == plain) GTEST_SKIP() << "allow_unsafe_apis exposes no further feature on " << info.name;
  EXPECT_GT(with.size(), plain.size());
  EXPECT_TRUE(std::includes(with.begin(), with.end(), plain.begin(), plain.end()));
  EXPECT_EQ(off, plain);
}

// A few constants as the live library uses them.
TEST(Abi, ConstantsMatchTheLiveLibrary) {
  auto& dev = wgtrain::detail::webgpu_backend(*wgtrain::test::device().impl().backend);
  // WGPUStatus_Success is what a successful limits query returns.
  ours::WGPULimits l{};
  EXPECT_EQ(dev.api.DeviceGetLimits(dev.device, &l), ours::WGPUStatus_Success);
  EXPECT_GT(l.maxComputeInvocationsPerWorkgroup, 0u);
  // The adapter type the library reports is one of the four constants.
  ours::WGPUAdapterInfo info{};
  ASSERT_EQ(dev.api.AdapterGetInfo(dev.adapter, &info), ours::WGPUStatus_Success);
  const std::set<uint32_t> types = {ours::WGPUAdapterType_DiscreteGPU, ours::WGPUAdapterType_IntegratedGPU,
                                    ours::WGPUAdapterType_CPU, ours::WGPUAdapterType_Unknown};
  EXPECT_TRUE(types.count(info.adapterType)) << "adapter type " << info.adapterType;
  dev.api.AdapterInfoFreeMembers(info);
  // Every feature the adapter offers has a name in the header's numbering (a renumbering would show here).
  for (uint32_t f : wgtrain::test::device().features().adapter_raw)
    EXPECT_FALSE(wgtrain::gpu::feature_name(f).empty()) << "feature " << f;
}

TEST(Abi, TheBrowserTableNumbersFeaturesAsWeDo) {
  const std::string js = read_file(kWebTable);
  const auto begin = js.find("features: {");
  ASSERT_NE(begin, std::string::npos) << kWebTable;
  const std::string table = js.substr(begin, js.find('}', begin) - begin);
  std::map<std::string, uint32_t> got;
  const std::regex entry(R"re('([a-z0-9-]+)': (0x[0-9A-Fa-f]+|\d+))re");
  for (std::sregex_iterator it(table.begin(), table.end(), entry), end; it != end; ++it)
    got[(*it)[1]] = static_cast<uint32_t>(std::stoul((*it)[2], nullptr, 0));
  const std::map<std::string, uint32_t> want = {{"timestamp-query", ours::WGPUFeatureName_TimestampQuery},
                                                {"shader-f16", ours::WGPUFeatureName_ShaderF16},
                                                {"subgroups", ours::WGPUFeatureName_Subgroups},
                                                {"chromium-experimental-subgroup-matrix",
                                                 ours::WGPUFeatureName_SubgroupMatrix}};
  EXPECT_EQ(got, want);
  for (const auto& [name, value] : want) EXPECT_EQ(wgtrain::gpu::feature_name(value), name);
}

TEST(Abi, HeaderIsFullyChecked) {
  const std::string header = read_file(kAbiHeader);
  ASSERT_FALSE(header.empty());
  std::set<std::string> checked;
  for (const auto& s : our_structs()) checked.insert(s.name);
  const std::regex decl(R"(\nstruct (WGPU\w+) \{)");
  int found = 0;
  for (std::sregex_iterator it(header.begin(), header.end(), decl), end; it != end; ++it) {
    ++found;
    EXPECT_TRUE(checked.count((*it)[1])) << "struct " << (*it)[1] << " is declared but not checked";
  }
  EXPECT_EQ(found, static_cast<int>(checked.size()));
  // Constants can only be declared through WGPU_ABI_ENUMS, which the tests above walk; catch any other.
  const std::regex stray(R"(constexpr uint32_t (WGPU[A-Z][A-Za-z0-9]+_\w+))");
  for (std::sregex_iterator it(header.begin(), header.end(), stray), end; it != end; ++it)
    ADD_FAILURE() << "constant " << (*it)[1] << " is declared outside WGPU_ABI_ENUMS";
}

TEST(Abi, AMismatchIsDetected) {
  // The checks above must see a wrong layout: our declarations with one struct laid out wrongly, through the same
  // comparison: exactly the planted differences are reported, and nothing else.
  const auto members = header_members();
  ASSERT_TRUE(struct_mismatches(our_structs(), members).empty()) << "the real layouts must agree first";
  std::vector<StructLayout> wrong = our_structs();
  auto it = std::find_if(wrong.begin(), wrong.end(), [](const StructLayout& s) { return s.name == "WGPUBufferDescriptor"; });
  ASSERT_NE(it, wrong.end());
  // As if `usage` were declared a 32-bit field, with `size` after it packed to a 4-byte boundary.
  auto field = [&](const char* name) -> FieldLayout& {
    for (auto& f : it->fields)
      if (f.name == name) return f;
    throw std::runtime_error(std::string("no member ") + name);
  };
  field("usage").size = 4;
  field("size").offset -= 4;
  const auto found = struct_mismatches(wrong, members);
  ASSERT_EQ(found.size(), 2u) << joined(found);
  EXPECT_NE(found[0].find("WGPUBufferDescriptor::usage of size 4, the header's 8"), std::string::npos) << found[0];
  EXPECT_NE(found[1].find("WGPUBufferDescriptor::size at offset"), std::string::npos) << found[1];
  // A member left out (the old Dawn's instance descriptor had one member fewer), and a struct the header lacks.
  wrong = our_structs();
  auto inst = std::find_if(wrong.begin(), wrong.end(), [](const StructLayout& s) { return s.name == "WGPUInstanceDescriptor"; });
  ASSERT_NE(inst, wrong.end());
  inst->fields.pop_back();
  wrong.push_back({"WGPUNoSuchStruct", 8, 8, {}});
  const auto missing = struct_mismatches(wrong, members);
  ASSERT_EQ(missing.size(), 2u) << joined(missing);
  EXPECT_NE(missing[0].find("WGPUInstanceDescriptor's members differ"), std::string::npos) << missing[0];
  EXPECT_NE(missing[1].find("WGPUNoSuchStruct is not in the header"), std::string::npos) << missing[1];

  // And a wrong constant: the old Dawn's 3 for timestamp-query.
  std::vector<EnumConstant> constants = our_constants();
  ASSERT_TRUE(constant_mismatches(constants).empty());
  auto ts = std::find_if(constants.begin(), constants.end(),
                         [](const EnumConstant& c) { return std::string(c.name) == "WGPUFeatureName_TimestampQuery"; });
  ASSERT_NE(ts, constants.end());
  ts->value = 3;
  const auto bad = constant_mismatches(constants);
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_EQ(bad[0], "WGPUFeatureName_TimestampQuery = 3, the header's 9");
}

}  // namespace
