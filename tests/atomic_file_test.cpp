// Atomic file writes (wgtrain/atomic_file.h), the one way every file of wgtrain is written, and loss.csv on top of
// them (src/train/loss_log.h): a write that fails at any point leaves the previous file as it was and no
// temporary behind; a resumed run's loss.csv keeps the rows up to its checkpoint and is never truncated in place.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/loss_log.h"
#include "wgtrain/atomic_file.h"
#include "wgtrain/error.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;

fs::path scratch_root() { return fs::temp_directory_path() / ("wgtrain-atomic-file-test-" + std::to_string(::getpid())); }

const struct RemoveScratch {
  ~RemoveScratch() {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
} remove_scratch;

fs::path scratch(const std::string& name) {
  const fs::path p = scratch_root() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The names in a directory, sorted: a failed write must leave none but the ones that were there.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// While alive, no file of this process may grow past `bytes`: a write beyond fails with EFBIG (SIGXFSZ ignored),
// as on a full disk or an exhausted quota. A real failure in the middle of a write, after some bytes went out.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit l = old_;
    l.rlim_cur = bytes;
    if (::setrlimit(RLIMIT_FSIZE, &l) != 0) ADD_FAILURE() << "setrlimit(RLIMIT_FSIZE) failed";
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_;
};

TEST(AtomicFile, WritesAndReplacesAFileWhole) {
  const fs::path dir = scratch("replace");
  const std::string path = (dir / "config.json").string();
  write_file_atomic(path, std::string_view("{\"a\": 1}\n"));
  EXPECT_EQ(file_text(path), "{\"a\": 1}\n");
  const std::vector<uint8_t> bytes = {0, 1, 2, 255};
  write_file_atomic(path, std::span<const uint8_t>(bytes));
  EXPECT_EQ(file_text(path), std::string("\0\1\2\xff", 4));
  write_file_atomic(path, std::string_view());
  EXPECT_EQ(file_text(path), "");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"config.json"});  // no temporary left
  EXPECT_EQ(atomic_temporary_name(path), path + ".tmp." + std::to_string(::getpid()));
}

TEST(AtomicFile, AWriteThatFailsMidwayLeavesTheOldFileIntact) {
  const fs::path dir = scratch("midway");
  const std::string path = (dir / "tokenizer.json").string();
  write_file_atomic(path, std::string_view("the old tokenizer"));
  const std::string big(1 << 20, 'x');
  std::string msg;
  {
    const FileSizeLimit limit(64 * 1024);  // the first 64 KiB go out, then the disk is "full"
    try {
      write_file_atomic(path, big);
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  ASSERT_FALSE(msg.empty()) << "the write did not fail";
  EXPECT_NE(msg.find("failed after 65536 of 1048576 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_EQ(file_text(path), "the old tokenizer");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"tokenizer.json"});
  // safetensors files go the same way.
  safetensors::Contents c;
  c.tensors["w"] = {"U8", {static_cast<int64_t>(big.size())}, std::vector<uint8_t>(big.begin(), big.end())};
  const std::string st = (dir / "checkpoint.safetensors").string();
  write_file_atomic(st, std::string_view("old checkpoint"));
  {
    const FileSizeLimit limit(64 * 1024);
    EXPECT_THROW(safetensors::save(st, c), Error);
  }
  EXPECT_EQ(file_text(st), "old checkpoint");
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"checkpoint.safetensors", "tokenizer.json"}));
}

TEST(AtomicFile, ARenameThatFailsLeavesNoTemporary) {
  const fs::path dir = scratch("rename");
  fs::create_directories(dir / "loss.png" / "inside");  // a directory where the file should go
  try {
    write_file_atomic((dir / "loss.png").string(), std::string_view("png"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("renaming"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(dir), std::vector<std::string>{"loss.png"});
  EXPECT_TRUE(fs::is_directory(dir / "loss.png" / "inside"));
  // A directory that does not exist: nothing to create the temporary in.
  EXPECT_THROW(write_file_atomic((dir / "no-such-dir" / "f").string(), std::string_view("x")), Error);
}

TEST(AtomicFile, CopiesAFileWhole) {
  const fs::path dir = scratch("copy");
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes += static_cast<char>(i * 7);
  std::ofstream(dir / "from", std::ios::binary) << bytes;
  write_file_atomic((dir / "to").string(), std::string_view("old"));
  copy_file_atomic((dir / "from").string(), (dir / "to").string());
  EXPECT_EQ(file_text(dir / "to"), bytes);
  EXPECT_THROW(copy_file_atomic((dir / "absent").string(), (dir / "to").string()), Error);
  EXPECT_THROW(copy_file_atomic(dir.string(), (dir / "to").string()), Error);  // a directory
  EXPECT_EQ(file_text(dir / "to"), bytes);
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"from", "to"}));
}

// ---- loss.csv -------------------------------------------------------------------------------------------------------

const std::string kHeader = std::string(detail::LossLog::kHeader) + "\n";

TEST(LossLog, ANewRunStartsWithTheHeaderAlone) {
  const fs::path dir = scratch("new");
  const std::string path = (dir / "loss.csv").string();
  std::ofstream(path) << kHeader << "1,64,0.001,7.0,,0.5\n";  // an earlier run's (the trainer's --overwrite)
  detail::LossLog log(path, std::nullopt);
  EXPECT_TRUE(log.kept().empty());
  EXPECT_EQ(file_text(path), kHeader);
  log.append(0, 0, 0.0, std::nullopt, 7.5, 0.25);
  log.append(1, 64, 3e-4, 7.25, std::nullopt, 1.5);
  log.sync();
  EXPECT_EQ(file_text(path), kHeader + "0,0,0,,7.500000,0.250\n1,64,0.0003,7.250000,,1.500\n");
}

TEST(LossLog, AResumedRunKeepsTheRowsUpToItsStep) {
  const fs::path dir = scratch("resume");
  const std::string path = (dir / "loss.csv").string();
  const std::string rows = "0,0,0,,7.500000,0.250\n"
                           "1,64,0.0003,7.250000,,1.500\n"
                           "2,128,0.0006,7.000000,6.900000,2.750\n";
  // Rows past the checkpoint (step 2), a row that is not one, and a last line cut short by a crash.
  std::ofstream(path) << kHeader << rows << "3,192,0.0009,6.800000,,4.000\n"
                      << "garbage,row\n"
                      << "4,256,0.0012,6.7";
  detail::LossLog log(path, 2);
  ASSERT_EQ(log.kept().size(), 3u);
  EXPECT_EQ(log.kept()[0].step, 0);
  EXPECT_FALSE(log.kept()[0].train_loss);
  EXPECT_EQ(*log.kept()[0].val_loss, 7.5);
  EXPECT_EQ(*log.kept()[1].train_loss, 7.25);
  EXPECT_FALSE(log.kept()[1].val_loss);
  EXPECT_EQ(*log.kept()[2].train_loss, 7.0);
  EXPECT_EQ(*log.kept()[2].val_loss, 6.9);
  EXPECT_EQ(file_text(path), kHeader + rows);  // the earlier rows verbatim
  log.append(3, 192, 9e-4, 6.75, std::nullopt, 4.125);
  EXPECT_EQ(file_text(path), kHeader + rows + "3,192,0.0009,6.750000,,4.125\n");
  EXPECT_EQ(listing(dir), std::vector<std::string>{"loss.csv"});
  // Resuming where no loss.csv is: the header alone.
  fs::remove(path);
  detail::LossLog fresh(path, 5);
  EXPECT_TRUE(fresh.kept().empty());
  EXPECT_EQ(file_text(path), kHeader);
}

TEST(LossLog, AResumeThatCannotRewriteTheFileLeavesItWhole) {
  // Before, resuming truncated loss.csv in place and wrote the kept rows back: a failure in between lost the curve.
  const fs::path dir = scratch("resume-fails");
  const std::string path = (dir / "loss.csv").string();
  std::string text = kHeader;
  for (int s = 0; s < 4000; ++s) text += std::to_string(s) + ",64,0.001,7.000000,,1.000\n";  // ~130 KiB
  std::ofstream(path) << text;
  {
    const FileSizeLimit limit(64 * 1024);
    EXPECT_THROW(detail::LossLog(path, 3999), Error);
  }
  EXPECT_EQ(file_text(path), text);
  EXPECT_EQ(listing(dir), std::vector<std::string>{"loss.csv"});
}

}  // namespace
}  // namespace wgtrain
