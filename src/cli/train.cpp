// wgtrain train and wgtrain generate: checks before any work, a progress line, Ctrl-C and SIGTERM that save, and the
// run's summary.
#include "cli/train.h"

#include "cli/backend.h"
#include "cli/progress.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "wgtrain/precision.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/trainer.h"

namespace wgtrain::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Trainer* g_trainer = nullptr;
volatile std::sig_atomic_t g_signal = 0;  // the signal that asked the run to stop

extern "C" void on_interrupt(int sig) {
  // Only async-signal-safe calls here: an atomic store, write(2) and signal(2).
  g_signal = sig;
  if (g_trainer) g_trainer->request_stop();
  static const char int_msg[] =
      "\nwgtrain: stopping after this step and saving a checkpoint (Ctrl-C again to abort)\n";
  static const char term_msg[] =
      "\nwgtrain: SIGTERM: stopping after this step and saving a checkpoint (a second signal aborts)\n";
  if (sig == SIGTERM)
    (void)!::write(STDERR_FILENO, term_msg, sizeof term_msg - 1);
  else
    (void)!::write(STDERR_FILENO, int_msg, sizeof int_msg - 1);
  // A second signal of either kind ends the process at once.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// SIGINT and SIGTERM (what kill, systemd and container runtimes send) stop the run after its step, with a
// checkpoint, for as long as this lives.
class StopOnSignals {
 public:
  explicit StopOnSignals(Trainer& trainer) {
    g_signal = 0;
    g_trainer = &trainer;
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
  }
  ~StopOnSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    g_trainer = nullptr;
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// --config: a preset or a JSON file. A file that leaves fields out is told which took their defaults.
LlamaConfig config_of(const std::string& model, bool note_defaults) {
  for (const auto& name : LlamaConfig::preset_names())
    if (model == name) return LlamaConfig::preset(name);
  if (!fs::is_regular_file(model))
    throw ArgumentError("--config '" + model + "' is neither a preset (" + join(LlamaConfig::preset_names()) +
                        ") nor a JSON file");
  std::vector<std::string> defaulted;
  const LlamaConfig c = LlamaConfig::from_json(read_file(model), &defaulted);
  if (note_defaults && !defaulted.empty())
    std::printf("note: %s does not give %s: their defaults are used (the run's config.json spells out every "
                "field)\n",
                model.c_str(), join(defaulted).c_str());
  return c;
}

std::string json_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The options a run's checkpoint (of either kind: model or LoRA) saved in its trainer state.
json run_state(const fs::path& ckpt) {
  try {
    const safetensors::MappedFile f(ckpt.string());
    const auto it = f.metadata().find("state");
    if (it == f.metadata().end()) throw Error("it holds no trainer state");
    return json::parse(it->second).at("options");
  } catch (const std::exception& e) {
    throw Error("--resume: the trainer state in '" + ckpt.string() + "' is unusable: " + e.what());
  }
}

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ec;
  return a == b || fs::equivalent(a, b, ec);
}

// --resume continues a run with every setting it had. An option given with it that would change the run's
// trajectory is refused by name (unless it repeats the run's value); steps and the save/validation cadence may
// change, with a note. `saved`: the options in the run's checkpoint.
void resume_settings(TrainOptions& o, const std::set<std::string>& given, const json& saved) {
  const std::string dir = o.out_dir;
  auto refuse = [&](const std::string& flag, const std::string& value, const std::string& was) {
    throw ArgumentError("--resume continues the run in '" + dir + "' with its own settings: --" + flag + " " +
                        value + " would change it (the run has " + was + "); leave --" + flag +
                        " out, or start a new run in another --out");
  };
  auto was_text = [&](const char* key) { return saved.contains(key) ? json_text(saved.at(key)) : std::string("?"); };
  const bool finetune = !saved.value("fine_tune", std::string()).empty();
  if (given.count("config")) {  // train: the model config, compared field by field
    const auto saved_config = peek_checkpoint_info((fs::path(dir) / "checkpoint.safetensors").string()).config;
    const auto diff = config_differences(saved_config, config_of(o.model, false));
    if (!diff.empty()) refuse("config", o.model, "a different model: " + join(diff));
  }
  if (given.count("model") && !same_path(o.model, saved.value("model", o.model)))  // finetune: the base model
    refuse("model", o.model, "'" + was_text("model") + "'");
  if (given.count("data") && !same_path(o.data, saved.value("data", o.data)))
    refuse("data", o.data, "'" + was_text("data") + "'");
  if (given.count("init-from") && !same_path(o.init_from, saved.value("init_from", o.init_from)))
    refuse("init-from", o.init_from, was_text("init_from").empty() ? "none" : "'" + was_text("init_from") + "'");
  // Values a resumed run keeps: refused when given otherwise, taken from the run when not given.
  auto fixed = [&](const char* flag, const json& from, const char* key, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if (!from.contains(key)) return;
    const T was = from.at(key).get<T>();
    if (given.count(flag) && field != was) refuse(flag, json_text(json(field)), json_text(from.at(key)));
    field = was;
  };
  fixed("batch-size", saved, "batch_size", o.batch_size);
  fixed("seq-len", saved, "seq_len", o.seq_len);
  fixed("lr", saved, "lr", o.lr);
  fixed("min-lr-ratio", saved, "min_lr_ratio", o.min_lr_ratio);
  fixed("warmup", saved, "warmup", o.warmup);
  fixed("weight-decay", saved, "weight_decay", o.weight_decay);
  fixed("seed", saved, "seed", o.seed);
  {
    json with_precision = saved;  // runs from before --precision were fp32
    if (!with_precision.contains("precision")) with_precision["precision"] = "fp32";
    fixed("precision", with_precision, "precision", o.precision);
  }
  if (finetune) {
    fixed("fine-tune-type", saved, "fine_tune", o.fine_tune);
    fixed("train-norms", saved, "train_norms", o.train_norms);
    fixed("mask-prompt", saved, "mask_prompt", o.mask_prompt);
    fixed("pack", saved, "pack", o.pack);
    fixed("no-quantize", saved, "quantize", o.quantize);
    fixed("group-size", saved, "group_size", o.group_size);
    if (saved.contains("lora")) {
      const json& lora = saved.at("lora");
      fixed("lora-rank", lora, "rank", o.lora.rank);
      fixed("lora-alpha", lora, "alpha", o.lora.alpha);
      fixed("lora-dropout", lora, "dropout", o.lora.dropout);
      fixed("lora-layers", lora, "layers", o.lora.layers);
      fixed("targets", lora, "targets", o.lora.targets);
    }
  }
  o.model = saved.value("model", o.model);
  o.data = saved.value("data", o.data);
  o.init_from = saved.value("init_from", o.init_from);
  auto cadence = [&](const char* flag, const char* key, int64_t& field, const char* what) {
    if (!saved.contains(key)) return;
    const int64_t was = saved.at(key).get<int64_t>();
    if (!given.count(flag)) {
      field = was;
    } else if (field != was) {
      std::printf("note: --%s %lld: %s (the run had %lld)\n", flag, static_cast<long long>(field), what,
                  static_cast<long long>(was));
    }
  };
  cadence("steps", "steps", o.steps,
          "the run now ends there, its learning-rate schedule (cosine decay) stretched or shortened to match");
  cadence("save-every", "save_every", o.save_every, "checkpoints at that cadence from here on");
  cadence("eval-every", "eval_every", o.eval_every, "validation at that cadence from here on");
  cadence("eval-batches", "eval_batches", o.eval_batches, "validation over that many batches from here on");
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
  const std::set<std::string>& given = cli.given;
  const bool finetune = !o.fine_tune.empty();
  if (o.out_dir.empty()) {
    o.out_dir = "runs/" + stem(o.init_from.empty() ? o.model : o.init_from) + "-" + stem(o.data);
    if (finetune) o.out_dir += "-" + o.fine_tune;
  }
  const char* command = finetune ? "finetune" : "train";
  if (o.resume && o.overwrite) throw ArgumentError("--resume and --overwrite exclude each other");
  parse_precision(o.precision);

  // What can be checked before any work: the directories given, the settings a resumed run keeps, the model config.
  // (The run directory itself, its lock and the memory the model needs are the trainer's first checks.)
  std::error_code ec;
  if (!o.init_from.empty() && !o.resume && fs::equivalent(o.init_from, o.out_dir, ec))
    throw ArgumentError("--init-from and --out are the same directory ('" + o.out_dir +
                        "'): the new run would replace the one it starts from; choose another --out");
  if (finetune && !o.resume && fs::equivalent(o.model, o.out_dir, ec))
    throw ArgumentError("--model and --adapter-path are the same directory ('" + o.out_dir +
                        "'): the run would write over the model it adapts; choose another --adapter-path");
  if (o.resume) {
    const fs::path ckpt = fs::path(o.out_dir) / "checkpoint.safetensors";
    if (fs::exists(ckpt)) resume_settings(o, given, run_state(ckpt));  // (no checkpoint: the trainer says so)
  } else if (!o.init_from.empty()) {
    const std::string ckpt = (fs::path(o.init_from) / "checkpoint.safetensors").string();
    if (!fs::exists(ckpt)) throw ArgumentError("--init-from '" + o.init_from + "' holds no run (no " + ckpt + ")");
    if (given.count("config")) {
      const auto diff = config_differences(peek_checkpoint_info(ckpt).config, config_of(o.model, false));
      if (!diff.empty())
        throw ArgumentError("--config '" + o.model + "' is not the model --init-from '" + o.init_from +
                            "' holds (there vs --config: " + join(diff) + "); leave --config out to fine-tune it");
    }
  } else if (!finetune) {
    config_of(o.model, true);  // a config file that leaves fields out hears which
  }

  DeviceOptions dopt;
  dopt.backend = backend_for(cli.backend, finetune ? "finetune" : "train", true);
  precision_options(dopt, parse_precision(o.precision));
  Device device = Device::open(dopt);
  // Mixed precision the device cannot run is an error here, before the run directory or the corpus is touched.
  require_precision(device, parse_precision(o.precision));
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

  double rate = 0;  // tokens/s, smoothed
  double last_val = NAN, last_loss = NAN;
  const int64_t every = std::max<int64_t>(1, (steps - first) / 50);
  EtaEstimator eta(first, steps);
  Trainer::Outcome outcome;
  {
    const StopOnSignals stop_on_signals(trainer);
    outcome = trainer.run([&](const StepInfo& s) {
      rate = rate == 0 ? s.tokens_per_second : 0.9 * rate + 0.1 * s.tokens_per_second;
      last_loss = s.loss;
      if (s.val_loss) last_val = *s.val_loss;
      eta.step(s.step, s.elapsed);
      const std::optional<double> left = eta.remaining();
      const std::string eta_text = left ? clock_text(*left) : "--:--";
      const int width = 24;
      const int filled = static_cast<int>(width * static_cast<double>(s.step) / static_cast<double>(steps));
      char val[32] = "";
      if (!std::isnan(last_val)) std::snprintf(val, sizeof val, " | val %.4f", last_val);
      const int digits = static_cast<int>(std::to_string(steps).size());
      char head[64], tail[160];
      std::snprintf(head, sizeof head, "step %*lld/%lld", digits, static_cast<long long>(s.step),
                    static_cast<long long>(steps));
      std::snprintf(tail, sizeof tail, "loss %.4f%s | %s tok/s | %s, ETA %s%s", s.loss, val, rate_text(rate).c_str(),
                    clock_text(s.elapsed).c_str(), eta_text.c_str(), s.saved ? " | saved" : "");
      const std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
      const std::string line = std::string(head) + " " + bar + " " + tail;
      if (tty) {
        // Fullest first; a narrow terminal drops the bar, then the elapsed time and rate.
        char loss_text[32];
        std::snprintf(loss_text, sizeof loss_text, "%.4f", s.loss);
        const std::string bare = std::string(head) + " loss " + loss_text + val + " ETA " + eta_text;
        std::printf("\r%s", fit_line({line, std::string(head) + " " + tail, bare}, terminal_columns(STDOUT_FILENO))
                                .c_str());
        if (s.val_loss || s.step == steps) std::printf("\n");
      } else if (s.step == first + 1 || s.step % every == 0 || s.val_loss || s.step == steps) {
        std::printf("%s\n", line.c_str());
      }
      if (s.step == first + 1)
        std::printf("%sGPU memory of a training step (pool high-water mark): %s\n", tty ? "\n" : "",
                    describe_memory(trainer.step_memory().peak).c_str());
      std::fflush(stdout);
    });
  }
  if (tty) std::printf("\n");
  print_profile(device);
  std::printf("peak GPU memory: %.1f MiB\n", static_cast<double>(device.stats().peak_bytes_allocated) / (1 << 20));
  const std::string dir = o.out_dir;
  if (outcome == Trainer::Outcome::Interrupted) {
    const int sig = g_signal == SIGTERM ? SIGTERM : SIGINT;
    std::printf("interrupted%s at step %lld; checkpoint saved in %s\ncontinue with: wgtrain %s --resume --out %s\n",
                sig == SIGTERM ? " (SIGTERM)" : "", static_cast<long long>(trainer.step()), dir.c_str(), command,
                dir.c_str());
    return 128 + sig;
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
