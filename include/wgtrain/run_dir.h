// A run directory and the rules that keep a run in it from being lost (wgtrain train; README "A run's directory"):
//
//   - A new run starts only in a directory that holds no run: none of the run's files (run_files()) is there.
//     Other files are left alone. A directory with a run is refused with a message naming --resume (continue it)
//     and --overwrite (start over: the run's files are deleted first, nothing else; a directory holding a Hugging
//     Face model's weights is never overwritten).
//   - One process at a time: an advisory lock (flock on DIR/.wgtrain.lock, which holds the owner's pid) is held as
//     long as the RunDirectory lives; a second opener is refused, naming the process that holds it. The kernel
//     drops the lock when its holder dies, however it dies.
//   - A save killed midway leaves its temporary (X.tmp.<pid>, X one of the run's files): opening removes those
//     whose process is gone, and X.tmp ones (which no live writer can hold while the lock is ours).
//   - The directory is created if needed and must be writable: checked by writing a file in it, before any work.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace wgtrain {

enum class RunMode {
  New,        // the directory must hold no run
  Resume,     // the directory must hold the run's checkpoint
  Overwrite,  // whatever run the directory holds is deleted
};

class RunDirectory {
 public:
  // Creates `dir` if needed, checks that it can be written, takes the lock, applies `mode`'s rule, and removes
  // stale temporaries. Throws Error saying what is wrong and what to do.
  RunDirectory(const std::string& dir, RunMode mode);
  ~RunDirectory();  // releases the lock
  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&& other) noexcept;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // What opening removed (file names within the directory): stale temporaries, and with Overwrite the old run.
  const std::vector<std::string>& removed_temporaries() const { return removed_temporaries_; }
  const std::vector<std::string>& removed_run_files() const { return removed_run_files_; }

  // The files that make up a run (checkpoint.safetensors, tokenizer and config files, adapters, loss.csv, loss.png).
  static const std::vector<std::string>& run_files();
  // Those of them present in `dir` (none when it does not exist).
  static std::vector<std::string> run_files_in(const std::filesystem::path& dir);
  // The pid a temporary file name carries ("checkpoint.safetensors.tmp.1234" -> 1234) when it is one of a run
  // file's; -1 for any other name; 0 for "X.tmp" (no pid).
  static long temporary_owner(const std::string& file_name);

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
  std::vector<std::string> removed_temporaries_, removed_run_files_;
};

}  // namespace wgtrain
