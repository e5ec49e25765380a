// The wgtrain binary, as a user runs it.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

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

TEST(Cli, BadInputGivesAOneLineErrorAndNonZeroExit) {
  Result r = run("devices --backend nonsense");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown backend 'nonsense'"), std::string::npos) << r.output;
  r = run("no-such-command");
  EXPECT_NE(r.status, 0);
}

}  // namespace
