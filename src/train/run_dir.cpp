// Run directories: the lock, the refuse/resume/overwrite rule, stale temporaries, the writability check.
#include "wgtrain/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "wgtrain/checkpoint.h"
#include "wgtrain/error.h"

namespace wgtrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = ".wgtrain.lock";
constexpr const char* kCheckpoint = "checkpoint.safetensors";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

bool process_alive(long pid) {
  if (pid <= 0) return false;
  // EPERM: it exists, under another user.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// "at step N" from a checkpoint's trainer state, or "" when it cannot be read (the message is then less precise,
// not wrong).
std::string checkpoint_step(const fs::path& ckpt) {
  try {
    const CheckpointInfo info = peek_checkpoint_info(ckpt.string());
    const auto state = nlohmann::json::parse(info.state);
    return " at step " + std::to_string(state.at("step").get<long long>());
  } catch (const std::exception&) {
    return "";
  }
}

void remove_file(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  if (ec) throw Error("cannot remove " + quoted(p) + ": " + ec.message());
}

}  // namespace

const std::vector<std::string>& RunDirectory::run_files() {
  // What Trainer writes (wgtrain/trainer.h): a model run's files and a LoRA run's.
  static const std::vector<std::string> files = {kCheckpoint,
                                                 "tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "chat_template.jinja",
                                                 "generation_config.json",
                                                 "config.json",
                                                 "adapter_model.safetensors",
                                                 "adapter_config.json",
                                                 "loss.csv",
                                                 "loss.png"};
  return files;
}

std::vector<std::string> RunDirectory::run_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& f : run_files())
    if (fs::exists(dir / f, ec)) out.push_back(f);
  return out;
}

long RunDirectory::temporary_owner(const std::string& name) {
  for (const auto& f : run_files()) {
    const std::string prefix = f + ".tmp";
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (rest.empty()) return 0;
    if (rest.size() < 2 || rest[0] != '.' || rest.size() > 12) continue;
    if (!std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    return std::stol(rest.substr(1));
  }
  return -1;
}

RunDirectory::RunDirectory(const std::string& dir, RunMode mode) : path_(dir) {
  if (path_.empty()) throw ArgumentError("the run directory (--out) is empty");
  std::error_code ec;
  if (fs::exists(path_, ec) && !fs::is_directory(path_, ec))
    throw Error("--out " + quoted(path_) + " is a file, not a directory: give a directory for the run");
  if (mode == RunMode::Resume && !fs::exists(path_ / kCheckpoint, ec))
    throw Error("--resume: " + quoted(path_) + " holds no run to continue (no " + kCheckpoint + ")" +
                (fs::exists(path_, ec) ? "" : ": the directory does not exist"));
  fs::create_directories(path_, ec);
  if (ec) throw Error("cannot create the run directory " + quoted(path_) + ": " + ec.message());

  // The lock file doubles as the writability check: every run writes it.
  const fs::path lock = path_ / kLockFile;
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    throw Error("cannot write in the run directory " + quoted(path_) + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    std::ifstream(lock) >> holder;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err != EWOULDBLOCK)
      throw Error("cannot lock the run directory " + quoted(path_) + ": " + std::strerror(err));
    throw Error(quoted(path_) + " is in use by another wgtrain run" +
                (holder.empty() ? std::string() : " (process " + holder + ")") +
                ": wait for it to finish, stop it (Ctrl-C or kill: it saves a checkpoint), or choose another --out");
  }
  try {  // a constructor that throws runs no destructor: the lock is released by hand below
    // Our pid in the lock file, for the message a second opener gets. A directory that takes the lock file but
    // not a new file (a full disk, a quota) fails here rather than at the first checkpoint.
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(lock_fd_, 0) != 0 ||
        ::pwrite(lock_fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
      throw Error("cannot write in the run directory " + quoted(path_) + ": " + std::strerror(errno));
    const fs::path probe = path_ / (".wgtrain.probe." + std::to_string(::getpid()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot write in the run directory " + quoted(path_) + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());

    const std::vector<std::string> present = run_files_in(path_);
    if (mode == RunMode::New && !present.empty()) {
      if (std::find(present.begin(), present.end(), kCheckpoint) != present.end())
        throw Error(quoted(path_) + " already holds a run (checkpoint" + checkpoint_step(path_ / kCheckpoint) +
                    "): continue it with --resume, start over with --overwrite (deletes it), or choose another --out");
      // A run that ended before its first checkpoint: nothing to resume.
      std::string files;
      for (const auto& f : present) files += (files.empty() ? "" : ", ") + f;
      throw Error(quoted(path_) + " already holds part of a run that saved no checkpoint (" + files +
                  "): start over with --overwrite (deletes it), or choose another --out");
    }
    if (mode == RunMode::Overwrite) {
      // A Hugging Face model shares file names with a run (config.json, tokenizer files): never delete those.
      for (const char* weights : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"})
        if (fs::exists(path_ / weights, ec))
          throw Error(quoted(path_) + " holds a model (" + weights + "), not a wgtrain run: --overwrite deletes "
                      "only runs; choose another --out");
      for (const auto& f : present) remove_file(path_ / f);
      removed_run_files_ = present;
    }
    // Temporaries of saves that never finished. With the lock ours, no live wgtrain writes here; the pid check
    // keeps a temporary whose writer somehow still runs.
    for (const auto& entry : fs::directory_iterator(path_, ec)) {
      const std::string name = entry.path().filename().string();
      const long owner = temporary_owner(name);
      if (owner < 0 || owner == ::getpid() || process_alive(owner) || !entry.is_regular_file(ec)) continue;
      remove_file(entry.path());
      removed_temporaries_.push_back(name);
    }
    std::sort(removed_temporaries_.begin(), removed_temporaries_.end());
  } catch (...) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing drops the lock; the file stays (unlinking it would race)
}

RunDirectory::RunDirectory(RunDirectory&& o) noexcept
    : path_(std::move(o.path_)), lock_fd_(std::exchange(o.lock_fd_, -1)),
      removed_temporaries_(std::move(o.removed_temporaries_)), removed_run_files_(std::move(o.removed_run_files_)) {}

RunDirectory& RunDirectory::operator=(RunDirectory&& o) noexcept {
  if (this != &o) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    path_ = std::move(o.path_);
    lock_fd_ = std::exchange(o.lock_fd_, -1);
    removed_temporaries_ = std::move(o.removed_temporaries_);
    removed_run_files_ = std::move(o.removed_run_files_);
  }
  return *this;
}

}  // namespace wgtrain
