// Run directories: a run is never overwritten unasked, two processes never share one, a save killed midway leaves
// nothing behind for long, and a directory that cannot hold a run is refused before any work.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "wgtrain/error.h"
#include "wgtrain/run_dir.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;

fs::path scratch_root() { return fs::temp_directory_path() / ("wgtrain-run-dir-test-" + std::to_string(::getpid())); }

// Removes this process's scratch directories at exit (forked children leave through _exit, without it).
const struct RemoveScratch {
  ~RemoveScratch() {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
} remove_scratch;

fs::path scratch(const std::string& name) {
  const fs::path p = scratch_root() / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p;
}

void touch(const fs::path& p, const std::string& text = "x") { std::ofstream(p) << text; }

// The message of the Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A pid that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(RunDir, ANewRunStartsInAMissingOrEmptyDirectory) {
  const fs::path dir = scratch("new") / "nested";
  {
    const RunDirectory run(dir.string(), RunMode::New);
    EXPECT_TRUE(fs::is_directory(dir));
  }
  // The lock file left behind is not a run: starting again is fine.
  EXPECT_NO_THROW(RunDirectory(dir.string(), RunMode::New));
  // Nor are files that are not the run's.
  touch(dir / "notes.txt");
  EXPECT_NO_THROW(RunDirectory(dir.string(), RunMode::New));
}

TEST(RunDir, ADirectoryHoldingARunIsRefusedNamingResumeAndOverwrite) {
  const fs::path dir = scratch("held");
  fs::create_directories(dir);
  touch(dir / "checkpoint.safetensors", "not really a checkpoint");
  touch(dir / "loss.csv");
  const std::string msg = error_of([&] { RunDirectory(dir.string(), RunMode::New); });
  EXPECT_NE(msg.find("already holds a run"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--resume"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--overwrite"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(dir / "checkpoint.safetensors"));
  // Part of a run (a run stopped before its first checkpoint) is a run too, but not one to resume.
  fs::remove(dir / "checkpoint.safetensors");
  const std::string part = error_of([&] { RunDirectory(dir.string(), RunMode::New); });
  EXPECT_NE(part.find("part of a run that saved no checkpoint (loss.csv)"), std::string::npos) << part;
  EXPECT_NE(part.find("--overwrite"), std::string::npos) << part;
}

TEST(RunDir, OverwriteDeletesTheRunAndNothingElse) {
  const fs::path dir = scratch("overwrite");
  fs::create_directories(dir);
  for (const auto& f : RunDirectory::run_files()) touch(dir / f);
  touch(dir / "notes.txt");
  const RunDirectory run(dir.string(), RunMode::Overwrite);
  EXPECT_EQ(run.removed_run_files().size(), RunDirectory::run_files().size());
  EXPECT_TRUE(RunDirectory::run_files_in(dir).empty());
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
}

TEST(RunDir, OverwriteNeverDeletesAHuggingFaceModel) {
  // A model directory has a run's file names (config.json, tokenizer.json) beside its weights.
  const fs::path dir = scratch("hf-model");
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"}) touch(dir / f);
  const std::string msg = error_of([&] { RunDirectory(dir.string(), RunMode::Overwrite); });
  EXPECT_NE(msg.find("not a wgtrain run"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json"));
}

TEST(RunDir, ResumeNeedsACheckpointAndCreatesNothing) {
  const fs::path dir = scratch("resume");
  const std::string msg = error_of([&] { RunDirectory(dir.string(), RunMode::Resume); });
  EXPECT_NE(msg.find("no run to continue"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir));
  fs::create_directories(dir);
  touch(dir / "checkpoint.safetensors");
  EXPECT_NO_THROW(RunDirectory(dir.string(), RunMode::Resume));
}

TEST(RunDir, ASecondOpenerIsRefusedWhileTheFirstHoldsTheLock) {
  const fs::path dir = scratch("locked");
  {
    const RunDirectory first(dir.string(), RunMode::New);
    // flock locks belong to open files, so a second open in this process contends as another process would.
    const std::string msg = error_of([&] { RunDirectory(dir.string(), RunMode::Overwrite); });
    EXPECT_NE(msg.find("in use by another wgtrain run"), std::string::npos) << msg;
    EXPECT_NE(msg.find("process " + std::to_string(::getpid())), std::string::npos) << msg;
    // And in a child process, which is what two runs are.
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        RunDirectory second(dir.string(), RunMode::Overwrite);
      } catch (const Error&) {
        ::_exit(7);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
  }
  // Released with its holder.
  EXPECT_NO_THROW(RunDirectory(dir.string(), RunMode::Overwrite));
}

TEST(RunDir, StaleTemporariesOfTheRunsFilesAreRemoved) {
  const fs::path dir = scratch("stale");
  fs::create_directories(dir);
  const std::string dead = std::to_string(dead_pid());
  touch(dir / ("checkpoint.safetensors.tmp." + dead));          // a save killed midway: removed
  touch(dir / "config.json.tmp");                                // no pid, and no live writer under the lock
  touch(dir / ("checkpoint.safetensors.tmp." + std::to_string(::getppid())));  // its writer lives: kept
  touch(dir / ("notes.txt.tmp." + dead));                        // not the run's: kept
  touch(dir / "checkpoint.safetensors.tmp.12ab");                // not a pid: kept
  touch(dir / "checkpoint.safetensors");
  const RunDirectory run(dir.string(), RunMode::Resume);
  EXPECT_EQ(run.removed_temporaries(),
            (std::vector<std::string>{"checkpoint.safetensors.tmp." + dead, "config.json.tmp"}));
  EXPECT_FALSE(fs::exists(dir / ("checkpoint.safetensors.tmp." + dead)));
  EXPECT_TRUE(fs::exists(dir / ("checkpoint.safetensors.tmp." + std::to_string(::getppid()))));
  EXPECT_TRUE(fs::exists(dir / ("notes.txt.tmp." + dead)));
  EXPECT_TRUE(fs::exists(dir / "checkpoint.safetensors.tmp.12ab"));
}

TEST(RunDir, TemporaryOwnersAreReadFromNames) {
  EXPECT_EQ(RunDirectory::temporary_owner("checkpoint.safetensors.tmp.1234"), 1234);
  EXPECT_EQ(RunDirectory::temporary_owner("loss.png.tmp"), 0);
  EXPECT_EQ(RunDirectory::temporary_owner("checkpoint.safetensors"), -1);
  EXPECT_EQ(RunDirectory::temporary_owner("checkpoint.safetensors.tmp."), -1);
  EXPECT_EQ(RunDirectory::temporary_owner("checkpoint.safetensors.tmpx"), -1);
  EXPECT_EQ(RunDirectory::temporary_owner("other.tmp.12"), -1);
}

TEST(RunDir, AFileOrAPlaceUnderAFileIsRefusedUpFront) {
  const fs::path file = scratch("a-file");
  touch(file);
  std::string msg = error_of([&] { RunDirectory(file.string(), RunMode::New); });
  EXPECT_NE(msg.find("is a file, not a directory"), std::string::npos) << msg;
  msg = error_of([&] { RunDirectory((file / "run").string(), RunMode::New); });
  EXPECT_NE(msg.find("cannot create the run directory"), std::string::npos) << msg;
}

TEST(RunDir, AReadOnlyDirectoryIsRefusedUpFront) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere: this case needs another user";
  const fs::path ro = scratch("read-only");
  fs::create_directories(ro);
  ::chmod(ro.c_str(), 0555);
  const std::string msg = error_of([&] { RunDirectory(ro.string(), RunMode::New); });
  ::chmod(ro.c_str(), 0755);
  EXPECT_NE(msg.find("cannot write in the run directory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace wgtrain
