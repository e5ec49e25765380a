// The native Vulkan runtime: device choice and creation, buffers, pipelines, batched dispatch, transfers, timing.
#include "vulkan/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "wgtrain/error.h"

namespace wgtrain::vk {

namespace detail {

namespace {

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

// Largest single transfer through the staging buffer.
constexpr uint64_t kStagingChunk = uint64_t{64} << 20;
// Uploads up to this size go inside the command buffer instead.
constexpr uint64_t kInlineUpload = uint64_t{256} << 10;

}  // namespace

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  return std::any_of(list.begin(), list.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

Buffer::~Buffer() {
  if (ctx && buffer) ctx->release(buffer, memory);
}

Context::~Context() {
  if (!device) {
    if (instance) api.DestroyInstance(instance, nullptr);
    return;
  }
  try {
    submit_and_wait();
  } catch (...) {
    // Teardown must not throw; a failing last submit has nothing left to report to.
  }
  api.DeviceWaitIdle(device);
  if (index_error_) {
    api.DestroyBuffer(device, index_error_->buffer, nullptr);
    api.FreeMemory(device, index_error_->memory, nullptr);
  }
  for (auto& [b, m] : pending_free_) {
    api.DestroyBuffer(device, b, nullptr);
    api.FreeMemory(device, m, nullptr);
  }
  for (auto& [key, k] : kernels_) {
    api.DestroyPipeline(device, k.pipeline, nullptr);
    api.DestroyPipelineLayout(device, k.layout, nullptr);
    api.DestroyDescriptorSetLayout(device, k.set_layout, nullptr);
  }
  if (staging_) {
    api.UnmapMemory(device, staging_memory_);
    api.DestroyBuffer(device, staging_, nullptr);
    api.FreeMemory(device, staging_memory_, nullptr);
  }
  if (queries_) api.DestroyQueryPool(device, queries_, nullptr);
  if (fence_) api.DestroyFence(device, fence_, nullptr);
  if (pool_) api.DestroyCommandPool(device, pool_, nullptr);
  if (cache_) api.DestroyPipelineCache(device, cache_, nullptr);
  api.DestroyDevice(device, nullptr);
  api.DestroyInstance(instance, nullptr);
}

void Context::check(VkResult r, std::string_view what) const {
  if (r == VK_SUCCESS) return;
  const std::string msg = "Vulkan: " + std::string(what) + " failed with " + result_name(r) + " on " + info.name;
  if (r == VK_ERROR_DEVICE_LOST) throw DeviceLostError(msg + ". Open a new device.");
  throw GpuError(msg);
}

uint32_t Context::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const {
  for (VkMemoryPropertyFlags flags : {want, fallback})
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & flags) == flags) return i;
  throw GpuError("Vulkan: no memory type fits a buffer on " + info.name);
}

std::shared_ptr<Buffer> Context::allocate(uint64_t bytes, std::string_view what) {
  bytes = std::max<uint64_t>((bytes + 3) / 4 * 4, 4);
  if (bytes > info.max_storage_buffer_range)
    throw ArgumentError(std::string(what) + " needs " + std::to_string(bytes) + " bytes, more than " + info.name +
                        " binds in one storage buffer (" + std::to_string(info.max_storage_buffer_range) + ")");
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  auto b = std::make_shared<Buffer>();
  b->bytes = bytes;
  check(api.CreateBuffer(device, &bi, nullptr, &b->buffer), "creating a buffer for " + std::string(what));
  VkMemoryRequirements req;
  api.GetBufferMemoryRequirements(device, b->buffer, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  VkResult r = api.AllocateMemory(device, &ai, nullptr, &b->memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY) {
    submit_and_wait();  // frees what was waiting on the last batch
    r = api.AllocateMemory(device, &ai, nullptr, &b->memory);
  }
  if (r != VK_SUCCESS) {
    api.DestroyBuffer(device, b->buffer, nullptr);
    b->buffer = VK_NULL_HANDLE;
    check(r, "allocating " + std::to_string(bytes) + " bytes for " + std::string(what));
  }
  check(api.BindBufferMemory(device, b->buffer, b->memory, 0), "binding buffer memory");
  b->ctx = shared_from_this();
  ++stats.buffers_created;
  if (options.poison) fill(*b, 0, bytes, 0xFFFFFFFFu);
  return b;
}

void Context::release(VkBuffer b, VkDeviceMemory m) {
  if (open_) {
    pending_free_.emplace_back(b, m);  // recorded work may still use it
    return;
  }
  api.DestroyBuffer(device, b, nullptr);
  api.FreeMemory(device, m, nullptr);
}

void Context::ensure_staging(uint64_t bytes) {
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
  check(api.CreateBuffer(device, &bi, nullptr, &staging_), "creating the staging buffer");
  VkMemoryRequirements req;
  api.GetBufferMemoryRequirements(device, staging_, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, hv);
  check(api.AllocateMemory(device, &ai, nullptr, &staging_memory_), "allocating the staging buffer");
  check(api.BindBufferMemory(device, staging_, staging_memory_, 0), "binding the staging buffer");
  check(api.MapMemory(device, staging_memory_, 0, VK_WHOLE_SIZE, 0, &staging_map_), "mapping the staging buffer");
  staging_bytes_ = size;
}

void Context::upload(const Buffer& dst, uint64_t offset, const void* data, uint64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (bytes <= kInlineUpload && bytes % 4 == 0) {
    // Small data travels inside the command buffer (vkCmdUpdateBuffer, 64 KiB a command): in order with the
    // recorded work, and no wait.
    ensure_open();
    for (uint64_t at = 0; at < bytes; at += 65536)
      api.CmdUpdateBuffer(cmd_, dst.buffer, offset + at, std::min<uint64_t>(65536, bytes - at), p + at);
    barrier();
    return;
  }
  for (uint64_t at = 0; at < bytes; at += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - at);
    submit_and_wait();  // the staging buffer is free, and work recorded before sees the old contents
    ensure_staging(n);
    std::memcpy(staging_map_, p + at, n);
    ensure_open();
    VkBufferCopy c{0, offset + at, (n + 3) / 4 * 4};
    api.CmdCopyBuffer(cmd_, staging_, dst.buffer, 1, &c);
    barrier();
  }
  submit_and_wait();
}

void Context::download(const Buffer& src, uint64_t offset, void* data, uint64_t bytes) {
  read_raw(src, offset, data, bytes);
  verify_index_checks();
}

uint32_t Context::index_check_bit(std::string_view op) {
  index_checks_.emplace_back(op);
  return 1u << ((index_checks_.size() - 1) % 32);
}

const Buffer& Context::index_error_buffer() {
  if (!index_error_) {
    index_error_ = allocate(4, "the index-error word");
    index_error_->ctx.reset();  // the context owns it: no reference back (a cycle), freed in ~Context
    fill(*index_error_, 0, 4, 0);
  }
  return *index_error_;
}

void Context::verify_index_checks() {
  if (index_checks_.empty()) return;
  const std::vector<std::string> ops = std::move(index_checks_);
  index_checks_.clear();
  uint32_t word = 0;
  read_raw(*index_error_, 0, &word, 4);
  if (word == 0) return;
  fill(*index_error_, 0, 4, 0);
  std::string names;
  for (size_t k = 0; k < ops.size(); ++k)
    if (word & (1u << (k % 32))) names += (names.empty() ? "'" : ", '") + ops[k] + "'";
  throw ArgumentError("an index was out of range in " + names + " (found on the GPU; nothing was read out of bounds)");
}

void Context::read_raw(const Buffer& src, uint64_t offset, void* data, uint64_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  for (uint64_t at = 0; at < bytes; at += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - at);
    ensure_staging((n + 3) / 4 * 4);
    ensure_open();
    VkBufferCopy c{offset + at, 0, (n + 3) / 4 * 4};
    api.CmdCopyBuffer(cmd_, src.buffer, staging_, 1, &c);
    barrier();
    submit_and_wait();
    std::memcpy(p + at, staging_map_, n);
  }
}

const Kernel& Context::kernel(const std::string& name, const std::vector<uint32_t>& spec, uint32_t bindings,
                              uint32_t push_bytes) {
  auto key = std::make_pair(name, spec);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  const std::span<const uint32_t> code = spirv(name);
  Kernel k;
  k.label = name;
  for (size_t i = 0; i < spec.size(); ++i) k.label += (i ? "," : " ") + std::to_string(spec[i]);
  k.bindings = bindings;
  k.push_bytes = push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> lb(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    lb[i].binding = i;
    lb[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    lb[i].descriptorCount = 1;
    lb[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{};
  dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dl.bindingCount = bindings;
  dl.pBindings = lb.data();
  check(api.CreateDescriptorSetLayout(device, &dl, nullptr, &k.set_layout), "creating the layout of " + k.label);
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{};
  pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &k.set_layout;
  pl.pushConstantRangeCount = push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &pr;
  check(api.CreatePipelineLayout(device, &pl, nullptr, &k.layout), "creating the pipeline layout of " + k.label);
  VkShaderModuleCreateInfo sm{};
  sm.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  sm.codeSize = code.size() * 4;
  sm.pCode = code.data();
  VkShaderModule module;
  check(api.CreateShaderModule(device, &sm, nullptr, &module), "creating the shader module of " + k.label);
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i)
    entries[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(4 * i), 4};
  VkSpecializationInfo si{static_cast<uint32_t>(spec.size()), entries.data(), spec.size() * 4, spec.data()};
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = k.layout;
  const VkResult r = api.CreateComputePipelines(device, cache_, 1, &ci, nullptr, &k.pipeline);
  api.DestroyShaderModule(device, module, nullptr);
  check(r, "building kernel " + k.label);
  ++stats.pipelines_created;
  return kernels_.emplace(std::move(key), std::move(k)).first->second;
}

void Context::ensure_open() {
  if (open_) return;
  check(api.ResetCommandBuffer(cmd_, 0), "resetting the command buffer");
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(api.BeginCommandBuffer(cmd_, &bi), "beginning a command buffer");
  open_ = true;
}

void Context::barrier() {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api.CmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Context::dispatch(const Kernel& k, const void* push, std::initializer_list<const Buffer*> buffers, uint32_t gx,
                       uint32_t gy, uint32_t gz) {
  if (buffers.size() != k.bindings)
    throw Error("Vulkan kernel " + k.label + ": " + std::to_string(buffers.size()) + " buffers for " +
                std::to_string(k.bindings) + " bindings");
  if (gx == 0 || gy == 0 || gz == 0) return;
  // Each dimension has its own limit (NVIDIA: 2^31 - 1 in x, 65535 in y and z).
  const uint32_t grid[3] = {gx, gy, gz};
  for (int d = 0; d < 3; ++d)
    if (grid[d] > limits.maxComputeWorkGroupCount[d])
      throw Error("Vulkan kernel " + k.label + ": " + std::to_string(grid[d]) + " workgroups in " + "xyz"[d] +
                  " exceed the device's limit of " + std::to_string(limits.maxComputeWorkGroupCount[d]));
  ensure_open();
  api.CmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers.size());
  for (const Buffer* b : buffers) infos.push_back({b->buffer, 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  api.CmdPushDescriptorSetKHR(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0,
                              static_cast<uint32_t>(writes.size()), writes.data());
  if (k.push_bytes) api.CmdPushConstants(cmd_, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes, push);
  api.CmdDispatch(cmd_, gx, gy, gz);
  barrier();
  ++stats.dispatches;
}

std::pair<uint32_t, uint32_t> Context::grid(uint64_t workgroups) const {
  const uint64_t maxd = std::min(limits.maxComputeWorkGroupCount[0], limits.maxComputeWorkGroupCount[1]);
  if (workgroups <= maxd) return {static_cast<uint32_t>(std::max<uint64_t>(workgroups, 1)), 1};
  const uint64_t y = (workgroups + maxd - 1) / maxd;
  if (y > maxd) throw ArgumentError("work of " + std::to_string(workgroups) + " workgroups exceeds the device's grid");
  return {static_cast<uint32_t>((workgroups + y - 1) / y), static_cast<uint32_t>(y)};
}

void Context::fill(const Buffer& b, uint64_t offset, uint64_t bytes, uint32_t word) {
  if (bytes == 0) return;
  ensure_open();
  api.CmdFillBuffer(cmd_, b.buffer, offset, (bytes + 3) / 4 * 4, word);
  barrier();
}

void Context::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return;
  ensure_open();
  VkBufferCopy c{src_offset, dst_offset, bytes};
  api.CmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &c);
  barrier();
}

void Context::submit_and_wait() {
  if (open_) {
    check(api.EndCommandBuffer(cmd_), "ending a command buffer");
    open_ = false;
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    check(api.QueueSubmit(queue, 1, &si, fence_), "submitting work");
    ++stats.submits;
    check(api.WaitForFences(device, 1, &fence_, VK_TRUE, UINT64_MAX), "waiting for the GPU");
    check(api.ResetFences(device, 1, &fence_), "resetting a fence");
  }
  for (auto& [b, m] : pending_free_) {
    api.DestroyBuffer(device, b, nullptr);
    api.FreeMemory(device, m, nullptr);
  }
  pending_free_.clear();
}

void Context::begin_timing() {
  if (timing_) throw Error("begin_timing: a timing region is already open");
  submit_and_wait();
  timing_ = true;
  if (!info.timestamps) {
    timing_start_ = std::chrono::steady_clock::now();
    return;
  }
  ensure_open();
  api.CmdResetQueryPool(cmd_, queries_, 0, 2);
  api.CmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
}

Device::Timing Context::end_timing() {
  if (!timing_) throw Error("end_timing without begin_timing");
  timing_ = false;
  if (!info.timestamps) {
    submit_and_wait();
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - timing_start_).count(), false};
  }
  ensure_open();
  api.CmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
  submit_and_wait();
  uint64_t ts[2] = {0, 0};
  check(api.GetQueryPoolResults(device, queries_, 0, 2, sizeof ts, ts, 8,
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "reading timestamps");
  const double ns = static_cast<double>(ts[1] - ts[0]) * static_cast<double>(limits.timestampPeriod);
  return {ns * 1e-9, true};
}

}  // namespace detail

// ---- Device ----------------------------------------------------------------------------------------------------

using detail::Api;
using detail::Context;

namespace {

struct Instance {
  Api& api;
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices;
};

Instance create_instance() {
  Api& api = detail::vulkan_api();
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
    throw Error(std::string("Vulkan: creating an instance failed with ") + detail::result_name(r) +
                " (is a Vulkan driver installed? mesa-vulkan-drivers gives lavapipe on a CPU)");
  api.load_instance(in.instance);
  uint32_t n = 0;
  api.EnumeratePhysicalDevices(in.instance, &n, nullptr);
  in.devices.resize(n);
  api.EnumeratePhysicalDevices(in.instance, &n, in.devices.data());
  return in;
}

}  // namespace

std::vector<Device::Physical> Device::list() {
  Instance in = create_instance();
  std::vector<Physical> out;
  for (VkPhysicalDevice d : in.devices) {
    VkPhysicalDeviceProperties p;
    in.api.GetPhysicalDeviceProperties(d, &p);
    out.push_back({p.deviceName, detail::type_name(p.deviceType), p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU});
  }
  in.api.DestroyInstance(in.instance, nullptr);
  return out;
}

Device Device::open(const DeviceOptions& options) {
  Instance in = create_instance();
  Api& api = in.api;
  auto ctx = std::make_shared<Context>(api);
  ctx->instance = in.instance;
  ctx->options = options;
  if (in.devices.empty()) throw Error("Vulkan: the loader found no physical device");
  int index = options.index;
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
  ctx->limits = p.limits;
  DeviceInfo& info = ctx->info;
  info.name = p.deviceName;
  info.type = detail::type_name(p.deviceType);
  info.api_version = p.apiVersion;
  info.software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  info.subgroup_size = sub.subgroupSize;
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  api.GetPhysicalDeviceMemoryProperties(pick, &ctx->memory);

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
  if (detail::has_extension(exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
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
  info.cooperative_matrix = cm_shape && cm_features.cooperativeMatrix && v12.shaderFloat16 && v12.vulkanMemoryModel &&
                            sub.subgroupSize == 32;
  ctx->coopmat = options.cooperative_matrix && info.cooperative_matrix;

  if (!detail::has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
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
  info.timestamps = p.limits.timestampComputeAndGraphics && families[family].timestampValidBits > 0;

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
  if (ctx->coopmat) {
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
  ctx->check(api.CreateDevice(pick, &di, nullptr, &ctx->device), "creating a device");
  api.load_device(ctx->device);
  api.GetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);

  VkPipelineCacheCreateInfo pc{};

  pc.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  ctx->check(api.CreatePipelineCache(ctx->device, &pc, nullptr, &ctx->cache_), "creating the pipeline cache");
  VkCommandPoolCreateInfo cp{};
  cp.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cp.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cp.queueFamilyIndex = ctx->queue_family;
  ctx->check(api.CreateCommandPool(ctx->device, &cp, nullptr, &ctx->pool_), "creating a command pool");
  VkCommandBufferAllocateInfo ca{};
  ca.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ca.commandPool = ctx->pool_;
  ca.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ca.commandBufferCount = 1;
  ctx->check(api.AllocateCommandBuffers(ctx->device, &ca, &ctx->cmd_), "allocating a command buffer");
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  ctx->check(api.CreateFence(ctx->device, &fi, nullptr, &ctx->fence_), "creating a fence");
  if (info.timestamps) {
    VkQueryPoolCreateInfo qp{};
    qp.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qp.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qp.queryCount = 2;
    ctx->check(api.CreateQueryPool(ctx->device, &qp, nullptr, &ctx->queries_), "creating a query pool");
  }
  return Device(std::move(ctx));
}

Device::Device(std::shared_ptr<Context> c) : ctx_(std::move(c)) {}
Device::~Device() = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;
const DeviceInfo& Device::info() const { return ctx_->info; }
const DeviceOptions& Device::options() const { return ctx_->options; }
DeviceStats Device::stats() const { return ctx_->stats; }
void Device::synchronize() {
  ctx_->submit_and_wait();
  ctx_->verify_index_checks();
}
void Device::begin_timing() { ctx_->begin_timing(); }
Device::Timing Device::end_timing() { return ctx_->end_timing(); }

// ---- Tensor ----------------------------------------------------------------------------------------------------

Tensor::Tensor(std::shared_ptr<detail::Buffer> buffer, Shape shape, DType dtype, int64_t offset)
    : buffer_(std::move(buffer)), shape_(std::move(shape)), dtype_(dtype), offset_(offset) {}

detail::Context& Tensor::ctx() const {
  if (!buffer_) throw ArgumentError("use of an undefined Vulkan tensor");
  return *buffer_->ctx;
}

int64_t Tensor::size(int dim) const { return shape_[normalize_dim(dim, rank())]; }

Tensor Tensor::empty(Device& device, const Shape& shape, DType dtype) {
  for (auto d : shape)
    if (d < 0) throw ArgumentError("negative dimension in shape " + shape_str(shape));
  auto b = device.ctx().allocate(static_cast<uint64_t>(wgtrain::numel(shape)) * 4,
                                 "a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape_str(shape));
  return Tensor(std::move(b), shape, dtype);
}

namespace {
template <class T>
Tensor from_host_impl(Device& device, const Shape& shape, std::span<const T> data, DType dtype) {
  if (static_cast<int64_t>(data.size()) != wgtrain::numel(shape))
    throw ArgumentError("from_host: " + std::to_string(data.size()) + " values given for shape " + shape_str(shape));
  Tensor t = Tensor::empty(device, shape, dtype);
  device.ctx().upload(*t.buffer(), 0, data.data(), data.size() * 4);
  return t;
}
template <class T>
std::vector<T> to_host_impl(const Tensor& t, bool want_float) {
  if (!t.defined()) throw ArgumentError("to_host of an undefined tensor");
  if (want_float != (t.dtype() == DType::F32))
    throw ArgumentError(std::string("to_host: the tensor is ") + dtype_name(t.dtype()));
  std::vector<T> out(static_cast<size_t>(t.numel()));
  t.ctx().download(*t.buffer(), static_cast<uint64_t>(t.offset()) * 4, out.data(), out.size() * 4);
  return out;
}
}  // namespace

Tensor Tensor::from_host(Device& device, const Shape& shape, std::span<const float> data) {
  return from_host_impl(device, shape, data, DType::F32);
}
Tensor Tensor::from_host(Device& device, const Shape& shape, std::span<const int32_t> data) {
  return from_host_impl(device, shape, data, DType::I32);
}
std::vector<float> Tensor::to_host_f32() const { return to_host_impl<float>(*this, true); }
std::vector<int32_t> Tensor::to_host_i32() const { return to_host_impl<int32_t>(*this, false); }

Tensor Tensor::reshape(const Shape& shape) const {
  if (wgtrain::numel(shape) != numel())
    throw ArgumentError("reshape: " + shape_str(shape_) + " has " + std::to_string(numel()) + " elements, " +
                        shape_str(shape) + " has " + std::to_string(wgtrain::numel(shape)));
  return Tensor(buffer_, shape, dtype_, offset_);
}

Tensor Tensor::slice(int64_t start, int64_t end) const {
  if (rank() < 1 || start < 0 || end < start || end > shape_[0])
    throw ArgumentError("slice [" + std::to_string(start) + ", " + std::to_string(end) + ") of " + shape_str(shape_));
  Shape s = shape_;
  s[0] = end - start;
  const int64_t row = rank() > 1 ? wgtrain::numel(Shape(shape_.begin() + 1, shape_.end())) : 1;
  return Tensor(buffer_, s, dtype_, offset_ + start * row);
}

}  // namespace wgtrain::vk
