// Device: opening a backend, and the parts of the runtime every backend shares: transfers with their index checks,
// pipelines, dispatch and recording of commands, submission.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/device_impl.h"
#include "wgtrain/error.h"

namespace wgtrain {

using detail::DeviceImpl;

namespace {

struct BackendName {
  Backend backend;
  const char* name;
};
constexpr BackendName kBackendNames[] = {
    {Backend::Auto, "auto"},
    {Backend::WebGpu, "webgpu"},
    {Backend::WebGpuVulkan, "webgpu-vulkan"},
    {Backend::WebGpuOpenGL, "webgpu-opengl"},
    {Backend::WebGpuOpenGLES, "webgpu-opengles"},
    {Backend::NativeVulkan, "native-vulkan"},
};

}  // namespace

const char* backend_name(Backend b) {
  for (const auto& n : kBackendNames)
    if (n.backend == b) return n.name;
  return "?";
}

const char* backend_choices() { return "auto, webgpu, webgpu-vulkan, webgpu-opengl, webgpu-opengles, native-vulkan"; }

Backend parse_backend(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& b : kBackendNames)
    if (n == b.name) return b.backend;
  // The old spellings meant different things in different places; name the new one instead of guessing.
  if (n == "vulkan")
    throw ArgumentError("backend 'vulkan' is ambiguous: say webgpu-vulkan (WebGPU through Dawn on Vulkan) or "
                        "native-vulkan (the native Vulkan backend)");
  if (n == "opengl" || n == "gl") throw ArgumentError("backend '" + name + "' is now spelled webgpu-opengl");
  if (n == "opengles" || n == "gles") throw ArgumentError("backend '" + name + "' is now spelled webgpu-opengles");
  throw ArgumentError("unknown backend '" + name + "' (choose from " + backend_choices() + ")");
}

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Other: return "other";
    case MemoryCategory::Weights: return "weights";
    case MemoryCategory::OptimizerState: return "optimizer state";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::Temporaries: return "temporaries";
  }
  return "?";
}

std::string describe_memory(const MemoryUsage& u) {
  auto mib = [](uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
    return std::string(buf);
  };
  std::string s = mib(u.total) + ":";
  const char* sep = " ";
  for (MemoryCategory c : {MemoryCategory::Weights, MemoryCategory::OptimizerState, MemoryCategory::Gradients,
                           MemoryCategory::Activations, MemoryCategory::Temporaries, MemoryCategory::Other}) {
    if (u[c] == 0) continue;
    s += sep + std::string(memory_category_name(c)) + " " + mib(u[c]);
    sep = ", ";
  }
  return s + sep + "pool overhead " + mib(u.pool_overhead);
}

MemoryScope::MemoryScope(Device& device, MemoryCategory category)
    : device_(&device.impl()), previous_(device.impl().category) {
  device_->category = category;
}
MemoryScope::~MemoryScope() { device_->category = previous_; }

namespace detail {

constexpr size_t kMaxBindings = 15;

DeviceImpl::DeviceImpl(std::unique_ptr<GpuBackend> b) : backend(std::move(b)) {
  info = backend->info;
  limits = backend->limits;
  features = backend->features;
}

DeviceImpl::~DeviceImpl() {
  try {
    if (!backend->lost()) synchronize();
  } catch (...) {
    // Teardown must not throw; a failing last submit has nothing left to report to.
  }
  recording_.reset();
  free_pooled();
  for (auto& [cap, list] : released_)
    for (auto b : list) backend->destroy_buffer(b);
  if (index_error_) backend->destroy_buffer(index_error_);
  backend.reset();
}

DeviceStats DeviceImpl::stats() const {
  DeviceStats s;
  s.dispatches = backend->dispatches;
  s.submits = backend->submits;
  s.pipelines_created = backend->pipelines_created;
  s.buffers_created = buffers_created_;
  s.pool_hits = pool_hits_;
  s.bytes_allocated = bytes_allocated_;
  s.peak_bytes_allocated = peak_bytes_allocated_;
  return s;
}

// ---- transfers ------------------------------------------------------------------------------------------------

void DeviceImpl::write(BufferHandle buffer, uint64_t offset, const void* data, size_t bytes) {
  no_recording("writing into a tensor");
  if (bytes == 0) return;
  forget_derived(buffer);
  backend->write(buffer, offset, data, bytes, false);
  check("upload");
}

void DeviceImpl::write_idle(BufferHandle buffer, uint64_t offset, const void* data, size_t bytes) {
  if (bytes == 0) return;
  forget_derived(buffer);
  backend->write(buffer, offset, data, bytes, true);
  check("upload");
}

void DeviceImpl::read(BufferHandle buffer, uint64_t offset, size_t bytes, void* dst) {
  no_recording("reading a tensor back");
  if (bytes == 0) return;
  // The index-error word travels with the data: one round trip, not two.
  uint32_t word = 0;
  const std::vector<std::string> ops = std::move(index_checks_);
  index_checks_.clear();
  std::vector<ReadRange> ranges = {{buffer, offset, bytes, dst}};
  if (!ops.empty() && index_error_) ranges.push_back({index_error_, 0, sizeof word, &word});
  backend->read(ranges);
  recycle_released();
  check("read-back");
  settle_index_word(word, ops);
}

void DeviceImpl::copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return;
  forget_derived(dst);
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
  backend->copy(src, src_offset, dst, dst_offset, bytes);
  check("copy");
}

// ---- derived results ------------------------------------------------------------------------------------------

std::optional<DerivedValue> DeviceImpl::derived(const DerivedKey& key) const {
  if (auto it = derived_.find(key.buffer); it != derived_.end())
    for (const auto& [k, v] : it->second)
      if (k == key) return v;
  return std::nullopt;
}

void DeviceImpl::remember_derived(const DerivedKey& key, DerivedValue value) {
  if (derived_entries_ == kDerivedEntries) forget_all_derived();
  derived_[key.buffer].emplace_back(key, std::move(value));
  ++derived_entries_;
}

// Entries leave the map before their storages go: a storage's release calls forget_derived again.
void DeviceImpl::forget_derived(BufferHandle buffer) {
  auto it = derived_.find(buffer);
  if (it == derived_.end()) return;
  const auto gone = std::move(it->second);
  derived_.erase(it);
  derived_entries_ -= gone.size();
}

void DeviceImpl::forget_all_derived() {
  const auto gone = std::move(derived_);
  const auto scratch = std::move(scratch_);
  derived_.clear();
  derived_entries_ = 0;
  ++derived_epoch_;
  scratch_.reset();
  scratch_used_ = 0;
}

DerivedCarry DeviceImpl::take_derived(BufferHandle buffer, int64_t offset) {
  DerivedCarry carry{derived_epoch_, offset, {}};
  auto it = derived_.find(buffer);
  if (it == derived_.end()) return carry;
  carry.entries = std::move(it->second);
  derived_.erase(it);
  derived_entries_ -= carry.entries.size();
  return carry;
}

void DeviceImpl::give_derived(BufferHandle buffer, int64_t offset, DerivedCarry carry) {
  if (carry.epoch != derived_epoch_) return;
  for (auto& [key, value] : carry.entries) {
    key.buffer = buffer;
    key.view[0] += offset - carry.offset;  // every kind's view starts with its offset (DerivedKey::view)
    remember_derived(key, std::move(value));
  }
}

DerivedValue DeviceImpl::zeroed_scratch(int64_t floats, const std::function<void(const std::shared_ptr<Storage>&)>& zero) {
  if (!scratch_ || scratch_used_ + floats > static_cast<int64_t>(scratch_->bytes / 4)) {
    const int64_t n = std::max(floats, kScratchFloats);
    auto s = allocate(static_cast<uint64_t>(n) * 4, "zeroed scratch");
    zero(s);
    scratch_ = std::move(s);
    scratch_used_ = 0;
  }
  const DerivedValue v{scratch_, scratch_used_};
  scratch_used_ += floats;
  return v;
}

// ---- index checks ---------------------------------------------------------------------------------------------

uint32_t DeviceImpl::index_check_bit(std::string_view op) {
  index_checks_.emplace_back(op);
  return 1u << ((index_checks_.size() - 1) % 32);
}

BufferHandle DeviceImpl::index_error_buffer() {
  if (!index_error_) {
    index_error_ = create_buffer(256, "index errors");
    const uint32_t zero = 0;
    backend->write(index_error_, 0, &zero, sizeof zero, true);
  }
  return index_error_;
}

void DeviceImpl::settle_index_word(uint32_t word, const std::vector<std::string>& ops) {
  if (word == 0) return;
  const uint32_t zero = 0;
  backend->write(index_error_, 0, &zero, sizeof zero, false);
  std::string names;
  for (size_t k = 0; k < ops.size(); ++k)
    if (word & (1u << (k % 32))) names += (names.empty() ? "'" : ", '") + ops[k] + "'";
  throw ArgumentError("an index was out of range in " + names +
                      " (found on the GPU: those elements were written as 0, nothing was read out of bounds)");
}

void DeviceImpl::verify_index_checks() {
  if (index_checks_.empty() || recording_ || !index_error_) return;
  const std::vector<std::string> ops = std::move(index_checks_);
  index_checks_.clear();
  uint32_t word = 0;
  const ReadRange r{index_error_, 0, sizeof word, &word};
  backend->read({&r, 1});
  recycle_released();
  settle_index_word(word, ops);
}

// ---- pipelines and dispatch -------------------------------------------------------------------------------------

const Pipeline& DeviceImpl::pipeline(const std::string& kernel, const KernelDefs& defs) {
  return backend->pipeline(kernel, defs);
}

std::pair<uint32_t, uint32_t> DeviceImpl::grid(uint64_t workgroups) const {
  const uint64_t maxd = limits.max_workgroups_per_dim;
  if (workgroups <= maxd) return {static_cast<uint32_t>(std::max<uint64_t>(workgroups, 1)), 1};
  const uint64_t y = (workgroups + maxd - 1) / maxd;
  if (y > maxd) throw ArgumentError("work of " + std::to_string(workgroups) + " workgroups exceeds the device's grid");
  const uint64_t x = (workgroups + y - 1) / y;
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y)};
}

void DeviceImpl::dispatch(const DispatchDesc& d) {
  if (backend->lost()) check(d.op);
  const uint32_t maxd = limits.max_workgroups_per_dim;
  if (d.groups_x > maxd || d.groups_y > maxd || d.groups_z > maxd)
    throw Error("'" + std::string(d.op) + "': dispatch of " + std::to_string(d.groups_x) + "x" +
                std::to_string(d.groups_y) + "x" + std::to_string(d.groups_z) +
                " workgroups exceeds the per-dimension limit " + std::to_string(maxd));
  if (d.groups_x == 0 || d.groups_y == 0 || d.groups_z == 0) return;
  if (d.storage.size() > kMaxBindings) throw Error("'" + std::string(d.op) + "': too many bindings");
  if (!derived_.empty())
    for (size_t i = 0; i < d.storage.size(); ++i)
      if (!(d.read_only >> i & 1u)) forget_derived(d.storage[i].buffer);
  if (recording_) {
    RecordingImpl& r = *recording_;
    RecordingImpl::Command c;
    c.op = std::string(d.op);
    c.pipeline = d.pipeline;
    if (d.uniforms) {
      c.uniform_offset = (r.uniforms.size() + 255) / 256 * 256;
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
  BufferHandle storage[kMaxBindings];
  for (size_t i = 0; i < d.storage.size(); ++i) storage[i] = d.storage[i].buffer;
  backend->dispatch({d.op, d.pipeline, d.uniforms, d.uniform_bytes, {storage, d.storage.size()}, d.groups_x,
                     d.groups_y, d.groups_z, d.counted});
}

// ---- submission -------------------------------------------------------------------------------------------------

void DeviceImpl::flush() {
  backend->flush();
  // Everything issued is submitted: buffers released so far may now be handed out for anything.
  recycle_released();
  check("submit");
}

void DeviceImpl::synchronize() {
  backend->synchronize();
  recycle_released();
  check("synchronize");
  verify_index_checks();
}

}  // namespace detail

// ---- Device ------------------------------------------------------------------------------------------------------

Device::Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
// The derived cache holds storages, which hold the device: let it go with the Device, or neither would be freed.
Device::~Device() {
  if (impl_) impl_->forget_all_derived();
}
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->forget_all_derived();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

const AdapterInfo& Device::info() const { return impl_->info; }
const DeviceLimits& Device::limits() const { return impl_->limits; }
const DeviceFeatures& Device::features() const { return impl_->features; }
DeviceStats Device::stats() const { return impl_->stats(); }
std::vector<OpProfile> Device::profile() { return impl_->recording() ? std::vector<OpProfile>{} : impl_->backend->profile(); }
MemoryReport Device::memory() const { return impl_->memory(); }
void Device::reset_peak_memory() { impl_->reset_peak_memory(); }
void Device::release_cached_memory() { impl_->release_cached(); }
void Device::flush() { impl_->flush(); }
void Device::synchronize() { impl_->synchronize(); }
void Device::begin_timing() { impl_->backend->begin_timing(); }
Device::Timing Device::end_timing() {
  const Timing t = impl_->backend->end_timing();
  impl_->check("timing");
  return t;
}
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
  DeviceOptions options = requested;
  if (options.backend == Backend::Auto) {
    options.backend = Backend::WebGpu;
    if (const char* env = std::getenv("WGTRAIN_BACKEND"); env && *env) options.backend = parse_backend(env);
    if (options.backend == Backend::Auto) options.backend = Backend::WebGpu;
  }
  if (const char* env = std::getenv("WGTRAIN_POISON"); env && std::string(env) == "1") options.poison = true;
  if (const char* env = std::getenv("WGTRAIN_PROFILE"); env && std::string(env) == "1") options.profile = true;
#ifdef __EMSCRIPTEN__
  if (options.backend == Backend::NativeVulkan)
    throw UnsupportedError("the browser build has no native Vulkan backend: use the browser's WebGPU (backend auto)");
  std::unique_ptr<detail::GpuBackend> backend = detail::open_webgpu(options);
#else
  std::unique_ptr<detail::GpuBackend> backend = options.backend == Backend::NativeVulkan
                                                    ? detail::open_native_vulkan(options)
                                                    : detail::open_webgpu(options);
#endif
  auto impl = std::make_shared<DeviceImpl>(std::move(backend));
  impl->options = options;
  return Device(std::move(impl));
}

}  // namespace wgtrain
