// loss.csv, a run's loss curve: one row per step (step, tokens, lr, train_loss, val_loss, seconds). Internal to the
// trainer; a header of its own so that its resume rule is tested without a training run.
//
// Opening rewrites the file whole and atomically (wgtrain/atomic_file.h): the header alone for a new run, and for a
// resumed one the rows up to the checkpoint's step (a run resumed from an earlier checkpoint writes the rest again).
// A crash while opening leaves the previous file, never a truncated one. Rows are then appended as the run goes;
// sync() puts them on disk (the trainer calls it with each checkpoint, so the rows a checkpoint covers are there).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wgtrain::detail {

class LossLog {
 public:
  struct Row {
    int64_t step = 0;
    std::optional<double> train_loss, val_loss;
  };

  static constexpr const char* kHeader = "step,tokens,lr,train_loss,val_loss,seconds";

  // A new log at `path` (any file there replaced), or with `resume_step` the existing one's rows up to that step
  // kept (none when there is no file). Rows that do not parse, and an unfinished last line, are dropped.
  LossLog(const std::string& path, std::optional<int64_t> resume_step);
  ~LossLog();
  LossLog(const LossLog&) = delete;
  LossLog& operator=(const LossLog&) = delete;

  // The rows kept from the previous file, in order.
  const std::vector<Row>& kept() const { return kept_; }

  void append(int64_t step, int64_t tokens, double lr, std::optional<double> train_loss,
              std::optional<double> val_loss, double seconds);
  void sync();

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<Row> kept_;
};

}  // namespace wgtrain::detail
