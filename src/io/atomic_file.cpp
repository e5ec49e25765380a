// Atomic file writes: temporary file beside the target, fsync, rename, fsync of the directory (wgtrain/atomic_file.h).
#include "wgtrain/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "wgtrain/error.h"

namespace wgtrain {

namespace {

std::string quoted(const std::string& p) { return "'" + p + "'"; }

std::string parent_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

std::string atomic_temporary_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

void sync_directory(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  ::fsync(dfd);
  ::close(dfd);
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  if (path.empty()) throw Error("cannot write a file with an empty name");
  const std::string tmp = atomic_temporary_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + quoted(path) + ": cannot create " + quoted(tmp) + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw Error("cannot write " + quoted(path) + ": " + what + ": " + std::strerror(err) + " (the previous " +
                "file, if any, is unchanged)");
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : EIO;
      ::close(fd);
      fail("writing " + quoted(tmp) + " failed after " + std::to_string(done) + " of " +
               std::to_string(bytes.size()) + " bytes",
           err);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("flushing " + quoted(tmp) + " to disk failed", err);
  }
  if (::close(fd) != 0) fail("closing " + quoted(tmp) + " failed", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming " + quoted(tmp) + " over it failed", errno);
  sync_directory(parent_of(path));
}

void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

void copy_file_atomic(const std::string& from, const std::string& to) {
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot copy " + quoted(from) + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error("cannot copy " + quoted(from) + ": it is a directory");
  }
  if (st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw Error("cannot copy " + quoted(from) + ": " + std::strerror(err));
    }
    if (r == 0) break;
    bytes.insert(bytes.end(), buf, buf + r);
  }
  ::close(fd);
  write_file_atomic(to, std::span<const uint8_t>(bytes));
}

}  // namespace wgtrain
