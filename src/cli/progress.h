// The training progress line's parts that need care: the time left, and fitting a terminal's width.
// Header-only, so that tests can check them without the binary.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace wgtrain::cli {

// The time a run has left, from the pace of the steps after its first. The first step's time includes one-time
// work (the validation baseline before it, pipeline creation, the first uploads) and can be many times a normal
// step's, so an ETA from it is wildly high; nothing is estimated until `min_steps` later steps have run.
class EtaEstimator {
 public:
  EtaEstimator(int64_t first_step, int64_t last_step, int64_t min_steps = 3)
      : first_(first_step), last_(last_step), min_steps_(min_steps) {}

  // After each step: its number and the seconds since the run began.
  void step(int64_t step, double elapsed) {
    if (step <= first_ + 1) {
      base_step_ = step;
      base_elapsed_ = elapsed;
      return;
    }
    step_ = step;
    elapsed_ = elapsed;
  }
  // Seconds left, or nothing yet.
  std::optional<double> remaining() const {
    if (base_step_ < 0 || step_ - base_step_ < min_steps_) return std::nullopt;
    const double per_step = (elapsed_ - base_elapsed_) / static_cast<double>(step_ - base_step_);
    return per_step * static_cast<double>(last_ - step_);
  }

 private:
  int64_t first_, last_, min_steps_;
  int64_t base_step_ = -1, step_ = -1;
  double base_elapsed_ = 0, elapsed_ = 0;
};

// The width of the terminal on `fd`; else $COLUMNS; else 80.
inline int terminal_columns(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

// The first of `candidates` (the progress line from fullest to barest) that fits `columns` - 1 columns, padded with
// spaces to that width so that it covers the line it overwrites; the last one cut when none fits. The last column
// stays free: writing into it makes some terminals wrap, and the next '\r' then returns to the wrong line.
inline std::string fit_line(std::initializer_list<std::string> candidates, int columns) {
  const size_t width = columns > 1 ? static_cast<size_t>(columns - 1) : 1;
  std::string line;
  for (const auto& c : candidates) {
    line = c;
    if (c.size() <= width) break;
  }
  if (line.size() > width) line.resize(width);
  line.append(width - line.size(), ' ');
  return line;
}

}  // namespace wgtrain::cli
