// The wgtrain binary, as a user runs it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/progress.h"

extern char** environ;

namespace {

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& args) {
  const std::string cmd = std::string("'") + WGTRAIN_CLI_PATH + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(Cli, DevicesShowsTheAdapter) {
  const Result r = run("devices");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("adapter:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("backend:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("max storage buffer binding"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timestamp-query"), std::string::npos) << r.output;
}

TEST(Cli, DevicesTakesSubgroupMatrices) {
  const Result r = run("devices --subgroup-matrix");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("subgroup-matrix"), std::string::npos) << r.output;
}

TEST(Cli, OpsListsTheRegistry) {
  const Result r = run("ops --verbose");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* op : {"mm ", "bmm ", "linear ", "_softmax ", "_log_softmax ", "sum ", "mean ", "add.Scalar "})
    EXPECT_NE(r.output.find(op), std::string::npos) << op;
  EXPECT_NE(r.output.find("requires:"), std::string::npos);
}

TEST(Cli, BenchRunsAtSmallSizes) {
  const Result r = run("bench --quick --only requant");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("q4gsw_requant"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GB/s"), std::string::npos) << r.output;
}

// The train_step row reports the pool's high-water mark by category, on screen and in the JSON; each row starts
// from an emptied pool and fails if it leaves buffers behind (bench.cpp's guard), so status 0 says none did.
TEST(Cli, BenchTrainStepReportsItsMemory) {
  const std::string json = ::testing::TempDir() + "wgtrain_cli_bench_memory.json";
  const Result r = run("bench --quick --only train_step --json '" + json + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("train_step GPU memory (pool high-water mark): "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optimizer state"), std::string::npos) << r.output;
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  for (const char* key : {"\"memory\": {\"total\": ", "\"weights\": ", "\"optimizer_state\": ", "\"gradients\": ",
                          "\"activations\": ", "\"temporaries\": ", "\"pool_overhead\": "})
    EXPECT_NE(text.str().find(key), std::string::npos) << key << "\n" << text.str();
}

TEST(Cli, EveryCommandTakesTheSameBackendNames) {
  // The native backend runs the training kernels through the same op layer: run-op and bench on it.
  const Result b = run("bench --quick --only requant --backend native-vulkan");
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_NE(b.output.find("native-vulkan"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("q4gsw_requant"), std::string::npos) << b.output;
  // A command whose model needs ops the backend lacks is refused before any work, naming them.
  const std::string dir = ::testing::TempDir() + "wgtrain_cli_native_train";
  const Result t = run("train --backend native-vulkan --steps 1 --out '" + dir + "'");
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("rms_norm"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("native-vulkan"), std::string::npos) << t.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint.safetensors"));
  // The old, ambiguous name is refused with the two it could have meant.
  const Result v = run("devices --backend vulkan");
  EXPECT_NE(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("webgpu-vulkan"), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("native-vulkan"), std::string::npos) << v.output;
}

// A run that Ctrl-C stops: the signal lets the step in progress finish, a checkpoint is saved, the exit status is
// 130, and --resume continues from there to the end.
TEST(Cli, CtrlCSavesACheckpointAndResumeFinishesTheRun) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wgtrain-cli-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A byte-level model (no BPE merges to learn), small enough for a step in a few milliseconds.
  std::ofstream(dir / "model.json") << R"({"vocab_size": 256, "dim": 32, "n_layers": 1, "n_heads": 2,
                                           "n_kv_heads": 1, "ffn_dim": 64, "max_seq_len": 16})";
  const std::string out = (dir / "run").string();
  const std::vector<std::string> args = {WGTRAIN_CLI_PATH, "train", "--config", (dir / "model.json").string(),
                                         "--steps", "100000", "--batch-size", "2", "--seq-len", "16",
                                         "--eval-every", "100000", "--eval-batches", "1", "--out", out};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  pid_t pid;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  // Wait for training to be under way (a progress line), then interrupt it.
  std::string output;
  std::array<char, 4096> buf;
  bool signalled = false;
  ssize_t n;
  while ((n = read(pipefd[0], buf.data(), buf.size())) > 0) {
    output.append(buf.data(), static_cast<size_t>(n));
    if (!signalled && output.find("\nstep ") != std::string::npos) {
      kill(pid, SIGINT);
      signalled = true;
    }
  }
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(signalled) << output;
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 130) << output;
  const auto at = output.find("interrupted at step ");
  ASSERT_NE(at, std::string::npos) << output;
  const long stopped = std::stol(output.substr(at + 20));
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoint.safetensors"));

  const Result r = run("train --resume --out '" + out + "' --steps " + std::to_string(stopped + 3));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resuming " + out + " at step " + std::to_string(stopped)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done: step " + std::to_string(stopped + 3)), std::string::npos) << r.output;
  fs::remove_all(dir);
}

namespace fs = std::filesystem;

// A directory for one test, removed after it.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("wgtrain-cli-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

// The options of a run small enough for a step in milliseconds on llvmpipe: a byte-level model (no BPE merges to
// learn) on 220 KB of text, written into `s`.
std::string small_run(const Scratch& s) {
  std::ofstream(s / "model.json") << R"({"vocab_size": 256, "dim": 32, "n_layers": 1, "n_heads": 2,
                                         "n_kv_heads": 1, "ffn_dim": 64, "max_seq_len": 16})";
  const char* words[] = {"the", "jury", "said", "it", "did", "find", "that", "many", "of", "city", "election",
                         "laws", "are", "outmoded", "or", "inadequate", "and", "often", "ambiguous", "."};
  std::ofstream text(s / "corpus.txt");
  uint64_t x = 1;
  for (int i = 0; i < 40000; ++i) {  // 220 KB: the validation split takes every 20th 8 KB block
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text << words[(x >> 33) % 20] << ((i % 17 == 16) ? "\n" : " ");
  }
  return "--config '" + (s / "model.json") + "' --data '" + (s / "corpus.txt") +
         "' --batch-size 2 --seq-len 16 --eval-batches 1";
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The wgtrain binary run in the background, its output (stdout and stderr) read through a pipe or a terminal.
class Child {
 public:
  // `columns` > 0: on a pseudo-terminal that wide.
  explicit Child(const std::vector<std::string>& args, int columns = 0) {
    std::vector<std::string> full = {WGTRAIN_CLI_PATH};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    int ours = -1, theirs = -1;
    if (columns > 0) {
      winsize ws{};
      ws.ws_row = 24;
      ws.ws_col = static_cast<unsigned short>(columns);
      if (openpty(&ours, &theirs, nullptr, nullptr, &ws) != 0) throw std::runtime_error("openpty failed");
    } else {
      int p[2];
      if (pipe(p) != 0) throw std::runtime_error("pipe failed");
      ours = p[0];
      theirs = p[1];
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, theirs, 1);
    posix_spawn_file_actions_adddup2(&fa, theirs, 2);
    posix_spawn_file_actions_addclose(&fa, ours);
    posix_spawn_file_actions_addclose(&fa, theirs);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(theirs);
    fd_ = ours;
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  // Reads until the output contains `text` (true) or the output ends or `seconds` pass (false).
  bool read_until(const std::string& text, double seconds = 120) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (output.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      std::array<char, 4096> buf;
      const ssize_t n = read(fd_, buf.data(), buf.size());
      if (n <= 0) return false;  // end of output (a terminal says EIO once its last writer is gone)
      output.append(buf.data(), static_cast<size_t>(n));
    }
    return true;
  }
  // Reads the rest of the output and returns the exit status (-1: killed by a signal).
  int wait() {
    read_until(std::string(1, '\0'), 600);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void signal(int sig) { kill(pid_, sig); }
  std::string output;

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

// Words of a command line, split at spaces (no quoting: the tests' paths have none).
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w[0] == '\'' ? w.substr(1, w.size() - 2) : w);
  return out;
}

TEST(Cli, BadInputGivesAOneLineErrorAndNonZeroExit) {
  Result r = run("devices --backend nonsense");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown backend 'nonsense'"), std::string::npos) << r.output;
  r = run("no-such-command");
  EXPECT_NE(r.status, 0);
}


TEST(Cli, AnUnknownCommandIsNamed) {
  const Result r = run("frobnicate --now");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train"), std::string::npos) << r.output;  // the commands there are
}

// Zero is not "the default" (leaving the option out is), and values outside an option's range are errors before
// any work starts, naming the option.
TEST(Cli, ZeroNegativeAndNonFiniteValuesAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --steps 0", "--steps"},
      {"train --batch-size 0", "--batch-size"},
      {"train --seq-len 0", "--seq-len"},
      {"train --weight-decay -1", "--weight-decay"},
      {"train --seed -1", "--seed"},
      {"train --lr inf", "--lr"},
      {"train --lr nan", "--lr"},
      {"train --lr 0", "--lr"},
      {"train --min-lr-ratio 2", "--min-lr-ratio"},
      {"train --eval-every 0", "--eval-every"},
      {"train --save-every -3", "--save-every"},
      {"train --warmup -1", "--warmup"},
      {"generate --model x --max-tokens -5", "--max-tokens"},
      {"generate --model x --temperature nan", "--temperature"},
      {"generate --model x --top-k -1", "--top-k"},
      {"generate --model x --seed -1", "--seed"},
  };
  for (const auto& [args, option] : cases) {
    const Result r = run(args);
    EXPECT_NE(r.status, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(option), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("corpus"), std::string::npos) << args << ": work started\n" << r.output;
  }
  const Result r = run("train --steps 0");
  EXPECT_NE(r.output.find("leave --steps out for the default"), std::string::npos) << r.output;
}

// Typing the same command twice must not destroy the first run; --overwrite starts over on purpose.
TEST(Cli, ADirectoryHoldingARunIsNotOverwrittenUnasked) {
  const Scratch s("twice");
  const std::string train = "train " + small_run(s) + " --out '" + (s / "run") + "'";
  Result r = run(train + " --steps 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string checkpoint = file_text(s / "run/checkpoint.safetensors");
  const std::string csv = file_text(s / "run/loss.csv");
  r = run(train + " --steps 2");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("already holds a run (checkpoint at step 2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--overwrite"), std::string::npos) << r.output;
  EXPECT_EQ(file_text(s / "run/checkpoint.safetensors"), checkpoint);
  EXPECT_EQ(file_text(s / "run/loss.csv"), csv);
  r = run(train + " --overwrite --steps 3");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("deleted the previous run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done: step 3"), std::string::npos) << r.output;
  r = run(train + " --overwrite --resume");
  EXPECT_NE(r.status, 0) << r.output;
}

// SIGTERM (kill, systemd, container runtimes) stops a run as Ctrl-C does: after the step, with a checkpoint. While
// the run lives, a second run in its directory is refused.
TEST(Cli, SigtermSavesAndARunningRunsDirectoryIsLocked) {
  const Scratch s("sigterm");
  const std::string out = s / "run";
  std::vector<std::string> args = words("train " + small_run(s) + " --steps 100000 --eval-every 100000");
  args.insert(args.end(), {"--out", out});
  Child first(args);
  ASSERT_TRUE(first.read_until("\nstep ")) << first.output;
  const Result second = run("train " + small_run(s) + " --steps 3 --overwrite --out '" + out + "'");
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_NE(second.output.find("is in use by another wgtrain run"), std::string::npos) << second.output;
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(), 128 + SIGTERM) << first.output;
  EXPECT_NE(first.output.find("interrupted (SIGTERM) at step "), std::string::npos) << first.output;
  EXPECT_TRUE(fs::exists(fs::path(out) / "checkpoint.safetensors")) << first.output;
}

// A save killed midway (kill -9) leaves its temporary file; the next run in the directory removes it.
TEST(Cli, AStaleTemporaryIsRemovedByTheNextRun) {
  const Scratch s("stale");
  const std::string out = s / "run";
  ASSERT_EQ(run("train " + small_run(s) + " --steps 1 --out '" + out + "'").status, 0);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const fs::path tmp = fs::path(out) / ("checkpoint.safetensors.tmp." + std::to_string(gone));
  std::ofstream(tmp) << "half a checkpoint";
  const Result r = run("train --resume --steps 2 --out '" + out + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_NE(r.output.find("left by a save that never finished"), std::string::npos) << r.output;
}

// --resume keeps every setting of the run; the cadence of checkpoints and validation may change, with a note;
// anything that would change the run's trajectory is refused by name.
TEST(Cli, ResumeKeepsTheRunsSettings) {
  const Scratch s("resume");
  const std::string out = s / "run";
  ASSERT_EQ(run("train " + small_run(s) + " --steps 2 --eval-every 2 --save-every 3 --lr 0.002 --out '" + out + "'")
                .status,
            0);
  const std::string first_csv = file_text(fs::path(out) / "loss.csv");
  Result r = run("train --resume --steps 6 --out '" + out + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  // Validation every 2 steps still (not the default 100): rows 4 and 6 have a validation loss.
  const std::string csv = file_text(fs::path(out) / "loss.csv");
  // The first run's rows (steps 0-2, all covered by its last checkpoint) are kept verbatim, and continued.
  EXPECT_EQ(csv.substr(0, first_csv.size()), first_csv);
  EXPECT_NE(csv.find("\n3,", first_csv.size() - 1), std::string::npos) << csv;
  for (const char* row : {"\n4,", "\n6,"}) {
    const auto at = csv.find(row);
    ASSERT_NE(at, std::string::npos) << csv;
    const std::string line = csv.substr(at + 1, csv.find('\n', at + 1) - at - 1);
    int commas = 0;
    size_t val_begin = 0;
    for (size_t i = 0; i < line.size() && commas < 4; ++i)
      if (line[i] == ',' && ++commas == 4) val_begin = i + 1;
    EXPECT_NE(line[val_begin], ',') << "no validation loss at: " << line;
  }
  // A different learning rate, data or model would make another run: refused, naming the option.
  r = run("train --resume --lr 0.01 --out '" + out + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--lr 0.01 would change it (the run has 0.002)"), std::string::npos) << r.output;
  r = run("train --resume --config small --out '" + out + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--config small would change it"), std::string::npos) << r.output;
  r = run("train --resume --data fortunes --out '" + out + "'");
  EXPECT_NE(r.output.find("--data fortunes would change it"), std::string::npos) << r.output;
  // Repeating the run's own value is no change.
  r = run("train --resume --lr 0.002 --batch-size 2 --steps 7 --save-every 5 --out '" + out + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: --save-every 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("note: --steps 7"), std::string::npos) << r.output;
}

// --precision mixed (f16 GEMMs on subgroup matrices) where the device has none (llvmpipe): one line naming what is
// missing, before the run directory or the corpus is touched. A run keeps its precision: a resume may not change it.
TEST(Cli, MixedPrecisionIsRefusedWithoutTheFeaturesAndKeptByARun) {
  const Scratch s("precision");
  const std::string run_options = small_run(s);
  Result r = run("train " + run_options + " --steps 1 --precision half --out '" + (s / "half") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("unknown precision 'half': choose fp32 or mixed"), std::string::npos) << r.output;
  r = run("train " + run_options + " --steps 1 --precision mixed --out '" + (s / "mixed") + "'");
  if (r.status == 0) GTEST_SKIP() << "this device runs mixed precision: " << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--precision mixed needs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("use --precision fp32"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("corpus"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s / "mixed")) << r.output;
  r = run("bench --quick --only mm --precision mixed");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--precision mixed needs"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("GFLOP"), std::string::npos) << r.output;
  // The step's GEMM rows, in the precision of the run (fp32 here).
  r = run("bench --quick --only step_gemm");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("GEMMs: fp32"), std::string::npos) << r.output;
  for (const char* row : {"step linear_q4gsw fp32", "step linear_q4gsw_backward fp32", "step linear_dW fp32",
                          "step mm (head) fp32"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  // --mm-shapes: a row for each shape asked for, whatever --only says; a malformed one is an error before the device.
  r = run("bench --quick --only no-such-row --mm-shapes 33x17x65,8x1x3");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* row : {"mm fp32 (shape)", "33x17x65", "8x1x3"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
  for (const char* bad : {"33x17", "33x17x0", "33xx65", "33x17x65x2", "a"}) {
    r = run(std::string("bench --quick --mm-shapes 8x8x8,") + bad);
    EXPECT_EQ(r.status, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find(std::string("--mm-shapes: '") + bad + "' is not MxNxK"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("device:"), std::string::npos) << r.output;
  }
  // An fp32 run (the default) saves its precision; --resume keeps it and refuses another.
  const std::string out = s / "run";
  ASSERT_EQ(run("train " + run_options + " --steps 1 --out '" + out + "'").status, 0);
  r = run("train --resume --steps 2 --precision mixed --out '" + out + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--precision mixed would change it (the run has fp32)"), std::string::npos)
      << r.output;
  r = run("train --resume --steps 2 --precision fp32 --out '" + out + "'");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(Cli, ProblemsAreReportedBeforeAnyWork) {
  const Scratch s("before");
  const std::string run_options = small_run(s);
  // A regular file as --out.
  std::ofstream(s / "file") << "x";
  Result r = run("train " + run_options + " --out '" + (s / "file") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is a file, not a directory"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("corpus"), std::string::npos) << r.output;
  // An oversized model: named, with sizes, before the corpus is read.
  std::ofstream(s / "huge.json") << R"({"vocab_size": 256, "dim": 100000, "n_layers": 4, "n_heads": 4,
                                        "n_kv_heads": 2, "max_seq_len": 16})";
  r = run("train --config '" + (s / "huge.json") + "' --data '" + (s / "corpus.txt") + "' --out '" + (s / "huge") +
          "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dim 100000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TiB"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("corpus"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
  // A config file that leaves fields out is told which.
  std::ofstream(s / "partial.json") << R"({"vocab_size": 256, "dim": 32, "n_layers": 1, "n_heads": 2,
                                           "n_kv_heads": 1, "max_seq_len": 16})";
  r = run("train --config '" + (s / "partial.json") + "' --data '" + (s / "corpus.txt") +
          "' --steps 1 --batch-size 2 --eval-batches 1 --out '" + (s / "partial") + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("does not give"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rope_theta"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("does not give architecture, vocab_size"), std::string::npos) << r.output;
  // --init-from with another model's --config.
  r = run("train --init-from '" + (s / "partial") + "' --config tiny --data '" + (s / "corpus.txt") + "' --out '" +
          (s / "tuned") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is not the model --init-from"), std::string::npos) << r.output;
}

TEST(Cli, RunOpOnADirectorySaysSo) {
  const Scratch s("run-op");
  const Result r = run("run-op mm --in '" + s.dir.string() + "' --out '" + (s / "out.safetensors") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is a directory, not a safetensors file"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("basic_filebuf"), std::string::npos) << r.output;
}

TEST(Cli, DevicesNamesItsFeaturesAndWhatTheyDo) {
  const Result r = run("devices");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("0x"), std::string::npos) << r.output;  // no raw feature numbers
  EXPECT_EQ(r.output.find("vendor:       \n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timestamp-query"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("times kernels on the GPU"), std::string::npos) << r.output;
  // A subgroup size only beside subgroups that shaders can use.
  const bool subgroups = r.output.find("  subgroups         enabled") != std::string::npos;
  EXPECT_EQ(r.output.find(" lanes\n") != std::string::npos, subgroups) << r.output;
}

TEST(Cli, OpSummariesSpeakInTheOpsOwnTerms) {
  const Result r = run("ops");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* internal : {"p.fscalar", "p.iscalar", "x0", "x1", "inverseSqrt", "pow_scalar"})
    EXPECT_EQ(r.output.find(internal), std::string::npos) << internal << "\n" << r.output;
  EXPECT_NE(r.output.find("self + alpha * other"), std::string::npos) << r.output;
}

// The progress line fits the terminal it is drawn on (a 60-column pseudo-terminal here), and the first time left
// it shows is not extrapolated from the first step, whose time includes one-time work.
TEST(Cli, TheProgressLineFitsTheTerminal) {
  const Scratch s("pty");
  std::vector<std::string> args = words("train " + small_run(s) + " --steps 6 --eval-every 3");
  args.insert(args.end(), {"--out", s / "run"});
  Child child(args, 60);
  EXPECT_EQ(child.wait(), 0) << child.output;
  ASSERT_NE(child.output.find("step 6/6"), std::string::npos) << child.output;
  std::string segment;
  for (char c : child.output + "\n") {
    if (c == '\r' || c == '\n') {
      if (segment.rfind("step ", 0) == 0) {
        EXPECT_LE(segment.size(), 59u) << "'" << segment << "'";
      }
      segment.clear();
    } else {
      segment.push_back(c);
    }
  }
  const auto first = child.output.find("step 1/6");
  ASSERT_NE(first, std::string::npos) << child.output;
  const std::string line = child.output.substr(first, child.output.find_first_of("\r\n", first) - first);
  EXPECT_NE(line.find("ETA --:--"), std::string::npos) << line;
}


// A run's files belong together: another run's tokenizer.json, or a checkpoint of another model, is refused by
// --resume and generate before any work (generate: before the prompt is printed).
TEST(Cli, FilesMixedFromTwoRunsAreRefused) {
  const Scratch s("mixed");
  const std::string a = s / "a", b = s / "b";
  ASSERT_EQ(run("train " + small_run(s) + " --steps 1 --out '" + a + "'").status, 0);
  // Run b: another model (twice as wide) with its own tokenizer (300 tokens: merges run a has not).
  std::ofstream(s / "wide.json") << R"({"vocab_size": 300, "dim": 64, "n_layers": 1, "n_heads": 2,
                                        "n_kv_heads": 1, "ffn_dim": 64, "max_seq_len": 16})";
  ASSERT_EQ(run("train --config '" + (s / "wide.json") + "' --data '" + (s / "corpus.txt") +
                "' --batch-size 2 --seq-len 16 --eval-batches 1 --steps 1 --out '" + b + "'")
                .status,
            0);
  const std::string tokenizer_a = file_text(fs::path(a) / "tokenizer.json");
  fs::copy_file(fs::path(b) / "tokenizer.json", fs::path(a) / "tokenizer.json", fs::copy_options::overwrite_existing);
  Result r = run("train --resume --steps 2 --out '" + a + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is not the tokenizer"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("corpus"), std::string::npos) << r.output;
  r = run("generate --model '" + a + "' --prompt 'The jury' --max-tokens 3");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("is not the tokenizer"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("The jury"), std::string::npos) << r.output;
  std::ofstream(fs::path(a) / "tokenizer.json", std::ios::binary) << tokenizer_a;
  // Run b's checkpoint in run a: its config.json no longer describes it.
  fs::copy_file(fs::path(b) / "checkpoint.safetensors", fs::path(a) / "checkpoint.safetensors",
                fs::copy_options::overwrite_existing);
  r = run("generate --model '" + a + "' --prompt 'The jury' --max-tokens 3");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dim 64 vs 32"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("out of range"), std::string::npos) << r.output;
  r = run("train --resume --steps 2 --out '" + a + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("different runs"), std::string::npos) << r.output;
}

// A diverging run says which checkpoint is left, if any (not "step -1").
TEST(Cli, ADivergedRunSaysWhatWasSaved) {
  const Scratch s("diverge");
  Result r = run("train " + small_run(s) + " --steps 20 --lr 1e30 --out '" + (s / "none") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No checkpoint was saved"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step -1"), std::string::npos) << r.output;
  r = run("train " + small_run(s) + " --steps 20 --lr 1e30 --save-every 1 --out '" + (s / "some") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(") is intact"), std::string::npos) << r.output;
  // What a diverged run left (no checkpoint) cannot be resumed, and says so.
  r = run("train " + small_run(s) + " --steps 20 --out '" + (s / "none") + "'");
  EXPECT_NE(r.output.find("saved no checkpoint"), std::string::npos) << r.output;
}

// finetune keeps the same rules: a second run into a directory that holds one is refused, and --overwrite exists.
TEST(Cli, FinetuneKeepsTheRunDirectoryRules) {
  const Scratch s("finetune");
  ASSERT_EQ(run("train " + small_run(s) + " --steps 1 --out '" + (s / "base") + "'").status, 0);
  const std::string finetune = "finetune --model '" + (s / "base") + "' --data '" + (s / "corpus.txt") +
                               "' --batch-size 2 --seq-len 16 --val-batches 1 --iters 1 --adapter-path '" +
                               (s / "tuned") + "'";
  Result r = run(finetune);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(finetune);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("already holds a run"), std::string::npos) << r.output;
  r = run(finetune + " --overwrite");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run("finetune --model '" + (s / "base") + "' --data '" + (s / "corpus.txt") + "' --iters 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--iters"), std::string::npos) << r.output;
  r = run("finetune --model '" + (s / "base") + "' --data '" + (s / "corpus.txt") + "' --adapter-path '" +
          (s / "base") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("same directory"), std::string::npos) << r.output;
}

TEST(CliProgress, TheEtaWaitsForStepsAfterTheFirst) {
  wgtrain::cli::EtaEstimator eta(0, 100);
  eta.step(1, 60.0);  // the first step: a minute of one-time work
  EXPECT_FALSE(eta.remaining());
  eta.step(2, 61.0);
  eta.step(3, 62.0);
  EXPECT_FALSE(eta.remaining());
  eta.step(4, 63.0);
  ASSERT_TRUE(eta.remaining());
  EXPECT_DOUBLE_EQ(*eta.remaining(), 96.0);  // a second a step, not 16 seconds
  // A resumed run counts from where it resumed.
  wgtrain::cli::EtaEstimator resumed(50, 100);
  resumed.step(51, 30.0);
  for (int s = 52; s <= 55; ++s) resumed.step(s, 30.0 + 2.0 * (s - 51));
  EXPECT_DOUBLE_EQ(*resumed.remaining(), 90.0);
}

TEST(CliProgress, LinesFitTheWidthBarestLast) {
  using wgtrain::cli::fit_line;
  EXPECT_EQ(fit_line({"abc"}, 6), "abc  ");
  EXPECT_EQ(fit_line({"a long line", "short"}, 8), "short  ");
  EXPECT_EQ(fit_line({"a long line", "still long"}, 6), "still");
  EXPECT_EQ(fit_line({"abc"}, 0), "a");
}

}  // namespace
