// The device's internals, for op handlers: buffers and their pool, pipelines, dispatch, index checks, recordings.
// All of it is written once over the backend interface (gpu/backend.h); the pool lives in gpu/pool.cpp, recordings
// in gpu/recording.cpp, the rest in gpu/device.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpu/backend.h"
#include "gpu/kernels.h"
#include "wgtrain/device.h"

namespace wgtrain::detail {

struct RecordingImpl;
struct DeviceImpl;

// GPU memory behind one or more tensors. Returned to the device's pool when the last view goes.
struct Storage {
  std::shared_ptr<DeviceImpl> device;
  BufferHandle buffer = nullptr;
  uint64_t capacity = 0;  // bytes of the pooled buffer (a size class, >= what was asked for)
  uint64_t bytes = 0;     // bytes asked for
  // [min, max] of the int32 values, where the host wrote them (Tensor::from_host); lets index ops check on the host.
  std::optional<std::pair<int32_t, int32_t>> int_range;
  // Filled by the host when allocated (its contents matter from the start), rather than an op's output.
  bool host_written = false;
  // The serial of the recording this storage was allocated in as an op's output; 0 if none (see RecordingImpl).
  uint64_t recorded_in = 0;
  // What it holds, for the memory report: the device's MemoryScope when allocated.
  MemoryCategory category = MemoryCategory::Other;
  ~Storage();
};

// One storage binding: a whole buffer (offsets into it travel in the uniforms, so no alignment rules apply).
struct Binding {
  BufferHandle buffer = nullptr;
};

struct DispatchDesc {
  std::string_view op;              // named in any error the device reports
  const Pipeline* pipeline = nullptr;
  const void* uniforms = nullptr;   // the kernel's parameter block (WGSL @binding(0); GLSL push constants)
  size_t uniform_bytes = 0;
  std::vector<Binding> storage;     // WGSL @binding(1), (2), ...; GLSL binding 0, 1, ... in order
  uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
  bool counted = true;  // false for the runtime's own work (poisoning), kept out of stats.dispatches
  // Bit i set: the kernel only reads storage[i]. Unmarked bindings count as written, which drops what the derived
  // cache (DeviceImpl::derived) holds for their buffers.
  uint32_t read_only = 0;
};

// A result computed from a view of one buffer (the mixed GEMMs' operand absmax), and where it lives.
struct DerivedKey {
  BufferHandle buffer = nullptr;
  uint32_t kind = 0;                  // what was computed (the caller's numbering)
  std::array<int64_t, 7> view = {};   // offset (first: give_derived moves it), sizes and strides of the view
  bool operator==(const DerivedKey&) const = default;
};
struct DerivedValue {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // elements
};
// What the derived cache held for a buffer whose contents will be made again, bit for bit, in another buffer (an
// autograd value dropped in the forward and recomputed in the backward: DeviceImpl::take_derived, give_derived).
struct DerivedCarry {
  uint64_t epoch = 0;     // the cache's generation when taken: nothing carries across a reset (or a recording's edge)
  int64_t offset = 0;     // the contents' offset in their old buffer, in elements
  std::vector<std::pair<DerivedKey, DerivedValue>> entries;
  bool empty() const { return entries.empty(); }
};

// Work recorded by Device::record for replay: dispatches with their parameter blocks, and copies. The backend
// turns them into what it replays fastest (prepare): WebGPU builds every bind group once.
//
// Buffers: a replay reads and writes the same buffers every time, so none of them may be handed to other work
// while the recording lives. Live storages it references are kept (`retained`). A referenced buffer released while
// recording stays with the recording: an op output allocated inside the recording may serve a later output of the
// same recording (commands replay in order, and each output is written before it is read), anything else (host
// data, tensors from before the recording) is pinned as it is, since a later replay reads it again.
struct RecordingImpl {
  struct Command {
    enum Kind : uint8_t { Dispatch, Copy } kind = Dispatch;
    std::string op;
    const Pipeline* pipeline = nullptr;
    size_t uniform_offset = 0, uniform_bytes = 0;  // into `uniforms`; bytes 0: no parameter block
    std::vector<BufferHandle> storage;
    uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
    bool counted = true;
    void* prepared = nullptr;  // the backend's (WebGPU: the bind group)
    BufferHandle src = nullptr, dst = nullptr;  // Copy
    uint64_t src_offset = 0, dst_offset = 0, bytes = 0;
  };
  std::shared_ptr<DeviceImpl> device;
  uint64_t serial = 0;  // this device's recordings count from 1
  std::vector<Command> commands;
  std::vector<uint8_t> uniforms;  // every dispatch's parameter block, at 256-byte aligned offsets
  void* prepared = nullptr;       // the backend's (WebGPU: the uniform buffer)
  std::vector<std::string> index_checks;  // the ops behind the index-error bits its dispatches set
  size_t dispatches = 0;

  std::unordered_set<BufferHandle> referenced;
  std::map<uint64_t, std::vector<BufferHandle>> reusable;  // released op outputs of this recording, by capacity
  std::vector<std::pair<BufferHandle, uint64_t>> pinned;   // released, referenced, not reusable
  std::vector<std::shared_ptr<Storage>> retained;

  ~RecordingImpl();
};

struct DeviceImpl : std::enable_shared_from_this<DeviceImpl> {
  std::unique_ptr<GpuBackend> backend;
  DeviceOptions options;
  // Copies of the backend's, for op handlers.
  AdapterInfo info;
  DeviceLimits limits;
  DeviceFeatures features;
  // Split-K GEMMs: 0 where the shape calls for it (never on a CPU rasteriser), 1 wherever possible (tests), -1 never.
  int split_k = 0;
  // The workgroups a split of the mixed GEMMs (gemm_sm) aims at (split_k.h): fewer than fp32's 1024, as the partial
  // tiles, written and read again, weigh more beside the matrix units' products. Run (x), H200, the mixed step:
  // 128 54.9 ms, 256 48.4, 384 47.5, 512 48.0, 768 47.5, 1024 48.3 (bench's WGTRAIN_SPLIT_TARGET).
  int64_t split_target_mixed = 384;
  // The mixed GEMMs' rows a workgroup (gemm_sm.wgsl's BM): 0, the choice (gemm_sm_rows in gemm_sm.cpp); 128 or 64
  // forced (tests, and the bench's WGTRAIN_GEMM_SM_ROWS).
  int gemm_sm_rows = 0;
  // Tests: the GEMMs run gemm_sm.wgsl though the device lacks subgroup matrices, its text emulated in plain WGSL
  // (tests/support/sm_emulation.h, through the kernel overrides).
  bool gemm_sm_emulated = false;

  explicit DeviceImpl(std::unique_ptr<GpuBackend> b);
  ~DeviceImpl();
  DeviceImpl(const DeviceImpl&) = delete;
  DeviceImpl& operator=(const DeviceImpl&) = delete;

  bool native() const { return info.backend == Backend::NativeVulkan; }
  DeviceStats stats() const;
  // The category new storages take (MemoryScope sets it).
  MemoryCategory category = MemoryCategory::Other;

  // Throws GpuError naming `op` if the device reported anything since the last check; DeviceLostError if lost.
  void check(std::string_view op) { backend->check(op); }

  // ---- buffers (gpu/pool.cpp) ----------------------------------------------------------------------------------
  // `host_write`: the caller fills the buffer with a write before any dispatch uses it, so the buffer must be idle.
  // Otherwise (an op's output) it may also be one released since the last submit: issued dispatches run in order,
  // so the earlier readers are done with it before the new writer starts.
  std::shared_ptr<Storage> allocate(uint64_t bytes, std::string_view what, bool host_write = false);
  void release(Storage& s);  // from ~Storage
  // Hands a buffer back to the pool (it may still be read by issued, unsubmitted work).
  void release_buffer(BufferHandle buffer, uint64_t capacity);
  // Writes host bytes into a buffer, ordered after all work issued so far.
  void write(BufferHandle buffer, uint64_t offset, const void* data, size_t bytes);
  // The same for a buffer no issued work uses (freshly allocated).
  void write_idle(BufferHandle buffer, uint64_t offset, const void* data, size_t bytes);
  // The memory report (Device::memory), a new high-water mark from now, and the idle pool given back.
  MemoryReport memory() const;
  void reset_peak_memory();
  void release_cached();
  // Copies bytes back to the host; submits what is issued and waits for it. The index-error word comes back in the
  // same round trip.
  void read(BufferHandle buffer, uint64_t offset, size_t bytes, void* dst);
  // Issues a buffer-to-buffer copy (sizes and offsets multiples of 4).
  void copy(BufferHandle src, uint64_t src_offset, BufferHandle dst, uint64_t dst_offset, uint64_t bytes);

  // ---- pipelines and dispatch --------------------------------------------------------------------------------
  // The pipeline of one variant of a kernel (the backend caches it). A backend without the kernel raises
  // UnsupportedError naming `op`, the kernel and the backend.
  const Pipeline& pipeline(const std::string& kernel, const KernelDefs& defs);
  void dispatch(const DispatchDesc& d);
  // Splits a 1-D count of workgroups over x and y so neither exceeds the per-dimension limit. Kernels recover the
  // linear index as wid.x + wid.y * num_workgroups.x.
  std::pair<uint32_t, uint32_t> grid(uint64_t workgroups) const;

  // ---- results derived from a buffer's contents (gpu/device.cpp) -----------------------------------------------
  // A few results computed from views of buffers, reused while those buffers are unchanged: the mixed GEMMs' absmax
  // of an operand that several GEMMs read (the normed input of q, k and v) runs once. An entry goes when anything
  // may write its buffer (a dispatch binding it without marking it read-only, a copy or host write into it, its
  // release or reallocation) and all go when a recording starts, ends or replays, so a hit never crosses into or out
  // of a recording whose replays rewrite the buffer.
  std::optional<DerivedValue> derived(const DerivedKey& key) const;
  // Zeroed float32 scratch for such results where kernels combine into zeros atomically: handed out in slices of
  // an arena zeroed by one fill (the caller's `zero`, run when a new arena is made) instead of a fill each. Reset
  // with the cache, so that a recording zeroes (and each replay re-zeroes) the arenas it uses.
  DerivedValue zeroed_scratch(int64_t floats, const std::function<void(const std::shared_ptr<Storage>&)>& zero);
  void remember_derived(const DerivedKey& key, DerivedValue value);
  void forget_derived(BufferHandle buffer);
  void forget_all_derived();
  // Takes out what the cache holds for `buffer`, whose contents start at element `offset` (nothing, if anything may
  // have written it since). give_derived hands it to a buffer that now holds the same contents at element `offset`,
  // unless the cache was reset in between (entry overflow, release_cached_memory, a recording's start, end or
  // replay). The caller vouches that the bits are the same: the same kernel on the same inputs.
  DerivedCarry take_derived(BufferHandle buffer, int64_t offset);
  void give_derived(BufferHandle buffer, int64_t offset, DerivedCarry carry);

  // ---- GPU-side index checks ----------------------------------------------------------------------------------
  // A kernel that may meet an out-of-range index atomically ORs its bit into index_error_buffer() instead of
  // reading; the word is checked (and cleared) at the next read-back or synchronize, naming the op.
  uint32_t index_check_bit(std::string_view op);
  BufferHandle index_error_buffer();

  // ---- submission ---------------------------------------------------------------------------------------------
  void flush();
  void synchronize();

  // ---- recording (Device::record, gpu/recording.cpp) ------------------------------------------------------------
  bool recording() const { return recording_ != nullptr; }
  void begin_recording();
  std::shared_ptr<RecordingImpl> end_recording();
  void abort_recording();
  void replay(const RecordingImpl& r);

 private:
  // Pool: free buffers by capacity. A released buffer joins the free pool only at the next flush, so a buffer that
  // issued-but-unsubmitted work still reads is never overwritten by a host write; until then it serves only op
  // outputs (`released_`, by capacity).
  std::map<uint64_t, std::vector<BufferHandle>> free_buffers_;
  std::map<uint64_t, std::vector<BufferHandle>> released_;
  uint64_t buffers_created_ = 0, pool_hits_ = 0, bytes_allocated_ = 0, peak_bytes_allocated_ = 0;
  BufferHandle create_buffer(uint64_t bytes, std::string_view what);
  // Memory by category: bytes of live storages, and of buffers a live recording keeps after their storage went
  // (`kept_`: the category and bytes they are counted under until reused or handed back to the pool).
  uint64_t in_use_[kMemoryCategories] = {};
  uint64_t idle_bytes_ = 0;  // capacity of the buffers in free_buffers_ and released_
  std::unordered_map<BufferHandle, std::pair<MemoryCategory, uint64_t>> kept_;
  MemoryUsage peak_;
  MemoryUsage usage_now() const;
  void update_peak();
  void uncount_kept(BufferHandle b);
  void poison_on_gpu(BufferHandle b, uint64_t bytes);
  void free_pooled();  // gives every idle pooled buffer back to the backend
  void recycle_released();  // after a submit: released buffers may serve anything

  // By the buffer they were computed from. Past kDerivedEntries (a training step makes a few hundred) it starts over.
  static constexpr size_t kDerivedEntries = 1024;
  std::unordered_map<BufferHandle, std::vector<std::pair<DerivedKey, DerivedValue>>> derived_;
  size_t derived_entries_ = 0;
  uint64_t derived_epoch_ = 0;  // counts forget_all_derived
  static constexpr int64_t kScratchFloats = int64_t{1} << 20;  // an arena of 4 MiB: a training step uses a few
  std::shared_ptr<Storage> scratch_;
  int64_t scratch_used_ = 0;

  BufferHandle index_error_ = nullptr;
  std::vector<std::string> index_checks_;  // op of bit k % 32, since the last verification
  // Raises the error the index word reports for the ops in `ops`, if any (and clears it).
  void settle_index_word(uint32_t word, const std::vector<std::string>& ops);
  void verify_index_checks();

  // The recording in progress, and every live storage by buffer (so a recording can keep what it references).
  std::shared_ptr<RecordingImpl> recording_;
  uint64_t recordings_ = 0;
  std::unordered_map<BufferHandle, std::weak_ptr<Storage>> live_;
  void no_recording(const char* what) const;
  friend struct RecordingImpl;
};

}  // namespace wgtrain::detail
