// loss.csv: rewritten atomically when a run starts or resumes, appended to as it goes (train/loss_log.h).
#include "train/loss_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "wgtrain/atomic_file.h"
#include "wgtrain/error.h"

namespace wgtrain::detail {

namespace {

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A field as a number; nullopt for an empty field; false when it is not one.
bool parse_field(const std::string& s, std::optional<double>& out) {
  out.reset();
  if (s.empty()) return true;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  out = v;
  return true;
}

}  // namespace

LossLog::LossLog(const std::string& path, std::optional<int64_t> resume_step) : path_(path) {
  std::string text = std::string(kHeader) + "\n";
  if (resume_step) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string old = ss.str();
    size_t at = old.find('\n');  // past the header
    while (at != std::string::npos && at + 1 < old.size()) {
      const size_t begin = at + 1, end = old.find('\n', begin);
      if (end == std::string::npos) break;  // an unfinished last line (a crash mid-append): dropped
      const std::string line = old.substr(begin, end - begin);
      at = end;
      std::stringstream row(line);
      std::string f[6];
      for (auto& x : f) std::getline(row, x, ',');
      int64_t step = -1;
      const auto [p, ec] = std::from_chars(f[0].data(), f[0].data() + f[0].size(), step);
      Row r;
      r.step = step;
      if (ec != std::errc() || p != f[0].data() + f[0].size() || step < 0 || !parse_field(f[3], r.train_loss) ||
          !parse_field(f[4], r.val_loss))
        continue;
      if (step > *resume_step) continue;
      kept_.push_back(r);
      text += line + "\n";
    }
  }
  write_file_atomic(path_, text);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open '" + path_ + "' to append to it: " + std::strerror(errno));
}

LossLog::~LossLog() {
  if (fd_ >= 0) ::close(fd_);
}

void LossLog::append(int64_t step, int64_t tokens, double lr, std::optional<double> train_loss,
                     std::optional<double> val_loss, double seconds) {
  const std::string line = std::to_string(step) + "," + std::to_string(tokens) + "," + fmt(lr, "%.6g") + "," +
                           (train_loss ? fmt(*train_loss, "%.6f") : "") + "," +
                           (val_loss ? fmt(*val_loss, "%.6f") : "") + "," + fmt(seconds, "%.3f") + "\n";
  // One write of the whole row (O_APPEND): a crash leaves at most an unfinished last line, which opening drops.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error("cannot append to '" + path_ + "': " + std::strerror(w < 0 ? errno : EIO));
    done += static_cast<size_t>(w);
  }
}

void LossLog::sync() {
  if (::fsync(fd_) != 0) throw Error("cannot flush '" + path_ + "' to disk: " + std::strerror(errno));
}

}  // namespace wgtrain::detail
