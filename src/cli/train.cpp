// wgtrain train and wgtrain generate: a progress line, Ctrl-C that saves, and the run's summary.
#include "cli/train.h"

#include "cli/backend.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/trainer.h"

namespace wgtrain::cli {

namespace {

Trainer* g_trainer = nullptr;

extern "C" void on_interrupt(int) {
  // Only async-signal-safe calls here: an atomic store and write(2).
  if (g_trainer) g_trainer->request_stop();
  static const char msg[] = "\nwgtrain: stopping after this step and saving a checkpoint (Ctrl-C again to abort)\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  std::signal(SIGINT, SIG_DFL);
}

std::string clock_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string rate_text(double tokens_per_second) {
  char buf[32];
  if (tokens_per_second >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", tokens_per_second / 1e6);
  else if (tokens_per_second >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", tokens_per_second / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", tokens_per_second);
  return buf;
}

std::string stem(const std::string& s) {
  const std::string name = std::filesystem::path(s).stem().string();
  return name.empty() ? s : name;
}

}  // namespace

void print_profile(Device& device) {
  const std::vector<OpProfile> prof = device.profile();
  if (prof.empty()) return;
  double total = 0;
  for (const auto& p : prof) total += p.seconds;
  std::printf("\nprofile (%s): %.3f s in %zu ops\n%-34s %10s %12s %7s\n",
              prof.front().from_timestamps ? "GPU timestamps" : "wall clock, a wait per dispatch", total, prof.size(),
              "op", "dispatches", "ms", "share");
  for (size_t i = 0; i < prof.size() && i < 30; ++i)
    std::printf("%-34s %10llu %12.3f %6.1f%%\n", prof[i].op.c_str(), static_cast<unsigned long long>(prof[i].dispatches),
                prof[i].seconds * 1e3, 100.0 * prof[i].seconds / total);
}

int run_train(const TrainCliOptions& cli) {
  TrainOptions o = cli.train;
  if (o.out_dir.empty()) {
    o.out_dir = "runs/" + stem(o.init_from.empty() ? o.model : o.init_from) + "-" + stem(o.data);
    if (!o.fine_tune.empty()) o.out_dir += "-" + o.fine_tune;
  }
  const char* command = o.fine_tune.empty() ? "train" : "finetune";
  DeviceOptions dopt;
  dopt.backend = webgpu_only(cli.backend, "train");
  Device device = Device::open(dopt);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  Trainer trainer(device, o, [](const std::string& line) { std::printf("%s\n", line.c_str()); std::fflush(stdout); });
  const int64_t first = trainer.step();
  const int64_t steps = trainer.options().steps;
  if (first >= steps) {
    std::printf("the run in %s is already at step %lld of %lld: nothing to do (raise --steps to continue it)\n",
                o.out_dir.c_str(), static_cast<long long>(first), static_cast<long long>(steps));
    return 0;
  }
  std::printf("training %s on %s, steps %lld to %lld, batch %lld x %lld tokens, into %s\n",
              trainer.options().model.c_str(), trainer.options().data.c_str(), static_cast<long long>(first + 1),
              static_cast<long long>(steps), static_cast<long long>(trainer.options().batch_size),
              static_cast<long long>(trainer.options().seq_len),
              o.out_dir.c_str());
  std::fflush(stdout);

  g_trainer = &trainer;
  std::signal(SIGINT, on_interrupt);
  double rate = 0;  // tokens/s, smoothed
  double last_val = NAN, last_loss = NAN;
  const int64_t every = std::max<int64_t>(1, (steps - first) / 50);
  Trainer::Outcome outcome;
  try {
    outcome = trainer.run([&](const StepInfo& s) {
      rate = rate == 0 ? s.tokens_per_second : 0.9 * rate + 0.1 * s.tokens_per_second;
      last_loss = s.loss;
      if (s.val_loss) last_val = *s.val_loss;
      const double done = static_cast<double>(s.step - first), left = static_cast<double>(steps - s.step);
      const double eta = done > 0 ? s.elapsed / done * left : 0;
      const int width = 24;
      const int filled = static_cast<int>(width * static_cast<double>(s.step) / static_cast<double>(steps));
      char val[32] = "";
      if (!std::isnan(last_val)) std::snprintf(val, sizeof val, " | val %.4f", last_val);
      char line[256];
      std::snprintf(line, sizeof line, "step %*lld/%lld [%s%s] loss %.4f%s | %s tok/s | %s, ETA %s%s",
                    static_cast<int>(std::to_string(steps).size()), static_cast<long long>(s.step),
                    static_cast<long long>(steps), std::string(filled, '#').c_str(),
                    std::string(width - filled, '.').c_str(), s.loss,
                    val,
                    rate_text(rate).c_str(), clock_text(s.elapsed).c_str(), clock_text(eta).c_str(),
                    s.saved ? " | saved" : "");
      if (tty) {
        std::printf("\r%-120s", line);
        if (s.val_loss || s.step == steps) std::printf("\n");
      } else if (s.step == first + 1 || s.step % every == 0 || s.val_loss || s.step == steps) {
        std::printf("%s\n", line);
      }
      std::fflush(stdout);
    });
  } catch (...) {
    g_trainer = nullptr;
    std::signal(SIGINT, SIG_DFL);
    throw;
  }
  g_trainer = nullptr;
  std::signal(SIGINT, SIG_DFL);
  if (tty) std::printf("\n");
  print_profile(device);
  std::printf("peak GPU memory: %.1f MiB\n", static_cast<double>(device.stats().peak_bytes_allocated) / (1 << 20));
  const std::string dir = o.out_dir;
  if (outcome == Trainer::Outcome::Interrupted) {
    std::printf("interrupted at step %lld; checkpoint saved in %s\ncontinue with: wgtrain %s --resume --out %s\n",
                static_cast<long long>(trainer.step()), dir.c_str(), command, dir.c_str());
    return 130;
  }
  std::printf("done: step %lld, train loss %.4f, validation loss %.4f\n", static_cast<long long>(trainer.step()),
              last_loss, last_val);
  std::printf("checkpoint %s/checkpoint.safetensors, loss curve %s/loss.csv and %s/loss.png\n", dir.c_str(),
              dir.c_str(), dir.c_str());
  if (trainer.lora()) {
    std::printf("adapters (Hugging Face peft format) %s/adapter_model.safetensors and adapter_config.json\n", dir.c_str());
    std::printf("try: wgtrain generate --model %s --adapter %s --prompt \"...\"\n", trainer.options().model.c_str(),
                dir.c_str());
  } else {
    std::printf("try: wgtrain generate --model %s --prompt \"The jury said\"\n", dir.c_str());
  }
  return 0;
}

}  // namespace wgtrain::cli
