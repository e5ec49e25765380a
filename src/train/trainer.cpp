// The trainer: set-up (corpus, tokenizer, model, optimizer), the recorded training and validation steps, the
// learning-rate schedule, checkpoints and loss curves.
#include "wgtrain/trainer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>

#include "wgtrain/adamw.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/corpus.h"
#include "wgtrain/data.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/plot.h"

namespace wgtrain {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCheckpoint = "checkpoint.safetensors";
constexpr const char* kTokenizer = "tokenizer.json";

json options_json(const TrainOptions& o) {
  return {{"model", o.model},         {"data", o.data},
          {"steps", o.steps},         {"batch_size", o.batch_size},
          {"seq_len", o.seq_len},     {"lr", o.lr},
          {"min_lr_ratio", o.min_lr_ratio}, {"warmup", o.warmup},
          {"weight_decay", o.weight_decay}, {"beta1", o.beta1},
          {"beta2", o.beta2},         {"eps", o.eps},
          {"eval_every", o.eval_every}, {"eval_batches", o.eval_batches},
          {"save_every", o.save_every}, {"seed", o.seed},
          {"init_from", o.init_from}};
}

// The options a resumed run takes from its checkpoint: everything that decides the trajectory.
void restore_options(TrainOptions& o, const json& j) {
  o.model = j.at("model").get<std::string>();
  o.data = j.at("data").get<std::string>();
  o.batch_size = j.at("batch_size").get<int64_t>();
  o.seq_len = j.at("seq_len").get<int64_t>();
  o.lr = j.at("lr").get<double>();
  o.min_lr_ratio = j.at("min_lr_ratio").get<double>();
  o.warmup = j.at("warmup").get<int64_t>();
  o.weight_decay = j.at("weight_decay").get<double>();
  o.beta1 = j.at("beta1").get<double>();
  o.beta2 = j.at("beta2").get<double>();
  o.eps = j.at("eps").get<double>();
  o.seed = j.at("seed").get<uint64_t>();
  o.init_from = j.at("init_from").get<std::string>();
}

LlamaConfig config_from(const std::string& model) {
  for (const auto& name : LlamaConfig::preset_names())
    if (model == name) return LlamaConfig::preset(name);
  std::ifstream in(model);
  if (!in) {
    std::string names;
    for (const auto& n : LlamaConfig::preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("no model config '" + model + "': not a preset (" + names + ") nor a readable JSON file");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return LlamaConfig::from_json(ss.str());
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw Error("cannot write '" + tmp.string() + "'");
  }
  fs::rename(tmp, path);
}

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

struct Trainer::Impl {
  std::vector<int32_t> train_tokens, val_tokens;
  std::unique_ptr<data::BatchSampler> sampler;
  std::vector<int32_t> val_inputs, val_targets;  // eval_batches * batch_size windows
  int64_t seq_len = 0;
  Tensor m, v;
  std::unique_ptr<ops::AdamW> adamw;
  Tensor tokens, targets, eval_tokens, eval_targets;
  Tensor train_loss, eval_loss;
  Recording train_step, eval_step;
  // The curve so far: (step, loss) and (step, val loss); mirrored in loss.csv.
  std::vector<std::pair<double, double>> train_curve, val_curve;
  std::ofstream csv;
  int64_t last_saved = -1;
};

Trainer::Trainer(Device& device, TrainOptions options, std::function<void(const std::string&)> log)
    : impl_(std::make_unique<Impl>()), device_(device), opt_(std::move(options)), log_(std::move(log)) {
  if (!log_) log_ = [](const std::string&) {};
  const fs::path dir = opt_.out_dir;
  const fs::path ckpt = dir / kCheckpoint;

  // Where the model, its tokenizer and the step come from.
  LlamaConfig config;
  std::optional<CheckpointInfo> resume_info;
  if (opt_.resume) {
    if (!fs::exists(ckpt))
      throw Error("--resume: no checkpoint in '" + dir.string() + "' (expected " + ckpt.string() + ")");
    resume_info = read_checkpoint_info(ckpt.string());
    if (!resume_info->has_optimizer) throw Error("--resume: '" + ckpt.string() + "' holds no optimizer state");
    json state;
    try {
      state = json::parse(resume_info->state);
      restore_options(opt_, state.at("options"));
      if (opt_.steps == 0) opt_.steps = state.at("options").at("steps").get<int64_t>();
      step_ = state.at("step").get<int64_t>();
    } catch (const std::exception& e) {
      throw Error("--resume: the trainer state in '" + ckpt.string() + "' is unusable: " + e.what());
    }
    config = resume_info->config;
    tokenizer_ = Tokenizer::load((dir / kTokenizer).string());
    log_("resuming " + dir.string() + " at step " + std::to_string(step_));
  } else if (!opt_.init_from.empty()) {
    const fs::path src = fs::path(opt_.init_from) / kCheckpoint;
    config = read_checkpoint_info(src.string()).config;
    opt_.model = (fs::path(opt_.init_from) / "config.json").string();  // what the run is, in its state and log
    tokenizer_ = Tokenizer::load((fs::path(opt_.init_from) / kTokenizer).string());
    log_("fine-tuning from " + src.string());
  } else {
    config = config_from(opt_.model);
  }
  if (opt_.steps == 0) opt_.steps = 600;
  const bool software = device_.info().software;
  if (opt_.batch_size == 0) opt_.batch_size = software ? 8 : 16;
  if (opt_.seq_len == 0) opt_.seq_len = software ? std::min<int64_t>(64, config.max_seq_len) : config.max_seq_len;
  if (opt_.steps < 1) throw ArgumentError("steps must be >= 1");
  if (opt_.batch_size < 1) throw ArgumentError("batch size must be >= 1");
  if (!(opt_.lr > 0) || opt_.min_lr_ratio < 0 || opt_.min_lr_ratio > 1 || opt_.warmup < 0)
    throw ArgumentError("need lr > 0, 0 <= min_lr_ratio <= 1, warmup >= 0");
  if (opt_.eval_every < 1 || opt_.save_every < 1 || opt_.eval_batches < 1)
    throw ArgumentError("eval_every, save_every and eval_batches must be >= 1");
  Impl& s = *impl_;
  s.seq_len = opt_.seq_len;
  if (s.seq_len < 1 || s.seq_len > config.max_seq_len)
    throw ArgumentError("sequence length " + std::to_string(s.seq_len) + " is outside 1..max_seq_len (" +
                        std::to_string(config.max_seq_len) + ")");

  // Text, split, tokenizer, tokens.
  const std::string text = load_corpus(opt_.data);
  const data::TextSplit split = data::split_text(text);
  log_("corpus " + opt_.data + ": " + fmt(static_cast<double>(text.size()) / 1e6, "%.1f") + " MB (" +
       fmt(static_cast<double>(split.val.size()) / 1e6, "%.2f") + " MB held out for validation)");
  if (!opt_.resume && opt_.init_from.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    tokenizer_ = train_bpe(split.train, static_cast<int>(config.vocab_size));
    log_("trained a " + std::to_string(tokenizer_.vocab_size()) + "-token BPE tokenizer in " +
         fmt(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "%.1f") + " s");
  }
  if (tokenizer_.vocab_size() > config.vocab_size)
    throw Error("the tokenizer has " + std::to_string(tokenizer_.vocab_size()) + " tokens, the model only " +
                std::to_string(config.vocab_size));
  s.train_tokens = tokenizer_.encode(split.train, /*add_special_tokens=*/false);
  s.val_tokens = tokenizer_.encode(split.val, /*add_special_tokens=*/false);
  log_("tokens: " + std::to_string(s.train_tokens.size()) + " for training, " + std::to_string(s.val_tokens.size()) +
       " for validation");
  s.sampler = std::make_unique<data::BatchSampler>(s.train_tokens, opt_.batch_size, s.seq_len, opt_.seed);
  data::even_windows(s.val_tokens, opt_.eval_batches * opt_.batch_size, s.seq_len, s.val_inputs, s.val_targets);

  // Model and optimizer.
  model_ = std::make_unique<Llama>(device_, config, opt_.seed);
  s.m = ops::full(device_, {model_->arena_size()}, 0.0);
  s.v = ops::full(device_, {model_->arena_size()}, 0.0);
  if (resume_info) load_checkpoint(ckpt.string(), *model_, &s.m, &s.v);
  if (!opt_.init_from.empty() && !opt_.resume)
    load_checkpoint((fs::path(opt_.init_from) / kCheckpoint).string(), *model_, nullptr, nullptr);
  log_("model: " + std::to_string(config.parameter_count()) + " parameters (" +
       (config.quantize_blocks ? "q4gsw block linears, group " + std::to_string(config.group_size) : "fp32 linears") +
       "), " + device_.info().name + " (" + device_.info().backend_label + ")");
  ops::AdamWOptions ao;
  ao.lr = opt_.lr;
  ao.beta1 = opt_.beta1;
  ao.beta2 = opt_.beta2;
  ao.eps = opt_.eps;
  ao.weight_decay = opt_.weight_decay;
  s.adamw = std::make_unique<ops::AdamW>(model_->adamw_params(s.m, s.v), ao);

  // The two recorded steps. Inputs are tensors written before each replay.
  const int64_t B = opt_.batch_size, T = s.seq_len;
  s.tokens = Tensor::empty(device_, {B, T}, DType::I32);
  s.targets = Tensor::empty(device_, {B * T}, DType::I32);
  s.eval_tokens = Tensor::empty(device_, {B, T}, DType::I32);
  s.eval_targets = Tensor::empty(device_, {B * T}, DType::I32);
  s.train_step = device_.record([&] { s.train_loss = model_->train_step(s.tokens, s.targets, *s.adamw); });
  s.eval_step = device_.record([&] { s.eval_loss = model_->loss(s.eval_tokens, s.eval_targets, true).value(); });
  log_("training step recorded: " + std::to_string(s.train_step.dispatches()) + " dispatches per step");

  // Run directory and loss curve.
  fs::create_directories(dir);
  const fs::path csv = dir / "loss.csv";
  std::vector<std::string> kept;
  if (opt_.resume && fs::exists(csv)) {
    // Keep the rows up to the checkpoint's step: a run resumed from an earlier checkpoint rewrites the rest.
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::stringstream row(line);
      std::string f[6];
      for (auto& x : f) std::getline(row, x, ',');
      if (f[0].empty() || std::stoll(f[0]) > step_) continue;
      kept.push_back(line);
      if (!f[3].empty()) s.train_curve.emplace_back(std::stod(f[0]), std::stod(f[3]));
      if (!f[4].empty()) s.val_curve.emplace_back(std::stod(f[0]), std::stod(f[4]));
    }
  }
  s.csv.open(csv, std::ios::trunc);
  s.csv << "step,tokens,lr,train_loss,val_loss,seconds\n";
  for (const auto& line : kept) s.csv << line << "\n";
  s.csv.flush();
  if (!opt_.resume) {
    tokenizer_.save((dir / kTokenizer).string());
    write_text(dir / "config.json", config.to_json() + "\n");
  }
}

Trainer::~Trainer() = default;

int64_t Trainer::train_tokens() const { return static_cast<int64_t>(impl_->train_tokens.size()); }
int64_t Trainer::val_tokens() const { return static_cast<int64_t>(impl_->val_tokens.size()); }

double Trainer::lr_at(int64_t step) const {
  if (opt_.warmup > 0 && step <= opt_.warmup) return opt_.lr * static_cast<double>(step) / static_cast<double>(opt_.warmup);
  const double span = static_cast<double>(std::max<int64_t>(opt_.steps - opt_.warmup, 1));
  const double t = std::clamp(static_cast<double>(step - opt_.warmup) / span, 0.0, 1.0);
  const double floor = opt_.lr * opt_.min_lr_ratio;
  return floor + (opt_.lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

double Trainer::evaluate() {
  Impl& s = *impl_;
  const size_t per = static_cast<size_t>(opt_.batch_size * s.seq_len);
  double total = 0;
  for (int64_t b = 0; b < opt_.eval_batches; ++b) {
    s.eval_tokens.write(std::span<const int32_t>(s.val_inputs.data() + b * per, per));
    s.eval_targets.write(std::span<const int32_t>(s.val_targets.data() + b * per, per));
    s.eval_step.replay();
    total += s.eval_loss.to_host_f32()[0];
  }
  return total / static_cast<double>(opt_.eval_batches);
}

void Trainer::save() {
  Impl& s = *impl_;
  const fs::path dir = opt_.out_dir;
  const json state = {{"step", step_}, {"options", options_json(opt_)}};
  save_checkpoint((dir / kCheckpoint).string(), *model_, &s.m, &s.v, state.dump());
  s.last_saved = step_;
  std::vector<PlotSeries> series = {{"train", s.train_curve, {31, 119, 180}, false},
                                    {"validation", s.val_curve, {255, 127, 14}, true}};
  const std::string kind = model_->config().quantize_blocks ? "q4gsw llama" : "llama";
  write_line_plot((dir / "loss.png").string(), "wgtrain: " + kind + " on " + opt_.data, "step", "loss (nats/token)",
                  series);
}

Trainer::Outcome Trainer::run(const std::function<void(const StepInfo&)>& on_step) {
  Impl& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto csv_row = [&](int64_t step, double lr, std::optional<double> loss, std::optional<double> val) {
    s.csv << step << "," << step * opt_.batch_size * s.seq_len << "," << fmt(lr) << ","
          << (loss ? fmt(*loss, "%.6f") : "") << "," << (val ? fmt(*val, "%.6f") : "") << "," << fmt(elapsed(), "%.3f")
          << "\n";
    s.csv.flush();
  };
  if (step_ == 0 && s.val_curve.empty()) {
    // Where the run starts from: a baseline for the curve (and for fine-tuning, the loss before it).
    const double v = evaluate();
    s.val_curve.emplace_back(0.0, v);
    csv_row(0, 0.0, std::nullopt, v);
    log_("validation loss before training: " + fmt(v, "%.4f"));
  }
  std::vector<int32_t> inputs, targets;
  while (step_ < opt_.steps) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t step = step_ + 1;
    s.sampler->batch(step_, inputs, targets);
    s.tokens.write(inputs);
    s.targets.write(targets);
    const double lr = lr_at(step);
    s.adamw->set_step(step, lr);
    s.train_step.replay();
    const double loss = s.train_loss.to_host_f32()[0];
    if (!std::isfinite(loss))
      throw Error("training diverged: the loss at step " + std::to_string(step) + " is " + fmt(loss) +
                  " (learning rate " + fmt(lr) + "); try a lower --lr. The last checkpoint is step " +
                  std::to_string(s.last_saved));
    step_ = step;
    StepInfo info;
    info.step = step;
    info.steps = opt_.steps;
    info.loss = loss;
    info.lr = lr;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    info.tokens_per_second = static_cast<double>(opt_.batch_size * s.seq_len) / dt;
    s.train_curve.emplace_back(static_cast<double>(step), loss);
    if (step % opt_.eval_every == 0 || step == opt_.steps) {
      info.val_loss = evaluate();
      s.val_curve.emplace_back(static_cast<double>(step), *info.val_loss);
    }
    csv_row(step, lr, loss, info.val_loss);
    const bool stopping = stop_.load();
    if (step % opt_.save_every == 0 || step == opt_.steps || stopping) {
      save();
      info.saved = true;
    }
    info.elapsed = elapsed();
    if (on_step) on_step(info);
    if (stop_.load()) {
      if (s.last_saved != step_) save();
      return Outcome::Interrupted;
    }
  }
  if (s.last_saved != step_) save();
  return Outcome::Finished;
}

}  // namespace wgtrain
