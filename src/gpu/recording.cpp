// Device::record and Recording::replay over any backend: the commands and the buffers they keep.
#include <cstring>

#include "gpu/device_impl.h"
#include "wgtrain/error.h"

namespace wgtrain::detail {

RecordingImpl::~RecordingImpl() {
  device->backend->release(*this);
  for (auto& [cap, list] : reusable)
    for (auto b : list) device->release_buffer(b, cap);
  for (auto& [b, cap] : pinned) device->release_buffer(b, cap);
  retained.clear();  // the last references go back to the pool as usual
}

void DeviceImpl::begin_recording() {
  if (recording_) throw Error("Device::record: a recording is already in progress (recordings do not nest)");
  if (backend->lost()) check("recording");
  // Work issued so far runs before anything recorded; its index checks are settled now, so the recording's own
  // start at bit 0.
  flush();
  verify_index_checks();
  forget_all_derived();
  recording_ = std::make_shared<RecordingImpl>();
  recording_->device = shared_from_this();
  recording_->serial = ++recordings_;
}

void DeviceImpl::abort_recording() {
  if (!recording_) return;
  forget_all_derived();
  std::shared_ptr<RecordingImpl> r = std::move(recording_);
  recording_.reset();
  index_checks_.clear();
  r->commands.clear();  // nothing was built; its buffers go back to the pool with it
}

std::shared_ptr<RecordingImpl> DeviceImpl::end_recording() {
  if (!recording_) throw Error("Device::end_recording without begin_recording");
  forget_all_derived();  // its storages are released while the recording can still take them back
  std::shared_ptr<RecordingImpl> r = std::move(recording_);
  recording_.reset();
  r->index_checks = std::move(index_checks_);
  index_checks_.clear();
  try {
    backend->prepare(*r);
  } catch (...) {
    r->retained.clear();
    throw;
  }
  // Keep every live storage a command references: a replay may run long after the tensors that made it are gone.
  for (BufferHandle b : r->referenced)
    if (auto it = live_.find(b); it != live_.end())
      if (auto s = it->second.lock()) r->retained.push_back(std::move(s));
  r->referenced.clear();
  check("recording");
  return r;
}

void DeviceImpl::replay(const RecordingImpl& r) {
  no_recording("replaying a recording");
  if (r.device.get() != this) throw ArgumentError("replay: the recording belongs to another device");
  if (backend->lost()) check("replay");
  // Index-error bits are numbered per recording: settle other work's before this recording's take them over
  // (a recording replayed back to back shares its own numbering).
  if (!index_checks_.empty() && index_checks_ != r.index_checks) verify_index_checks();
  forget_all_derived();
  backend->replay(r);
  index_checks_ = r.index_checks;
  check("replay");
}

void DeviceImpl::no_recording(const char* what) const {
  if (recording_)
    throw Error(std::string(what) + " while recording: a recording holds GPU work only (read back or write inputs "
                "before or after Device::record, not inside it)");
}

}  // namespace wgtrain::detail
