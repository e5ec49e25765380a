// The WebGPU ABI check: every struct and enum constant wgtrain declares (src/gpu/webgpu_abi.h) against the pinned
// Dawn library itself.
//   structs:   the library's DWARF, read with pahole: each member's name, offset and size, and the total size;
//              the three the DWARF lacks (Dawn's own chained structs: only the wrapper's C imports have debug
//              info) against the library's machine code: Dawn's mirror of each has an operator== comparing every
//              member but the chain's sType, whose disassembly gives each member's offset and width; and the toggles
//              descriptor also by behaviour (an enabled toggle shows, the same toggle also disabled does not);
//   constants: the enum tables of the JavaScript bindings built against the same library (bun-webgpu@0.1.7);
//   the rest:  the few constants those tables lack are checked by how the live library behaves, or, for the
//              subgroup-matrix component types, by the set of values the library's validator accepts;
//   toggles:   each name is a string of the library's toggle table.
// A struct or constant added to the header without an entry here fails HeaderIsFullyChecked.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/device_impl.h"
#include "gpu/webgpu_backend.h"
#include "gpu/webgpu_abi.h"
#include "support/test_support.h"

namespace {

using namespace wgtrain::webgpu;

struct FieldLayout {
  std::string name;
  size_t offset, size;
};
struct StructLayout {
  std::string name;
  size_t size;
  std::vector<FieldLayout> fields;
};

#define FIELD(T, f) FieldLayout{#f, offsetof(T, f), sizeof(T::f)}
#define STRUCT(T, ...) StructLayout{#T, sizeof(T), {__VA_ARGS__}}

// Every struct of webgpu_abi.h, member by member. WGPUShaderSourceWGSL is checked separately (not in the DWARF).
const std::vector<StructLayout>& our_structs() {
  static const std::vector<StructLayout> s = {
      STRUCT(WGPUStringView, FIELD(WGPUStringView, data), FIELD(WGPUStringView, length)),
      STRUCT(WGPUChainedStruct, FIELD(WGPUChainedStruct, next), FIELD(WGPUChainedStruct, sType)),
      STRUCT(WGPUFuture, FIELD(WGPUFuture, id)),
      STRUCT(WGPUInstanceCapabilities, FIELD(WGPUInstanceCapabilities, nextInChain),
             FIELD(WGPUInstanceCapabilities, timedWaitAnyEnable), FIELD(WGPUInstanceCapabilities, timedWaitAnyMaxCount)),
      STRUCT(WGPUInstanceDescriptor, FIELD(WGPUInstanceDescriptor, nextInChain),
             FIELD(WGPUInstanceDescriptor, capabilities)),
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
  };
  return s;
}

// The structs the DWARF lacks, with the symbol of Dawn's member-by-member operator== for each.
struct MachineCodeStruct {
  StructLayout ours;
  const char* eq_symbol;
};
const std::vector<MachineCodeStruct>& machine_code_structs() {
  static const std::vector<MachineCodeStruct> s = {
      {STRUCT(WGPUDawnTogglesDescriptor, FIELD(WGPUDawnTogglesDescriptor, chain),
              FIELD(WGPUDawnTogglesDescriptor, enabledToggleCount), FIELD(WGPUDawnTogglesDescriptor, enabledToggles),
              FIELD(WGPUDawnTogglesDescriptor, disabledToggleCount),
              FIELD(WGPUDawnTogglesDescriptor, disabledToggles)),
       "_ZNK4dawn6native21DawnTogglesDescriptoreqERKS1_"},
      {STRUCT(WGPUAdapterPropertiesSubgroupMatrixConfigs, FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, chain),
              FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, configCount),
              FIELD(WGPUAdapterPropertiesSubgroupMatrixConfigs, configs)),
       "_ZNK4dawn6native38AdapterPropertiesSubgroupMatrixConfigseqERKS1_"},
      {STRUCT(WGPUSubgroupMatrixConfig, FIELD(WGPUSubgroupMatrixConfig, componentType),
              FIELD(WGPUSubgroupMatrixConfig, resultComponentType), FIELD(WGPUSubgroupMatrixConfig, M),
              FIELD(WGPUSubgroupMatrixConfig, N), FIELD(WGPUSubgroupMatrixConfig, K)),
       "_ZNK4dawn6native20SubgroupMatrixConfigeqERKS1_"},
  };
  return s;
}

std::string run_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return {};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// pahole's view of each struct: members in order, with offsets and sizes.
std::map<std::string, StructLayout> dwarf_structs() {
  std::string classes;
  for (const auto& s : our_structs()) classes += (classes.empty() ? "" : ",") + ("cimport.struct_" + s.name);
  const std::string out =
      run_command("pahole -C " + classes + " '" + std::string(WGTRAIN_DAWN_LIBRARY_PATH) + "' 2>&1");
  std::map<std::string, StructLayout> result;
  std::istringstream in(out);
  std::string line;
  StructLayout* cur = nullptr;
  const std::regex head(R"(^struct cimport\.struct_(\w+) \{)");
  const std::regex member(R"(^\s+.*?[\s\*](\w+)(\[\d+\])?\s*(__attribute__\(\(.*\)\))?;\s*/\*\s*(\d+)\s+(\d+)\s*\*/)");
  const std::regex size(R"(/\* size: (\d+),)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, head)) {
      cur = &result[m[1]];
      cur->name = m[1];
    } else if (cur && std::regex_search(line, m, member)) {
      cur->fields.push_back({m[1], std::stoul(m[4]), std::stoul(m[5])});
    } else if (cur && std::regex_search(line, m, size)) {
      cur->size = std::stoul(m[1]);
      cur = nullptr;
    }
  }
  return result;
}

// The JS bindings' enum tables: "var NAME = {" or "var NAME = defineEnum({", entries `key: N` or `key: 1 << N`.
std::map<std::string, std::map<std::string, uint64_t>> js_enum_tables() {
  std::map<std::string, std::map<std::string, uint64_t>> tables;
  std::istringstream in(read_file(WGTRAIN_DAWN_JS_PATH));
  const std::regex open(R"(^var (\w+) = (defineEnum\()?\{$)");
  const std::regex entry(R"re(^\s*"?([\w-]+)"?:\s*(\d+)(\s*<<\s*(\d+))?,?$)re");
  std::string line, table;
  std::smatch m;
  while (std::getline(in, line)) {
    if (table.empty()) {
      if (std::regex_search(line, m, open)) table = m[1];
    } else if (line.rfind("}", 0) == 0) {
      table.clear();
    } else if (std::regex_search(line, m, entry)) {
      uint64_t v = std::stoull(m[2]);
      if (m[4].matched) v <<= std::stoul(m[4]);
      tables[table][m[1]] = v;
    }
  }
  return tables;
}

struct EnumConstant {
  const char* name;
  uint32_t value;
  const char* source;
  const char* key;
};

const std::vector<EnumConstant>& our_constants() {
#define WGTRAIN_ABI_CONSTANT(name, value, source, key) EnumConstant{#name, name, source, key},
  static const std::vector<EnumConstant> c = {WGPU_ABI_ENUMS(WGTRAIN_ABI_CONSTANT)};
#undef WGTRAIN_ABI_CONSTANT
  return c;
}

TEST(Abi, PaholeReadsTheLibrary) {
  ASSERT_FALSE(run_command("command -v pahole").empty()) << "pahole (Debian: dwarves) is needed; run scripts/setup.sh";
  const auto dwarf = dwarf_structs();
  ASSERT_FALSE(dwarf.empty()) << "pahole printed no struct of " << WGTRAIN_DAWN_LIBRARY_PATH;
}

// The comparison of our layouts with the library's: one line per difference (none: they agree).
std::vector<std::string> struct_mismatches(const std::vector<StructLayout>& ours_all,
                                           const std::map<std::string, StructLayout>& dwarf) {
  std::vector<std::string> out;
  for (const auto& ours : ours_all) {
    auto it = dwarf.find(ours.name);
    if (it == dwarf.end()) {
      out.push_back(ours.name + " is not in the library's DWARF");
      continue;
    }
    const StructLayout& lib = it->second;
    if (ours.size != lib.size)
      out.push_back("sizeof(" + ours.name + ") = " + std::to_string(ours.size) + ", the library's " +
                    std::to_string(lib.size));
    if (ours.fields.size() != lib.fields.size()) {
      out.push_back(ours.name + " has " + std::to_string(ours.fields.size()) + " members, the library's " +
                    std::to_string(lib.fields.size()));
      continue;
    }
    for (size_t i = 0; i < ours.fields.size(); ++i) {
      const FieldLayout &o = ours.fields[i], &l = lib.fields[i];
      if (o.name != l.name) out.push_back(ours.name + " member " + std::to_string(i) + " is " + o.name + ", the library's " + l.name);
      if (o.offset != l.offset)
        out.push_back(ours.name + "::" + o.name + " at offset " + std::to_string(o.offset) + ", the library's " +
                      std::to_string(l.offset));
      if (o.size != l.size)
        out.push_back(ours.name + "::" + o.name + " of size " + std::to_string(o.size) + ", the library's " +
                      std::to_string(l.size));
    }
  }
  return out;
}

// The same for the constants that have a table in the bindings ("js:TABLE").
std::vector<std::string> constant_mismatches(const std::vector<EnumConstant>& constants,
                                             const std::map<std::string, std::map<std::string, uint64_t>>& tables,
                                             int* checked = nullptr) {
  std::vector<std::string> out;
  for (const auto& c : constants) {
    const std::string source = c.source;
    if (source.rfind("js:", 0) != 0) continue;
    auto t = tables.find(source.substr(3));
    if (t == tables.end()) {
      out.push_back(std::string(c.name) + ": no table " + source);
      continue;
    }
    auto e = t->second.find(c.key);
    if (e == t->second.end()) {
      out.push_back(std::string(c.name) + ": no key " + c.key + " in " + source);
      continue;
    }
    if (c.value != e->second)
      out.push_back(std::string(c.name) + " = " + std::to_string(c.value) + " but the library's " + source + "[" +
                    c.key + "] = " + std::to_string(e->second));
    if (checked) ++*checked;
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "\n  " + l;
  return s;
}

TEST(Abi, EveryStructMatchesTheLibraryDwarf) {
  const auto dwarf = dwarf_structs();
  ASSERT_FALSE(dwarf.empty());
  const auto wrong = struct_mismatches(our_structs(), dwarf);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differences:" << joined(wrong);
}

// The memory operands of `cmp %reg,OFF(%rdi)` in a function's disassembly: (offset, width) in order; width from
// the register (%r..: 8 bytes, %e..: 4).
std::vector<std::pair<size_t, size_t>> compared_members(const std::string& symbol) {
  const std::string out = run_command("objdump -d --no-show-raw-insn --disassemble=" + symbol + " '" +
                                      std::string(WGTRAIN_DAWN_LIBRARY_PATH) + "' 2>&1");
  std::vector<std::pair<size_t, size_t>> found;
  const std::regex cmp(R"(\bcmp\s+%([re])[a-z0-9]+,(0x[0-9a-f]+)?\(%rdi\))");
  for (std::sregex_iterator it(out.begin(), out.end(), cmp), end; it != end; ++it)
    found.emplace_back((*it)[2].matched ? std::stoul((*it)[2].str(), nullptr, 16) : 0, (*it)[1] == "r" ? 8 : 4);
  return found;
}

// Our layout as that operator== walks it: each member's offset and size, a chain as its next pointer alone.
std::vector<std::pair<size_t, size_t>> expected_compares(const StructLayout& s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& f : s.fields) out.emplace_back(f.offset, f.name == "chain" ? sizeof(void*) : f.size);
  return out;
}

std::vector<std::string> machine_code_mismatches(const std::vector<MachineCodeStruct>& structs) {
  std::vector<std::string> out;
  auto text = [](const std::vector<std::pair<size_t, size_t>>& v) {
    std::string t;
    for (const auto& [o, w] : v) t += " " + std::to_string(o) + ":" + std::to_string(w);
    return t;
  };
  for (const auto& m : structs) {
    const auto lib = compared_members(m.eq_symbol);
    const auto ours = expected_compares(m.ours);
    if (lib != ours) out.push_back(m.ours.name + ": members (offset:bytes)" + text(ours) + ", the library's" + text(lib));
    // The size: the last member's end, rounded up to the widest member's alignment.
    size_t align = 1, end = 0;
    for (const auto& f : m.ours.fields) {
      align = std::max(align, std::min<size_t>(f.size, 8));
      end = std::max(end, f.offset + f.size);
    }
    if (!lib.empty() && m.ours.size != (lib.back().first + lib.back().second + align - 1) / align * align)
      out.push_back("sizeof(" + m.ours.name + ") = " + std::to_string(m.ours.size) + ", the library's members end at " +
                    std::to_string(lib.back().first + lib.back().second));
  }
  return out;
}

TEST(Abi, StructsOutsideTheDwarfMatchTheLibrarysMachineCode) {
  ASSERT_FALSE(run_command("command -v objdump").empty()) << "objdump (Debian: binutils) is needed";
  for (const auto& m : machine_code_structs()) ASSERT_FALSE(compared_members(m.eq_symbol).empty()) << m.eq_symbol;
  const auto wrong = machine_code_mismatches(machine_code_structs());
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differences:" << joined(wrong);
  // And the check sees a wrong layout: the two counts swapped with their pointers.
  std::vector<MachineCodeStruct> planted = machine_code_structs();
  std::swap(planted[0].ours.fields[1].offset, planted[0].ours.fields[2].offset);
  const auto found = machine_code_mismatches(planted);
  ASSERT_EQ(found.size(), 1u) << joined(found);
  EXPECT_NE(found[0].find("WGPUDawnTogglesDescriptor: members"), std::string::npos) << found[0];
}

TEST(Abi, TogglesAreInTheLibrarysToggleTable) {
  const std::string lib = read_file(WGTRAIN_DAWN_LIBRARY_PATH);
  ASSERT_GT(lib.size(), 1000000u);
  auto has = [&](const std::string& name) { return lib.find(std::string(1, '\0') + name + '\0') != std::string::npos; };
#define WGTRAIN_ABI_TOGGLE(name, text) EXPECT_TRUE(has(text)) << text;
  WGPU_ABI_TOGGLES(WGTRAIN_ABI_TOGGLE)
#undef WGTRAIN_ABI_TOGGLE
  // Dawn's toggle for f16 on NVIDIA's Vulkan driver is newer than the pinned library: when a new pin has it, it
  // belongs in WGPU_ABI_TOGGLES and in open_webgpu's device toggles.
  EXPECT_FALSE(has("vulkan_enable_f16_on_nvidia")) << "the pinned library now has vulkan_enable_f16_on_nvidia";
}

// The toggles descriptor as the library reads it: on the adapter of the test device's API, allow_unsafe_apis in the
// enabled list exposes features the default adapter lacks (Dawn guards experimental ones with it), and the same
// name also in the disabled list takes them away again (disabled wins). A layout off by a member would read a count
// as a pointer, or miss a list.
TEST(Abi, TheTogglesDescriptorReachesTheLibrary) {
  auto& dev = wgtrain::detail::webgpu_backend(*wgtrain::test::device().impl().backend);
  const auto& info = wgtrain::test::device().info();
  const uint32_t backend = info.backend == wgtrain::Backend::WebGpuVulkan   ? WGPUBackendType_Vulkan
                           : info.backend == wgtrain::Backend::WebGpuOpenGL ? WGPUBackendType_OpenGL
                                                                             : WGPUBackendType_OpenGLES;
  auto features = [&](const WGPUChainedStruct* chain) {
    struct Req {
      bool done = false;
      WGPUAdapter adapter = nullptr;
    } req;
    WGPURequestAdapterOptions ro{};
    ro.nextInChain = chain;
    ro.featureLevel = info.compatibility_mode ? WGPUFeatureLevel_Compatibility : WGPUFeatureLevel_Core;
    ro.powerPreference = WGPUPowerPreference_HighPerformance;
    ro.backendType = backend;
    WGPURequestAdapterCallbackInfo ci{};
    ci.mode = WGPUCallbackMode_AllowProcessEvents;
    ci.callback = [](uint32_t, WGPUAdapter a, WGPUStringView, void* ud1, void*) {
      auto* r = static_cast<Req*>(ud1);
      r->adapter = a;
      r->done = true;
    };
    ci.userdata1 = &req;
    dev.api.InstanceRequestAdapter(dev.instance, &ro, ci);
    while (!req.done) dev.api.InstanceProcessEvents(dev.instance);
    std::set<uint32_t> out;
    if (!req.adapter) return out;
    WGPUSupportedFeatures sf{};
    dev.api.AdapterGetFeatures(req.adapter, &sf);
    out.insert(sf.features, sf.features + sf.featureCount);
    dev.api.SupportedFeaturesFreeMembers(sf);
    dev.api.AdapterRelease(req.adapter);
    return out;
  };
  const char* const unsafe[] = {kToggleAllowUnsafeApis};
  WGPUDawnTogglesDescriptor enabled{};
  enabled.chain.sType = WGPUSType_DawnTogglesDescriptor;
  enabled.enabledToggleCount = 1;
  enabled.enabledToggles = unsafe;
  WGPUDawnTogglesDescriptor both = enabled;
  both.disabledToggleCount = 1;
  both.disabledToggles = unsafe;
  const std::set<uint32_t> plain = features(nullptr), with = features(&enabled.chain), off = features(&both.chain);
  ASSERT_FALSE(plain.empty());
  // On llvmpipe (CI) the toggle exposes two more features; an adapter where it exposes none cannot show the
  // descriptor working this way (the machine-code test above still checks its layout).
  if (with == plain) GTEST_SKIP() << "allow_unsafe_apis exposes no further feature on " << info.name;
  EXPECT_GT(with.size(), plain.size());
  EXPECT_TRUE(std::includes(with.begin(), with.end(), plain.begin(), plain.end()));
  EXPECT_EQ(off, plain);
}

TEST(Abi, ShaderSourceWgslMatchesTheBindingsDefinition) {
  // Not in the DWARF: the bindings define it as exactly {chain: ChainedStruct, code: StringView}.
  const std::string js = read_file(WGTRAIN_DAWN_JS_PATH);
  EXPECT_NE(js.find("var WGPUShaderSourceWGSLStruct = defineStruct([\n  [\"chain\", WGPUChainedStructStruct],\n"
                    "  [\"code\", WGPUStringView]\n]);"),
            std::string::npos);
  EXPECT_EQ(offsetof(WGPUShaderSourceWGSL, chain), 0u);
  EXPECT_EQ(offsetof(WGPUShaderSourceWGSL, code), sizeof(WGPUChainedStruct));
  EXPECT_EQ(sizeof(WGPUShaderSourceWGSL), sizeof(WGPUChainedStruct) + sizeof(WGPUStringView));
}

TEST(Abi, EveryConstantMatchesTheBindingsEnumTables) {
  const auto tables = js_enum_tables();
  ASSERT_GT(tables.size(), 10u) << "could not read enum tables from " << WGTRAIN_DAWN_JS_PATH;
  int checked = 0;
  const auto wrong = constant_mismatches(our_constants(), tables, &checked);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " differences:" << joined(wrong);
  EXPECT_GT(checked, 40);
}

TEST(Abi, ConstantsWithoutATableMatchTheLiveLibrary) {
  auto& dev = wgtrain::detail::webgpu_backend(*wgtrain::test::device().impl().backend);
  int others = 0;
  for (const auto& c : our_constants())
    if (std::string(c.source) == "header") ++others;
  EXPECT_EQ(others, 9) << "a new 'header' constant needs a behavioural check here";
  // The subgroup-matrix component types: the library's validator of them accepts exactly the four values declared
  // (its compare chain, disassembled); which is which follows the published header, as the library has no table.
  const std::string v = run_command("objdump -d --no-show-raw-insn "
                                    "--disassemble=_ZN4dawn6native35ValidateSubgroupMatrixComponentTypeEN4wgpu27"
                                    "SubgroupMatrixComponentTypeE '" + std::string(WGTRAIN_DAWN_LIBRARY_PATH) + "'");
  std::set<uint32_t> accepted;
  const std::regex imm(R"(\bcmp\s+\$0x([0-9a-f]+),%esi)");
  for (std::sregex_iterator it(v.begin(), v.end(), imm), end; it != end; ++it)
    accepted.insert(static_cast<uint32_t>(std::stoul((*it)[1].str(), nullptr, 16)));
  EXPECT_EQ(accepted, (std::set<uint32_t>{WGPUSubgroupMatrixComponentType_F32, WGPUSubgroupMatrixComponentType_F16,
                                          WGPUSubgroupMatrixComponentType_U32, WGPUSubgroupMatrixComponentType_I32}));
  // WGPUStatus_Success is what a successful limits query returns.
  WGPULimits l{};
  EXPECT_EQ(dev.api.DeviceGetLimits(dev.device, &l), WGPUStatus_Success);
  EXPECT_GT(l.maxComputeInvocationsPerWorkgroup, 0u);
  // The adapter type the library reports is one of the four constants.
  WGPUAdapterInfo info{};
  ASSERT_EQ(dev.api.AdapterGetInfo(dev.adapter, &info), WGPUStatus_Success);
  const std::set<uint32_t> types = {WGPUAdapterType_DiscreteGPU, WGPUAdapterType_IntegratedGPU, WGPUAdapterType_CPU,
                                    WGPUAdapterType_Unknown};
  EXPECT_TRUE(types.count(info.adapterType)) << "adapter type " << info.adapterType;
  dev.api.AdapterInfoFreeMembers(info);
}

TEST(Abi, HeaderIsFullyChecked) {
  const std::string header = read_file(WGTRAIN_ABI_HEADER);
  ASSERT_FALSE(header.empty());
  std::set<std::string> checked;
  for (const auto& s : our_structs()) checked.insert(s.name);
  for (const auto& m : machine_code_structs()) checked.insert(m.ours.name);
  checked.insert("WGPUShaderSourceWGSL");
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
  // The checks above must see a wrong layout. Our declarations, with one struct laid out wrongly, through the same
  // comparison against the same DWARF: exactly the planted differences are reported, and nothing else.
  const auto dwarf = dwarf_structs();
  ASSERT_TRUE(dwarf.count("WGPUBufferDescriptor"));
  ASSERT_TRUE(struct_mismatches(our_structs(), dwarf).empty()) << "the real layouts must agree first";
  std::vector<StructLayout> wrong = our_structs();
  auto it = std::find_if(wrong.begin(), wrong.end(), [](const StructLayout& s) { return s.name == "WGPUBufferDescriptor"; });
  ASSERT_NE(it, wrong.end());
  // As if `usage` were declared a 32-bit field, with `size` after it packed to a 4-byte boundary: a header that
  // read WGPUBufferUsage as uint32_t (the newer header's is 64-bit) would be laid out so.
  auto field = [&](const char* name) -> FieldLayout& {
    for (auto& f : it->fields)
      if (f.name == name) return f;
    throw std::runtime_error(std::string("no member ") + name);
  };
  field("usage").size = 4;
  field("size").offset -= 4;
  const auto found = struct_mismatches(wrong, dwarf);
  ASSERT_EQ(found.size(), 2u) << joined(found);
  EXPECT_NE(found[0].find("WGPUBufferDescriptor::usage of size 4, the library's 8"), std::string::npos) << found[0];
  EXPECT_NE(found[1].find("WGPUBufferDescriptor::size at offset"), std::string::npos) << found[1];
  // A member missing, and a struct the library does not have.
  wrong = our_structs();
  wrong[0].fields.pop_back();
  wrong.push_back({"WGPUNoSuchStruct", 8, {}});
  const auto missing = struct_mismatches(wrong, dwarf);
  ASSERT_EQ(missing.size(), 2u) << joined(missing);
  EXPECT_NE(missing[0].find("members, the library's"), std::string::npos) << missing[0];
  EXPECT_NE(missing[1].find("WGPUNoSuchStruct is not in the library's DWARF"), std::string::npos) << missing[1];

  // And a wrong constant through the table check: the newer header's 0x9 for timestamp-query.
  const auto tables = js_enum_tables();
  std::vector<EnumConstant> constants = our_constants();
  ASSERT_TRUE(constant_mismatches(constants, tables).empty());
  auto ts = std::find_if(constants.begin(), constants.end(),
                         [](const EnumConstant& c) { return std::string(c.key) == "timestamp-query"; });
  ASSERT_NE(ts, constants.end());
  ts->value = 0x9;
  const auto bad = constant_mismatches(constants, tables);
  ASSERT_EQ(bad.size(), 1u) << joined(bad);
  EXPECT_NE(bad[0].find(std::string(ts->name) + " = 9 but the library's js:WGPUFeatureNameDef[timestamp-query] = "),
            std::string::npos)
      << bad[0];
}

}  // namespace
