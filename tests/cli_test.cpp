// The wgtrain binary, as a user runs it.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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

TEST(Cli, BadInputGivesAOneLineErrorAndNonZeroExit) {
  Result r = run("devices --backend nonsense");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown backend 'nonsense'"), std::string::npos) << r.output;
  r = run("no-such-command");
  EXPECT_NE(r.status, 0);
}

}  // namespace
