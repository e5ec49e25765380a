// The native Vulkan backend: device choice, buffers, the GLSL kernels' pipelines (push constants and push
// descriptors), command buffers in flight, barriers where the data flow needs them, transfers, timing.
//
// Barriers: every command declares the buffers it reads and writes (a kernel's writes are its bindings without the
// SPIR-V NonWritable decoration). A barrier goes in only when a command touches a buffer written since the last
// barrier, or writes one read since then; independent commands (the weight gradients of q, k and v reading one
// input, say) run without one between them.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_set>

#include "gpu/backend.h"
#include "gpu/device_impl.h"
#include "gpu/spirv.h"
#include "gpu/vk_api.h"
#include "wgtrain/error.h"

namespace wgtrain::detail {

namespace {

using vk::Api;

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

// Largest single transfer through the staging buffer.
constexpr uint64_t kStagingChunk = uint64_t{64} << 20;
// Writes up to this size go inside the command buffer (vkCmdUpdateBuffer, 64 KiB a command).
constexpr uint64_t kInlineUpload = uint64_t{256} << 10;
constexpr size_t kMaxDispatchesPerBatch = 1024;
constexpr uint32_t kPushBytes = 128;  // the push-constant range every pipeline layout has (Vulkan's minimum)

struct VkBuf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t bytes = 0;
};
VkBuf& buf(BufferHandle b) { return *reinterpret_cast<VkBuf*>(b); }

// What a kernel's SPIR-V says about its interface: the storage bindings (0..n-1) and which of them it writes.
struct Interface {
  uint32_t bindings = 0;
  std::vector<bool> writable;
};

Interface reflect(std::span<const uint32_t> code, const std::string& label) {
  enum : uint32_t {
    OpTypeStruct = 30, OpTypePointer = 32, OpVariable = 59, OpDecorate = 71, OpMemberDecorate = 72,
    DecorationNonWritable = 24, DecorationBinding = 33, StorageClassUniform = 2, StorageClassStorageBuffer = 12
  };
  if (code.size() < 5 || code[0] != 0x07230203u) throw Error("kernel " + label + ": not a SPIR-V module");
  std::map<uint32_t, uint32_t> binding_of;          // variable -> binding
  std::unordered_set<uint32_t> nonwritable;         // variables decorated NonWritable
  std::map<uint32_t, std::vector<bool>> member_ro;  // struct -> members decorated NonWritable
  std::map<uint32_t, size_t> struct_members;        // struct -> member count
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> pointer;  // pointer type -> (storage class, pointee)
  std::vector<std::pair<uint32_t, uint32_t>> variables;       // (variable, pointer type)
  for (size_t i = 5; i < code.size();) {
    const uint32_t op = code[i] & 0xFFFFu, n = code[i] >> 16;
    if (n == 0 || i + n > code.size()) throw Error("kernel " + label + ": malformed SPIR-V");
    const uint32_t* w = &code[i];
    if (op == OpDecorate && n >= 3) {
      if (w[2] == DecorationBinding && n >= 4) binding_of[w[1]] = w[3];
      if (w[2] == DecorationNonWritable) nonwritable.insert(w[1]);
    } else if (op == OpMemberDecorate && n >= 4 && w[3] == DecorationNonWritable) {
      auto& v = member_ro[w[1]];
      if (v.size() <= w[2]) v.resize(w[2] + 1, false);
      v[w[2]] = true;
    } else if (op == OpTypeStruct) {
      struct_members[w[1]] = n - 2;
    } else if (op == OpTypePointer && n >= 4) {
      pointer[w[1]] = {w[2], w[3]};
    } else if (op == OpVariable && n >= 4) {
      variables.emplace_back(w[2], w[1]);
    }
    i += n;
  }
  Interface f;
  std::map<uint32_t, bool> writes;
  for (const auto& [var, ptr] : variables) {
    auto b = binding_of.find(var);
    auto p = pointer.find(ptr);
    if (b == binding_of.end() || p == pointer.end()) continue;
    if (p->second.first != StorageClassStorageBuffer && p->second.first != StorageClassUniform) continue;
    bool ro = nonwritable.count(var) != 0;
    if (!ro) {
      const auto m = member_ro.find(p->second.second);
      const auto count = struct_members.find(p->second.second);
      ro = m != member_ro.end() && count != struct_members.end() && m->second.size() == count->second &&
           std::all_of(m->second.begin(), m->second.end(), [](bool x) { return x; });
    }
    writes[b->second] = !ro;
  }
  for (const auto& [b, w] : writes) f.bindings = std::max(f.bindings, b + 1);
  f.writable.assign(f.bindings, true);
  for (const auto& [b, w] : writes) f.writable[b] = w;
  return f;
}

// Whether a variant's conditions ("KEY=value KEY=value") hold for the host's defs.
bool serves(std::string_view when, const KernelDefs& defs) {
  size_t at = 0;
  while (at < when.size()) {
    while (at < when.size() && when[at] == ' ') ++at;
    size_t end = when.find(' ', at);
    if (end == std::string_view::npos) end = when.size();
    const std::string_view cond = when.substr(at, end - at);
    at = end;
    if (cond.empty()) continue;
    const size_t eq = cond.find('=');
    const std::string_view key = cond.substr(0, eq), value = eq == std::string_view::npos ? "" : cond.substr(eq + 1);
    const bool ok = std::any_of(defs.begin(), defs.end(), [&](const auto& d) { return d.first == key && d.second == value; });
    if (!ok) return false;
  }
  return true;
}

class VulkanBackend final : public GpuBackend {
 public:
  explicit VulkanBackend(Api& a) : api(a) {}
  ~VulkanBackend() override;

  BufferHandle create_buffer(uint64_t bytes, std::string_view what) override;
  void destroy_buffer(BufferHandle b) override;
  void write(BufferHandle b, uint64_t offset, const void* data, uint64_t bytes, bool idle) override;
  void read(std::span<const ReadRange> ranges) override;
  void copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset, uint64_t bytes) override;
  bool has_kernel(std::string_view kernel) const override;
  const Pipeline& pipeline(const std::string& kernel, const KernelDefs& defs) override;
  void dispatch(const DispatchCommand& d) override;
  bool pending() const override { return open_ >= 0; }
  void flush() override;
  void synchronize() override;
  void trim() override;
  void check(std::string_view op) override;
  bool lost() const override { return lost_; }
  void begin_timing() override;
  Device::Timing end_timing() override;
  std::vector<OpProfile> profile() override { return {}; }
  void prepare(RecordingImpl&) override {}
  void replay(const RecordingImpl& r) override;
  void release(RecordingImpl&) override {}

  Api& api;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceMemoryProperties memory{};
  VkPhysicalDeviceLimits vk_limits{};
  VkPipelineCache cache = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  bool timestamps = false;

  void vk_check(VkResult r, std::string_view what);

 private:
  bool lost_ = false;
  std::string lost_message_;

  // Command buffers: the one being written (open_, or -1) and those submitted and not yet waited for.
  struct Slot {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    bool in_flight = false;
  };
  std::vector<Slot> slots_;
  int open_ = -1;
  size_t batch_dispatches_ = 0;
  VkCommandBuffer cmd();  // the open command buffer, opening one if needed
  std::vector<VkBuf*> pending_free_;  // destroyed while work that may use them is in flight

  // Data-flow barriers.
  std::unordered_set<VkBuffer> written_, read_;
  void access(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes);
  void barrier(VkAccessFlags extra_dst = 0, VkPipelineStageFlags extra_stage = 0);

  // Staging for transfers, host-visible and coherent; grown as needed.
  VkBuffer staging_ = VK_NULL_HANDLE;
  VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
  void* staging_map_ = nullptr;
  uint64_t staging_bytes_ = 0;
  void ensure_staging(uint64_t bytes);
  uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const;
  void read_group(std::span<const ReadRange> ranges);

  struct Built {
    Pipeline pipeline;
    VkPipeline vk_pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    Interface iface;
  };
  std::map<std::pair<std::string, KernelDefs>, std::unique_ptr<Built>> pipelines_;
  std::map<std::string, std::unique_ptr<Built>> modules_;  // by module: one pipeline serves every defs it matches

  bool timing_ = false;
  std::chrono::steady_clock::time_point timing_start_;
};

VulkanBackend::~VulkanBackend() {
  if (!device) {
    if (instance) api.DestroyInstance(instance, nullptr);
    return;
  }
  api.DeviceWaitIdle(device);
  for (VkBuf* b : pending_free_) {
    api.DestroyBuffer(device, b->buffer, nullptr);
    api.FreeMemory(device, b->memory, nullptr);
    delete b;
  }
  for (auto& [name, b] : modules_) {
    api.DestroyPipeline(device, b->vk_pipeline, nullptr);
    api.DestroyPipelineLayout(device, b->layout, nullptr);
    api.DestroyDescriptorSetLayout(device, b->set_layout, nullptr);
  }
  if (staging_) {
    api.UnmapMemory(device, staging_memory_);
    api.DestroyBuffer(device, staging_, nullptr);
    api.FreeMemory(device, staging_memory_, nullptr);
  }
  for (auto& s : slots_) api.DestroyFence(device, s.fence, nullptr);
  if (queries) api.DestroyQueryPool(device, queries, nullptr);
  if (pool) api.DestroyCommandPool(device, pool, nullptr);
  if (cache) api.DestroyPipelineCache(device, cache, nullptr);
  api.DestroyDevice(device, nullptr);
  api.DestroyInstance(instance, nullptr);
}

void VulkanBackend::vk_check(VkResult r, std::string_view what) {
  if (r == VK_SUCCESS) return;
  const std::string msg = "Vulkan: " + std::string(what) + " failed with " + vk::result_name(r) + " on " + info.name;
  if (r == VK_ERROR_DEVICE_LOST) {
    lost_ = true;
    lost_message_ = msg;
    throw DeviceLostError(msg + ". Open a new device.");
  }
  throw GpuError(msg);
}

void VulkanBackend::check(std::string_view op) {
  if (lost_)
    throw DeviceLostError("the GPU device was lost (during or before '" + std::string(op) + "'): " + lost_message_ +
                          ". Open a new device.");
}

// ---- buffers ------------------------------------------------------------------------------------------------------

uint32_t VulkanBackend::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const {
  for (VkMemoryPropertyFlags flags : {want, fallback})
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & flags) == flags) return i;
  throw GpuError("Vulkan: no memory type fits a buffer on " + info.name);
}

BufferHandle VulkanBackend::create_buffer(uint64_t bytes, std::string_view what) {
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = std::max<uint64_t>((bytes + 3) / 4 * 4, 4);
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  auto b = std::make_unique<VkBuf>();
  b->bytes = bi.size;
  vk_check(api.CreateBuffer(device, &bi, nullptr, &b->buffer), "creating a buffer for " + std::string(what));
  VkMemoryRequirements req;
  api.GetBufferMemoryRequirements(device, b->buffer, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  const VkResult r = api.AllocateMemory(device, &ai, nullptr, &b->memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    api.DestroyBuffer(device, b->buffer, nullptr);
    return nullptr;  // the pool frees what it holds and asks again
  }
  if (r != VK_SUCCESS) api.DestroyBuffer(device, b->buffer, nullptr);
  vk_check(r, "allocating " + std::to_string(bytes) + " bytes for " + std::string(what));
  vk_check(api.BindBufferMemory(device, b->buffer, b->memory, 0), "binding buffer memory");
  return reinterpret_cast<BufferHandle>(b.release());
}

void VulkanBackend::destroy_buffer(BufferHandle h) {
  VkBuf* b = &buf(h);
  written_.erase(b->buffer);
  read_.erase(b->buffer);
  const bool busy = open_ >= 0 || std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.in_flight; });
  if (busy) {
    pending_free_.push_back(b);
    return;
  }
  api.DestroyBuffer(device, b->buffer, nullptr);
  api.FreeMemory(device, b->memory, nullptr);
  delete b;
}

void VulkanBackend::trim() {
  if (!staging_) return;
  synchronize();  // no transfer may still read it
  api.UnmapMemory(device, staging_memory_);
  api.DestroyBuffer(device, staging_, nullptr);
  api.FreeMemory(device, staging_memory_, nullptr);
  staging_ = VK_NULL_HANDLE;
  staging_memory_ = VK_NULL_HANDLE;
  staging_map_ = nullptr;
  staging_bytes_ = 0;
}

void VulkanBackend::ensure_staging(uint64_t bytes) {
  if (bytes <= staging_bytes_) return;
  if (staging_) {
    api.UnmapMemory(device, staging_memory_);
    api.DestroyBuffer(device, staging_, nullptr);
    api.FreeMemory(device, staging_memory_, nullptr);
    staging_ = VK_NULL_HANDLE;
    staging_bytes_ = 0;
  }
  const uint64_t size = std::max<uint64_t>(bytes, uint64_t{1} << 20);
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  vk_check(api.CreateBuffer(device, &bi, nullptr, &staging_), "creating the staging buffer");
  VkMemoryRequirements req;
  api.GetBufferMemoryRequirements(device, staging_, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, hv);
  vk_check(api.AllocateMemory(device, &ai, nullptr, &staging_memory_), "allocating the staging buffer");
  vk_check(api.BindBufferMemory(device, staging_, staging_memory_, 0), "binding the staging buffer");
  vk_check(api.MapMemory(device, staging_memory_, 0, VK_WHOLE_SIZE, 0, &staging_map_), "mapping the staging buffer");
  staging_bytes_ = size;
}

void VulkanBackend::write(BufferHandle h, uint64_t offset, const void* data, uint64_t bytes, bool) {
  const VkBuffer dst = buf(h).buffer;
  const auto* p = static_cast<const uint8_t*>(data);
  if (bytes <= kInlineUpload && bytes % 4 == 0 && offset % 4 == 0) {
    // Inside the command buffer: in order with the issued work, and no wait.
    access({}, {&dst, 1});
    for (uint64_t at = 0; at < bytes; at += 65536)
      api.CmdUpdateBuffer(cmd(), dst, offset + at, std::min<uint64_t>(65536, bytes - at), p + at);
    return;
  }
  for (uint64_t at = 0; at < bytes; at += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - at);
    synchronize();  // the staging buffer is free, and the issued work has seen the old contents
    ensure_staging((n + 3) / 4 * 4);
    std::memcpy(staging_map_, p + at, n);
    access({}, {&dst, 1});
    const VkBufferCopy c{0, offset + at, (n + 3) / 4 * 4};
    api.CmdCopyBuffer(cmd(), staging_, dst, 1, &c);
  }
  synchronize();
}

void VulkanBackend::read(std::span<const ReadRange> ranges) {
  std::vector<ReadRange> group;
  uint64_t group_bytes = 0;
  for (const ReadRange& r : ranges)
    for (uint64_t at = 0; at < r.bytes; at += kStagingChunk) {
      const uint64_t n = std::min(kStagingChunk, r.bytes - at);
      if (group_bytes + (n + 3) / 4 * 4 > kStagingChunk && !group.empty()) {
        read_group(group);
        group.clear();
        group_bytes = 0;
      }
      group.push_back({r.buffer, r.offset + at, n, static_cast<uint8_t*>(r.dst) + at});
      group_bytes += (n + 3) / 4 * 4;
    }
  if (!group.empty()) read_group(group);
}

void VulkanBackend::read_group(std::span<const ReadRange> ranges) {
  uint64_t total = 0;
  for (const auto& r : ranges) total += (r.bytes + 3) / 4 * 4;
  synchronize();  // the staging buffer is free
  ensure_staging(total);
  uint64_t at = 0;
  for (const auto& r : ranges) {
    const VkBuffer src = buf(r.buffer).buffer;
    access({&src, 1}, {});
    const VkBufferCopy c{r.offset, at, (r.bytes + 3) / 4 * 4};
    api.CmdCopyBuffer(cmd(), src, staging_, 1, &c);
    at += c.size;
  }
  barrier(VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_HOST_BIT);
  synchronize();
  at = 0;
  for (const auto& r : ranges) {
    std::memcpy(r.dst, static_cast<const uint8_t*>(staging_map_) + at, r.bytes);
    at += (r.bytes + 3) / 4 * 4;
  }
}

void VulkanBackend::copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset,
                         uint64_t bytes) {
  const VkBuffer s = buf(src).buffer, d = buf(dst).buffer;
  access({&s, 1}, {&d, 1});
  const VkBufferCopy c{src_offset, dst_offset, bytes};
  api.CmdCopyBuffer(cmd(), s, d, 1, &c);
}

// ---- barriers and command buffers -----------------------------------------------------------------------------------

void VulkanBackend::barrier(VkAccessFlags extra_dst, VkPipelineStageFlags extra_stage) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | extra_dst;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api.CmdPipelineBarrier(cmd(), stages, stages | extra_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
  written_.clear();
  read_.clear();
}

void VulkanBackend::access(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes) {
  bool hazard = false;
  for (VkBuffer b : reads) hazard = hazard || written_.count(b);
  for (VkBuffer b : writes) hazard = hazard || written_.count(b) || read_.count(b);
  // A barrier's first scope covers every command submitted before it on the queue, so the sets carry over
  // submissions.
  if (hazard) barrier();
  read_.insert(reads.begin(), reads.end());
  written_.insert(writes.begin(), writes.end());
}

VkCommandBuffer VulkanBackend::cmd() {
  if (open_ >= 0) return slots_[open_].cmd;
  int pick = -1;
  for (size_t i = 0; i < slots_.size() && pick < 0; ++i) {
    Slot& s = slots_[i];
    if (!s.in_flight) pick = static_cast<int>(i);
    else if (api.GetFenceStatus(device, s.fence) == VK_SUCCESS) {
      vk_check(api.ResetFences(device, 1, &s.fence), "resetting a fence");
      s.in_flight = false;
      pick = static_cast<int>(i);
    }
  }
  if (pick < 0) {
    Slot s;
    VkCommandBufferAllocateInfo ca{};
    ca.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ca.commandPool = pool;
    ca.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ca.commandBufferCount = 1;
    vk_check(api.AllocateCommandBuffers(device, &ca, &s.cmd), "allocating a command buffer");
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    vk_check(api.CreateFence(device, &fi, nullptr, &s.fence), "creating a fence");
    slots_.push_back(s);
    pick = static_cast<int>(slots_.size() - 1);
  }
  Slot& s = slots_[pick];
  vk_check(api.ResetCommandBuffer(s.cmd, 0), "resetting a command buffer");
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_check(api.BeginCommandBuffer(s.cmd, &bi), "beginning a command buffer");
  open_ = pick;
  return s.cmd;
}

void VulkanBackend::flush() {
  if (open_ < 0) return;
  Slot& s = slots_[open_];
  open_ = -1;
  batch_dispatches_ = 0;
  vk_check(api.EndCommandBuffer(s.cmd), "ending a command buffer");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &s.cmd;
  vk_check(api.QueueSubmit(queue, 1, &si, s.fence), "submitting work");
  s.in_flight = true;
  ++submits;
}

void VulkanBackend::synchronize() {
  flush();
  for (Slot& s : slots_)
    if (s.in_flight) {
      vk_check(api.WaitForFences(device, 1, &s.fence, VK_TRUE, UINT64_MAX), "waiting for the GPU");
      vk_check(api.ResetFences(device, 1, &s.fence), "resetting a fence");
      s.in_flight = false;
    }
  for (VkBuf* b : pending_free_) {
    api.DestroyBuffer(device, b->buffer, nullptr);
    api.FreeMemory(device, b->memory, nullptr);
    delete b;
  }
  pending_free_.clear();
}

// ---- kernels ----------------------------------------------------------------------------------------------------------

bool VulkanBackend::has_kernel(std::string_view kernel) const {
  for (const auto& v : spirv_variants())
    if (kernel == v.kernel) return true;
  return false;
}

const Pipeline& VulkanBackend::pipeline(const std::string& kernel, const KernelDefs& defs) {
  auto key = std::make_pair(kernel, defs);
  std::sort(key.second.begin(), key.second.end());
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second->pipeline;
  const SpirvVariant* pick = nullptr;
  bool any = false;
  for (const auto& v : spirv_variants()) {
    if (kernel != v.kernel) continue;
    any = true;
    if (serves(v.when, defs)) {
      pick = &v;
      break;
    }
  }
  if (!pick) {
    std::string want;
    for (const auto& [k, v] : key.second) want += " " + k + "=" + v;
    throw UnsupportedError(any ? "the native Vulkan backend has no variant of kernel '" + kernel + "' for" + want
                               : "the native Vulkan backend has no kernel '" + kernel + "'");
  }
  auto& built = modules_[pick->module];
  if (!built) {
    auto b = std::make_unique<Built>();
    const std::span<const uint32_t> code = spirv(pick->module);
    b->pipeline.label = pick->module;
    b->iface = reflect(code, b->pipeline.label);
    std::vector<VkDescriptorSetLayoutBinding> lb(b->iface.bindings);
    for (uint32_t i = 0; i < b->iface.bindings; ++i) {
      lb[i].binding = i;
      lb[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      lb[i].descriptorCount = 1;
      lb[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    dl.bindingCount = b->iface.bindings;
    dl.pBindings = lb.data();
    vk_check(api.CreateDescriptorSetLayout(device, &dl, nullptr, &b->set_layout), "creating the layout of " + b->pipeline.label);
    VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &b->set_layout;
    pl.pushConstantRangeCount = 1;
    pl.pPushConstantRanges = &pr;
    vk_check(api.CreatePipelineLayout(device, &pl, nullptr, &b->layout), "creating the pipeline layout of " + b->pipeline.label);
    VkShaderModuleCreateInfo sm{};
    sm.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    sm.codeSize = code.size() * 4;
    sm.pCode = code.data();
    VkShaderModule module;
    vk_check(api.CreateShaderModule(device, &sm, nullptr, &module), "creating the shader module of " + b->pipeline.label);
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.layout = b->layout;
    const VkResult r = api.CreateComputePipelines(device, cache, 1, &ci, nullptr, &b->vk_pipeline);
    api.DestroyShaderModule(device, module, nullptr);
    vk_check(r, "building kernel " + b->pipeline.label);
    b->pipeline.native = b.get();
    ++pipelines_created;
    built = std::move(b);
  }
  auto& slot = pipelines_[key];
  slot = std::make_unique<Built>(*built);  // same Vulkan objects, owned by modules_
  slot->pipeline.native = built.get();
  return slot->pipeline;
}

void VulkanBackend::dispatch(const DispatchCommand& d) {
  const Built& k = *static_cast<const Built*>(d.pipeline->native);
  if (d.storage.size() != k.iface.bindings)
    throw Error("'" + std::string(d.op) + "': kernel " + k.pipeline.label + " has " +
                std::to_string(k.iface.bindings) + " storage bindings, the op gave " + std::to_string(d.storage.size()));
  if (d.uniform_bytes > kPushBytes)
    throw Error("'" + std::string(d.op) + "': a parameter block of " + std::to_string(d.uniform_bytes) +
                " bytes exceeds the " + std::to_string(kPushBytes) + " bytes of push constants");
  VkBuffer bufs[16];
  VkBuffer reads[16], writes[16];
  size_t nr = 0, nw = 0;
  for (size_t i = 0; i < d.storage.size(); ++i) {
    bufs[i] = buf(d.storage[i]).buffer;
    reads[nr++] = bufs[i];
    if (k.iface.writable[i]) writes[nw++] = bufs[i];
  }
  access({reads, nr}, {writes, nw});
  VkCommandBuffer c = cmd();
  api.CmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, k.vk_pipeline);
  VkDescriptorBufferInfo infos[16];
  VkWriteDescriptorSet w[16]{};
  for (size_t i = 0; i < d.storage.size(); ++i) {
    infos[i] = {bufs[i], 0, VK_WHOLE_SIZE};
    w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w[i].dstBinding = static_cast<uint32_t>(i);
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &infos[i];
  }
  if (!d.storage.empty())
    api.CmdPushDescriptorSetKHR(c, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, static_cast<uint32_t>(d.storage.size()), w);
  if (d.uniform_bytes)
    api.CmdPushConstants(c, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(d.uniform_bytes), d.uniforms);
  api.CmdDispatch(c, d.groups_x, d.groups_y, d.groups_z);
  if (d.counted) ++dispatches;
  if (++batch_dispatches_ >= kMaxDispatchesPerBatch) flush();
}

void VulkanBackend::replay(const RecordingImpl& r) {
  for (const auto& c : r.commands) {
    if (c.kind == RecordingImpl::Command::Copy) {
      copy(c.src, c.src_offset, c.dst, c.dst_offset, c.bytes);
      continue;
    }
    dispatch({c.op, c.pipeline, c.uniform_bytes ? r.uniforms.data() + c.uniform_offset : nullptr, c.uniform_bytes,
              c.storage, c.groups_x, c.groups_y, c.groups_z, c.counted});
  }
}

// ---- timing -----------------------------------------------------------------------------------------------------------

void VulkanBackend::begin_timing() {
  if (timing_) throw Error("begin_timing: a timing region is already open");
  synchronize();
  timing_ = true;
  if (!timestamps) {
    timing_start_ = std::chrono::steady_clock::now();
    return;
  }
  api.CmdResetQueryPool(cmd(), queries, 0, 2);
  api.CmdWriteTimestamp(cmd(), VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
}

Device::Timing VulkanBackend::end_timing() {
  if (!timing_) throw Error("end_timing without begin_timing");
  timing_ = false;
  if (!timestamps) {
    synchronize();
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - timing_start_).count(), false};
  }
  api.CmdWriteTimestamp(cmd(), VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
  synchronize();
  uint64_t ts[2] = {0, 0};
  vk_check(api.GetQueryPoolResults(device, queries, 0, 2, sizeof ts, ts, 8,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "reading timestamps");
  const double ns = static_cast<double>(ts[1] - ts[0]) * static_cast<double>(vk_limits.timestampPeriod);
  return {ns * 1e-9, true};
}

// ---- opening ----------------------------------------------------------------------------------------------------------

struct Instance {
  Api& api;
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices;
};

Instance create_instance() {
  Api& api = vk::vulkan_api();
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "wgtrain";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  Instance in{api, VK_NULL_HANDLE, {}};
  const VkResult r = api.CreateInstance(&ci, nullptr, &in.instance);
  if (r != VK_SUCCESS)
    throw Error(std::string("Vulkan: creating an instance failed with ") + vk::result_name(r) +
                " (is a Vulkan driver installed? mesa-vulkan-drivers gives lavapipe on a CPU)");
  api.load_instance(in.instance);
  uint32_t n = 0;
  api.EnumeratePhysicalDevices(in.instance, &n, nullptr);
  in.devices.resize(n);
  api.EnumeratePhysicalDevices(in.instance, &n, in.devices.data());
  return in;
}

}  // namespace

std::vector<VulkanPhysicalDevice> list_vulkan_devices() {
  Instance in = create_instance();
  std::vector<VulkanPhysicalDevice> out;
  for (VkPhysicalDevice d : in.devices) {
    VkPhysicalDeviceProperties p;
    in.api.GetPhysicalDeviceProperties(d, &p);
    out.push_back({p.deviceName, type_name(p.deviceType), p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU});
  }
  in.api.DestroyInstance(in.instance, nullptr);
  return out;
}

std::unique_ptr<GpuBackend> open_native_vulkan(const DeviceOptions& options) {
  Instance in = create_instance();
  Api& api = in.api;
  auto ctx = std::make_unique<VulkanBackend>(api);
  ctx->instance = in.instance;
  if (in.devices.empty()) throw Error("Vulkan: the loader found no physical device");
  int index = options.vulkan_device;
  if (const char* env = std::getenv("WGTRAIN_VULKAN_DEVICE"); index < 0 && env && *env) index = std::atoi(env);
  if (index >= static_cast<int>(in.devices.size()))
    throw ArgumentError("Vulkan: no physical device " + std::to_string(index) + " (there are " +
                        std::to_string(in.devices.size()) + ")");
  // The chosen device: by index, else the first discrete GPU, else the first of any kind.
  VkPhysicalDevice pick = in.devices[0];
  if (index >= 0) {
    pick = in.devices[index];
  } else {
    for (VkPhysicalDevice d : in.devices) {
      VkPhysicalDeviceProperties p;
      api.GetPhysicalDeviceProperties(d, &p);
      if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
        pick = d;
        break;
      }
    }
  }
  ctx->physical = pick;

  VkPhysicalDeviceSubgroupProperties sub{};
  sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &sub;
  api.GetPhysicalDeviceProperties2(pick, &props);
  const VkPhysicalDeviceProperties& p = props.properties;
  const VkPhysicalDeviceLimits& l = p.limits;
  ctx->vk_limits = l;
  AdapterInfo& info = ctx->info;
  info.name = p.deviceName;
  char vendor[16];
  std::snprintf(vendor, sizeof vendor, "0x%04x", p.vendorID);
  info.vendor = vendor;
  info.driver = "driver " + std::to_string(p.driverVersion) + ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(p.apiVersion)) +
                "." + std::to_string(VK_API_VERSION_MINOR(p.apiVersion)) + "." + std::to_string(VK_API_VERSION_PATCH(p.apiVersion));
  info.backend = Backend::NativeVulkan;
  info.backend_label = "Vulkan (native)";
  info.adapter_type = type_name(p.deviceType);
  info.software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  info.subgroup_min = info.subgroup_max = sub.subgroupSize;
  api.GetPhysicalDeviceMemoryProperties(pick, &ctx->memory);

  DeviceLimits& dl = ctx->limits;
  dl.max_buffer_size = l.maxStorageBufferRange;
  dl.max_storage_binding_size = l.maxStorageBufferRange;
  dl.max_uniform_binding_size = l.maxUniformBufferRange;
  dl.max_storage_buffers_per_stage = l.maxPerStageDescriptorStorageBuffers;
  dl.max_workgroup_storage = l.maxComputeSharedMemorySize;
  dl.max_invocations_per_workgroup = l.maxComputeWorkGroupInvocations;
  dl.max_workgroup_size_x = l.maxComputeWorkGroupSize[0];
  dl.max_workgroup_size_y = l.maxComputeWorkGroupSize[1];
  dl.max_workgroup_size_z = l.maxComputeWorkGroupSize[2];
  dl.max_workgroups_per_dim =
      std::min({l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1], l.maxComputeWorkGroupCount[2]});
  dl.min_uniform_offset_alignment = static_cast<uint32_t>(l.minUniformBufferOffsetAlignment);
  dl.min_storage_offset_alignment = static_cast<uint32_t>(l.minStorageBufferOffsetAlignment);
  dl.max_bind_groups = l.maxBoundDescriptorSets;
  if (l.maxPushConstantsSize < kPushBytes)
    throw Error("Vulkan: " + info.name + " offers " + std::to_string(l.maxPushConstantsSize) +
                " bytes of push constants, the native backend needs " + std::to_string(kPushBytes));

  uint32_t n_ext = 0;
  api.EnumerateDeviceExtensionProperties(pick, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  api.EnumerateDeviceExtensionProperties(pick, nullptr, &n_ext, exts.data());
  // Cooperative matrices: VK_NV_cooperative_matrix (what Debian's glslc compiles) with 16x16x16 fp16 x fp16 -> fp32
  // products at subgroup scope, fp16 arithmetic and the Vulkan memory model.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_features{};
  cm_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceVulkan12Features v12{};
  v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  v12.pNext = &cm_features;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &v12;
  api.GetPhysicalDeviceFeatures2(pick, &features);
  bool cm_shape = false;
  if (has_extension(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    auto props_fn = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
        api.GetInstanceProcAddr(in.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
    uint32_t n_cm = 0;
    if (props_fn && props_fn(pick, &n_cm, nullptr) == VK_SUCCESS && n_cm) {
      std::vector<VkCooperativeMatrixPropertiesNV> cm(n_cm);
      for (auto& c : cm) c.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
      props_fn(pick, &n_cm, cm.data());
      for (const auto& c : cm)
        cm_shape = cm_shape || (c.MSize == 16 && c.NSize == 16 && c.KSize == 16 && c.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                c.BType == VK_COMPONENT_TYPE_FLOAT16_NV && c.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                c.DType == VK_COMPONENT_TYPE_FLOAT32_NV && c.scope == VK_SCOPE_SUBGROUP_NV);
    }
  }
  const bool coopmat_offered = cm_shape && cm_features.cooperativeMatrix && v12.shaderFloat16 &&
                               v12.vulkanMemoryModel && sub.subgroupSize == 32;
  const bool coopmat = options.cooperative_matrix && coopmat_offered;
  ctx->features.cooperative_matrix = coopmat;
  ctx->features.shader_f16 = v12.shaderFloat16;
  ctx->features.subgroups = true;

  if (!has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
    throw Error("Vulkan: " + info.name + " lacks " + VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME +
                ", which the native backend needs");

  uint32_t n_q = 0;
  api.GetPhysicalDeviceQueueFamilyProperties(pick, &n_q, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_q);
  api.GetPhysicalDeviceQueueFamilyProperties(pick, &n_q, families.data());
  int family = -1;
  for (uint32_t i = 0; i < n_q && family < 0; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = static_cast<int>(i);
  if (family < 0) throw Error("Vulkan: " + info.name + " has no compute queue");
  ctx->queue_family = static_cast<uint32_t>(family);
  ctx->timestamps = options.timestamps && l.timestampComputeAndGraphics && families[family].timestampValidBits > 0;
  ctx->features.timestamp_query = ctx->timestamps;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = ctx->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  std::vector<const char*> enable = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  // Only what the kernels use: with cooperative matrices, their extension and features.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_enable{};
  cm_enable.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceVulkan12Features v12_enable{};
  v12_enable.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceFeatures2 enable_features{};
  enable_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  if (coopmat) {
    enable.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    cm_enable.cooperativeMatrix = VK_TRUE;
    v12_enable.shaderFloat16 = VK_TRUE;
    v12_enable.vulkanMemoryModel = VK_TRUE;
    v12_enable.pNext = &cm_enable;
    enable_features.pNext = &v12_enable;
    di.pNext = &enable_features;
  }
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(enable.size());
  di.ppEnabledExtensionNames = enable.data();
  ctx->vk_check(api.CreateDevice(pick, &di, nullptr, &ctx->device), "creating a device");
  api.load_device(ctx->device);
  api.GetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);

  VkPipelineCacheCreateInfo pc{};
  pc.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ctx->vk_check(api.CreatePipelineCache(ctx->device, &pc, nullptr, &ctx->cache), "creating the pipeline cache");
  VkCommandPoolCreateInfo cp{};
  cp.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cp.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cp.queueFamilyIndex = ctx->queue_family;
  ctx->vk_check(api.CreateCommandPool(ctx->device, &cp, nullptr, &ctx->pool), "creating a command pool");
  if (ctx->timestamps) {
    VkQueryPoolCreateInfo qp{};
    qp.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qp.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qp.queryCount = 2;
    ctx->vk_check(api.CreateQueryPool(ctx->device, &qp, nullptr, &ctx->queries), "creating a query pool");
  }
  return ctx;
}

}  // namespace wgtrain::detail
