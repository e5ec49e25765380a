// The buffer pool over any backend: size classes, reuse of released buffers in issue order, poisoning, and the
// memory accounting (bytes by category, the high-water mark).
#include <algorithm>

#include "gpu/device_impl.h"
#include "wgtrain/error.h"

namespace wgtrain::detail {

namespace {

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

Storage::~Storage() {
  if (device && buffer) device->release(*this);
}

BufferHandle DeviceImpl::create_buffer(uint64_t bytes, std::string_view what) {
  BufferHandle b = backend->create_buffer(bytes, what);
  if (!b) {
    // Give the pool's idle buffers back and try once more.
    synchronize();
    free_pooled();
    backend->synchronize();  // a destroyed buffer's memory may come back only once the GPU is past it
    b = backend->create_buffer(bytes, what);
  }
  if (!b)
    throw GpuError("out of GPU memory allocating " + std::to_string(bytes) + " bytes for " + std::string(what) +
                   " (" + std::to_string(bytes_allocated_) + " bytes already held on " + info.name + ")");
  ++buffers_created_;
  bytes_allocated_ += bytes;
  peak_bytes_allocated_ = std::max(peak_bytes_allocated_, bytes_allocated_);
  update_peak();
  return b;
}

// ---- memory accounting ----------------------------------------------------------------------------------------

MemoryUsage DeviceImpl::usage_now() const {
  MemoryUsage u;
  u.total = bytes_allocated_;
  uint64_t used = 0;
  for (int c = 0; c < kMemoryCategories; ++c) used += u.by_category[c] = in_use_[c];
  u.pool_overhead = bytes_allocated_ - used;
  u.idle = idle_bytes_;
  return u;
}

// Called whenever the total or the bytes in use grow: a new high-water mark, or the same total with more of it in use
// (the most telling moment of the peak).
void DeviceImpl::update_peak() {
  if (bytes_allocated_ < peak_.total) return;
  const MemoryUsage now = usage_now();
  if (now.total > peak_.total || now.pool_overhead < peak_.pool_overhead) peak_ = now;
}

void DeviceImpl::uncount_kept(BufferHandle b) {
  auto it = kept_.find(b);
  if (it == kept_.end()) return;
  in_use_[static_cast<int>(it->second.first)] -= it->second.second;
  kept_.erase(it);
}

MemoryReport DeviceImpl::memory() const { return {usage_now(), peak_}; }

void DeviceImpl::reset_peak_memory() { peak_ = usage_now(); }

void DeviceImpl::release_cached() {
  no_recording("releasing the cached memory");
  // Derived results (operand maxima) and the zeroed scratch arena are caches too: their buffers go back first, so
  // what the caller sees afterwards is only what live tensors hold.
  forget_all_derived();
  synchronize();
  free_pooled();
  backend->trim();
  backend->synchronize();  // a destroyed buffer's memory may come back only once the GPU is past it
}

void DeviceImpl::free_pooled() {
  for (auto& [cap, list] : free_buffers_)
    for (auto b : list) {
      backend->destroy_buffer(b);
      bytes_allocated_ -= cap;
      idle_bytes_ -= cap;
    }
  free_buffers_.clear();
}

void DeviceImpl::recycle_released() {
  for (auto& [cap, list] : released_) {
    auto& free = free_buffers_[cap];
    free.insert(free.end(), list.begin(), list.end());
  }
  released_.clear();
}

std::shared_ptr<Storage> DeviceImpl::allocate(uint64_t bytes, std::string_view what, bool host_write) {
  if (backend->lost()) check(what);
  bytes = std::max<uint64_t>(bytes, 4);
  const uint64_t most = std::min(limits.max_storage_binding_size, limits.max_buffer_size);
  if (bytes > most)
    throw ArgumentError(std::string(what) + " needs " + std::to_string(bytes) +
                        " bytes, more than this device can bind in one buffer (" + std::to_string(most) +
                        " bytes on " + info.name + ")");
  const uint64_t cap = std::max(bytes, std::min(size_class(bytes), most / 4 * 4));
  BufferHandle b = nullptr;
  auto take = [&](std::map<uint64_t, std::vector<BufferHandle>>& pool) {
    auto it = pool.find(cap);
    if (it == pool.end() || it->second.empty()) return false;
    b = it->second.back();
    it->second.pop_back();
    ++pool_hits_;
    return true;
  };
  // While recording, an output first takes a buffer this recording's earlier outputs released.
  const bool reused = recording_ && !host_write && take(recording_->reusable);
  if (reused) uncount_kept(b);  // counted under its previous tensor until now
  if (!reused) {
    if (take(free_buffers_) || (!host_write && take(released_))) idle_bytes_ -= cap;
    else b = create_buffer(cap, what);
  }
  forget_derived(b);
  // A buffer the host is about to fill needs no poison; an op's output is poisoned in order on the GPU.
  if (options.poison && !host_write) poison_on_gpu(b, cap);
  auto s = std::make_shared<Storage>();
  s->device = shared_from_this();
  s->buffer = b;
  s->capacity = cap;
  s->bytes = bytes;
  s->host_written = host_write;
  s->category = category;
  if (recording_ && !host_write) s->recorded_in = recording_->serial;
  live_[b] = s;
  in_use_[static_cast<int>(category)] += bytes;
  update_peak();
  return s;
}

void DeviceImpl::poison_on_gpu(BufferHandle b, uint64_t bytes) {
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
  forget_derived(s.buffer);
  if (recording_ && recording_->referenced.count(s.buffer)) {
    // The recording keeps the buffer (its replays use it): still counted, as this storage's until reused.
    kept_[s.buffer] = {s.category, s.bytes};
    if (s.recorded_in == recording_->serial && !s.host_written)
      recording_->reusable[s.capacity].push_back(s.buffer);
    else
      recording_->pinned.emplace_back(s.buffer, s.capacity);
    return;
  }
  in_use_[static_cast<int>(s.category)] -= s.bytes;
  release_buffer(s.buffer, s.capacity);
}

void DeviceImpl::release_buffer(BufferHandle buffer, uint64_t capacity) {
  uncount_kept(buffer);  // a recording's kept buffer, handed back when the recording goes
  released_[capacity].push_back(buffer);
  idle_bytes_ += capacity;
}

}  // namespace wgtrain::detail
