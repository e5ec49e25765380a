// The trainer: set-up (corpus, tokenizer, model, optimizer), the recorded training and validation steps, the
// learning-rate schedule, checkpoints and loss curves.
#include "wgtrain/trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>

#include "train/loss_log.h"
#include "wgtrain/adamw.h"
#include "wgtrain/atomic_file.h"
#include "wgtrain/chat_template.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/corpus.h"
#include "wgtrain/data.h"
#include "wgtrain/dataset.h"
#include "wgtrain/generate.h"
#include "wgtrain/hf.h"
#include "wgtrain/memory_estimate.h"
#include "wgtrain/run_dir.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/plot.h"
#include "wgtrain/precision.h"

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
          {"init_from", o.init_from}, {"fine_tune", o.fine_tune},
          {"lora", json::parse(o.lora.to_json())}, {"train_norms", o.train_norms},
          {"quantize", o.quantize},   {"group_size", o.group_size},
          {"mask_prompt", o.mask_prompt}, {"pack", o.pack},
          {"precision", o.precision}};
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
  o.fine_tune = j.value("fine_tune", std::string());
  if (j.contains("lora")) o.lora = LoraConfig::from_json(j.at("lora").dump());
  o.train_norms = j.value("train_norms", false);
  o.quantize = j.value("quantize", true);
  o.group_size = j.value("group_size", int64_t{32});
  o.mask_prompt = j.value("mask_prompt", false);
  o.pack = j.value("pack", false);
  o.precision = j.value("precision", std::string("fp32"));  // runs from before --precision were fp32
}

// The trainer state a checkpoint of either kind (model or LoRA) carries in its metadata.
json checkpoint_state(const fs::path& ckpt) {
  const safetensors::MappedFile f(ckpt.string());
  auto it = f.metadata().find("state");
  if (it == f.metadata().end()) throw Error("'" + ckpt.string() + "' holds no trainer state to resume from");
  return json::parse(it->second);
}

bool is_jsonl_data(const std::string& data) {
  return fs::is_directory(data) || (data.size() > 6 && data.substr(data.size() - 6) == ".jsonl");
}

// wgtrain's own tokenizers: special tokens for documents and chat turns, and a ChatML template using them.
const std::vector<std::string> kOwnSpecialTokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
constexpr const char* kOwnChatTemplate =
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";

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

void write_text(const fs::path& path, const std::string& text) { write_file_atomic(path.string(), text); }

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

struct Trainer::Impl {
  // Text data: a token stream in windows. JSONL data: examples in padded or packed rows.
  std::vector<int32_t> train_tokens, val_tokens;
  std::unique_ptr<data::BatchSampler> sampler;
  std::unique_ptr<data::ExampleBatcher> batcher;
  std::vector<int32_t> val_inputs, val_targets;  // eval_batches * batch_size rows
  int64_t eval_batches = 0;                      // validation batches (JSONL: fewer when the split is small)
  int64_t seq_len = 0;
  std::unique_ptr<LoraAdapters> lora;
  Tensor m, v;       // the model's trainable parameters' moments (none in a LoRA run without norms)
  Tensor lm, lv;     // the adapters'
  std::unique_ptr<ops::AdamW> adamw;
  Tensor tokens, targets, eval_tokens, eval_targets;
  Tensor train_loss, eval_loss;
  Recording train_step, eval_step;
  MemoryReport step_memory;
  // The curve so far: (step, loss) and (step, val loss); mirrored in loss.csv.
  std::vector<std::pair<double, double>> train_curve, val_curve;
  std::unique_ptr<detail::LossLog> csv;
  int64_t last_saved = -1;  // the step of the checkpoint on disk (-1: none)
  std::optional<RunDirectory> run_dir;  // held (and so locked) for the trainer's life
  std::string tokenizer_hash;           // of the run's tokenizer.json, bound into each checkpoint

  void batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const {
    if (sampler) sampler->batch(step, inputs, targets);
    else batcher->batch(step, inputs, targets);
  }
};

namespace {

// Copies the tokenizer files of a model directory into a run directory.
void copy_tokenizer_files(const fs::path& from, const fs::path& to) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                        "generation_config.json"})
    if (fs::exists(from / f)) copy_file_atomic((from / f).string(), (to / f).string());
}

}  // namespace

Trainer::Trainer(Device& device, TrainOptions options, std::function<void(const std::string&)> log)
    : impl_(std::make_unique<Impl>()), device_(device), opt_(std::move(options)), log_(std::move(log)) {
  if (!log_) log_ = [](const std::string&) {};
  const fs::path dir = opt_.out_dir;
  const fs::path ckpt = dir / kCheckpoint;
  Impl& s = *impl_;

  // The GEMMs run in the precision the device was opened for: it must be the run's (a resumed run's own, below).
  auto check_precision = [&] {
    const Precision want = parse_precision(opt_.precision);
    require_precision(device_, want);
    if (want == Precision::Fp32 && gemm_precision(device_) != Precision::Fp32)
      throw Error("the run is fp32 but the device was opened for mixed precision (DeviceOptions::subgroup_matrix); "
                  "open it with precision_options(options, Precision::Fp32)");
  };
  if (!opt_.resume) check_precision();

  // The run directory before anything else (wgtrain/run_dir.h): its lock, the rules that keep a run from being lost
  // (a new run never where one is, --resume only where one is, --overwrite deleting only a run), and whether it can
  // be written at all.
  if (opt_.resume && opt_.overwrite) throw ArgumentError("--resume and --overwrite exclude each other");
  s.run_dir.emplace(dir.string(), opt_.resume ? RunMode::Resume : opt_.overwrite ? RunMode::Overwrite : RunMode::New);
  for (const auto& f : s.run_dir->removed_temporaries())
    log_("removed " + (dir / f).string() + ", left by a save that never finished");
  if (!s.run_dir->removed_run_files().empty()) {
    std::string files;
    for (const auto& f : s.run_dir->removed_run_files()) files += (files.empty() ? "" : ", ") + f;
    log_("--overwrite: deleted the previous run in " + dir.string() + " (" + files + ")");
  }

  // The options: a resumed run's own, from its checkpoint.
  if (opt_.resume) {
    try {
      const json state = checkpoint_state(ckpt);
      restore_options(opt_, state.at("options"));
      if (opt_.steps == 0) opt_.steps = state.at("options").at("steps").get<int64_t>();
      step_ = state.at("step").get<int64_t>();
      s.last_saved = step_;
    } catch (const safetensors::FormatError& e) {
      throw Error(std::string("--resume: ") + e.what());
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("--resume: the trainer state in '" + ckpt.string() + "' is unusable: " + e.what());
    }
    log_("resuming " + dir.string() + " at step " + std::to_string(step_));
    check_precision();
  }
  const bool finetune = !opt_.fine_tune.empty();
  const bool use_lora = opt_.fine_tune == "lora";
  if (finetune && opt_.fine_tune != "full" && !use_lora)
    throw ArgumentError("fine-tune type '" + opt_.fine_tune + "' is not one of lora, full");
  if (finetune && !opt_.init_from.empty()) throw ArgumentError("--init-from is for train; finetune takes --model");
  if (opt_.steps == 0) opt_.steps = 600;
  const bool software = device_.info().software;
  if (opt_.steps < 1) throw ArgumentError("steps must be >= 1");
  if (!(opt_.lr > 0) || opt_.min_lr_ratio < 0 || opt_.min_lr_ratio > 1 || opt_.warmup < 0)
    throw ArgumentError("need lr > 0, 0 <= min_lr_ratio <= 1, warmup >= 0");
  if (opt_.eval_every < 1 || opt_.save_every < 1 || opt_.eval_batches < 1)
    throw ArgumentError("eval_every, save_every and eval_batches must be >= 1");
  if (use_lora) opt_.lora.validate();

  // The model's configuration and tokenizer; the model itself once the tokenizer is settled.
  LlamaConfig config;
  hf::ImportReport import_report;
  if (finetune) {
    // A run directory or a Hugging Face model, frozen for LoRA (norm gains trainable on request).
    const Trainable trainable = !use_lora ? Trainable::All : opt_.train_norms ? Trainable::Norms : Trainable::None;
    if (hf::is_model_dir(opt_.model)) {
      hf::ImportOptions import;
      import.quantize = opt_.quantize;
      import.group_size = opt_.group_size;
      import.trainable = trainable;
      model_ = hf::load_model(device_, opt_.model, import, &import_report);
      log_("model " + opt_.model + ": " + model_->config().architecture + ", " +
           std::to_string(model_->config().parameter_count()) + " parameters (" + import_report.dtypes + ")");
      if (!import_report.quantisation_error.empty()) {
        std::string line;
        for (const auto& [kind, err] : import_report.quantisation_error)
          line += (line.empty() ? "" : ", ") + kind + " " + fmt(err, "%.4f");
        log_("q4gsw group " + std::to_string(opt_.group_size) + ", relative error ||W - Q(W)|| / ||W||: " + line);
      }
    } else {
      model_ = load_run_model(device_, opt_.model, trainable);
    }
    tokenizer_ = Tokenizer::load_dir(opt_.model);
    config = model_->config();
    // A full fine-tune resumes from a model checkpoint in its own directory: that directory's files must be its.
    if (opt_.resume && !use_lora) check_run_files(dir.string(), peek_checkpoint_info(ckpt.string()));
  } else if (opt_.resume) {
    // The checkpoint's header first: a config.json or tokenizer.json from another run is refused before any work.
    const CheckpointInfo info = peek_checkpoint_info(ckpt.string());
    check_run_files(dir.string(), info);
    config = info.config;
    tokenizer_ = Tokenizer::load_dir(dir.string());
  } else if (!opt_.init_from.empty()) {
    const fs::path src = fs::path(opt_.init_from) / kCheckpoint;
    const CheckpointInfo info = peek_checkpoint_info(src.string());
    check_run_files(opt_.init_from, info);
    config = info.config;
    opt_.model = (fs::path(opt_.init_from) / "config.json").string();  // what the run is, in its state and log
    tokenizer_ = Tokenizer::load_dir(opt_.init_from);
    log_("fine-tuning from " + src.string());
  } else {
    config = config_from(opt_.model);
  }
  if (opt_.batch_size == 0) opt_.batch_size = software ? 8 : 16;
  if (opt_.seq_len == 0)
    opt_.seq_len = std::min<int64_t>(software ? 64 : finetune ? 512 : config.max_seq_len, config.max_seq_len);
  if (opt_.batch_size < 1) throw ArgumentError("batch size must be >= 1");
  s.seq_len = opt_.seq_len;
  if (s.seq_len < 1 || s.seq_len > config.max_seq_len)
    throw ArgumentError("sequence length " + std::to_string(s.seq_len) + " is outside 1..max_seq_len (" +
                        std::to_string(config.max_seq_len) + ")");
  const int64_t B = opt_.batch_size, T = s.seq_len;
  // Whether the model can fit at all, before the data and tokenizer work. (A fine-tuned model is loaded by now, and
  // the estimate's single arena of trainable weights does not describe a LoRA run.)
  if (!finetune)
    check_training_fits(estimate_training_memory(config, B, T), device_.limits(), physical_memory_bytes(), software);

  // Data: JSONL examples (fine-tuning), or a text corpus in windows.
  if (is_jsonl_data(opt_.data)) {
    if (!finetune)
      throw ArgumentError("JSONL data ('" + opt_.data + "') is for `wgtrain finetune`; `train` takes a text corpus");
    std::unique_ptr<ChatTemplate> tmpl;
    if (!tokenizer_.chat_template().empty())
      tmpl = std::make_unique<ChatTemplate>(tokenizer_.chat_template(), tokenizer_.bos_token(), tokenizer_.eos_token());
    data::DatasetOptions dopt;
    dopt.mask_prompt = opt_.mask_prompt;
    dopt.max_seq_len = T + 1;  // a row of T inputs predicts T + 1 tokens of an example
    dopt.seed = opt_.seed;
    const data::Dataset ds = data::load_dataset(opt_.data, tokenizer_, tmpl.get(), dopt);
    const data::DatasetReport& r = ds.report;
    log_("data " + opt_.data + ": " + r.format + ", " + std::to_string(r.train_examples) + " training examples (" +
         std::to_string(r.train_tokens) + " tokens, " + std::to_string(r.loss_tokens) + " in the loss), " +
         std::to_string(r.valid_examples) + " for validation");
    if (!r.problems.empty())
      log_(std::to_string(r.problems.size()) + " malformed line(s) skipped, the first: " + r.problems.front());
    if (r.truncated > 0)
      log_(std::to_string(r.truncated) + " example(s) longer than " + std::to_string(T + 1) + " tokens were truncated");
    if (r.loss_tokens == 0)
      throw Error("no training example keeps a token in the loss" +
                  std::string(r.truncated > 0 ? " once cut to " + std::to_string(T + 1) + " tokens: raise --seq-len"
                                              : (opt_.mask_prompt ? ": every token is prompt (--mask-prompt)" : "")));
    if (r.mask_fallbacks > 0)
      log_(std::to_string(r.mask_fallbacks) + " conversation(s) render earlier turns differently as they go on: only "
           "their last assistant turn is in the loss");
    const int32_t pad = tokenizer_.pad_id().value_or(tokenizer_.eos_id().value_or(0));
    s.batcher = std::make_unique<data::ExampleBatcher>(ds.train, B, T, opt_.seed, opt_.pack, pad);
    const data::ExampleBatcher val(ds.valid, B, T, opt_.seed, opt_.pack, pad);
    s.eval_batches = std::min<int64_t>(opt_.eval_batches, val.batches_per_epoch());
    std::vector<int32_t> in, tg;
    for (int64_t b = 0; b < s.eval_batches; ++b) {
      val.batch(b, in, tg);
      s.val_inputs.insert(s.val_inputs.end(), in.begin(), in.end());
      s.val_targets.insert(s.val_targets.end(), tg.begin(), tg.end());
    }
  } else {
    const std::string text = load_corpus(opt_.data);
    const data::TextSplit split = data::split_text(text);
    log_("corpus " + opt_.data + ": " + fmt(static_cast<double>(text.size()) / 1e6, "%.1f") + " MB (" +
         fmt(static_cast<double>(split.val.size()) / 1e6, "%.2f") + " MB held out for validation)");
    if (!finetune && !opt_.resume && opt_.init_from.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      // Special tokens (documents, chat turns) where the vocabulary has room beside the 256 bytes.
      const bool room = config.vocab_size >= 256 + static_cast<int64_t>(kOwnSpecialTokens.size());
      tokenizer_ = train_bpe(split.train, static_cast<int>(config.vocab_size),
                             room ? kOwnSpecialTokens : std::vector<std::string>{});
      log_("trained a " + std::to_string(tokenizer_.vocab_size()) + "-token BPE tokenizer in " +
           fmt(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "%.1f") + " s");
    }
    s.train_tokens = tokenizer_.encode(split.train, /*add_special_tokens=*/false);
    s.val_tokens = tokenizer_.encode(split.val, /*add_special_tokens=*/false);
    log_("tokens: " + std::to_string(s.train_tokens.size()) + " for training, " +
         std::to_string(s.val_tokens.size()) + " for validation");
    s.sampler = std::make_unique<data::BatchSampler>(s.train_tokens, B, T, opt_.seed);
    s.eval_batches = opt_.eval_batches;
    data::even_windows(s.val_tokens, s.eval_batches * B, T, s.val_inputs, s.val_targets);
  }
  if (tokenizer_.vocab_size() > config.vocab_size)
    throw Error("the tokenizer has " + std::to_string(tokenizer_.vocab_size()) + " tokens, the model only " +
                std::to_string(config.vocab_size));

  // The model (training from scratch or from a run), adapters, optimizer.
  if (!model_) {
    model_ = std::make_unique<Llama>(device_, config, opt_.seed);
    if (!opt_.init_from.empty() && !opt_.resume)
      load_checkpoint((fs::path(opt_.init_from) / kCheckpoint).string(), *model_, nullptr, nullptr);
  }
  if (model_->arena_size() > 0) {
    const MemoryScope scope(device_, MemoryCategory::OptimizerState);
    s.m = ops::full(device_, {model_->arena_size()}, 0.0);
    s.v = ops::full(device_, {model_->arena_size()}, 0.0);
  }
  if (use_lora) {
    opt_.lora.base_model = opt_.model;
    if (opt_.resume) {
      s.lora = std::make_unique<LoraAdapters>(*model_, read_lora_checkpoint_config(ckpt.string()), LoraAdapters::NoInit{});
    } else {
      LoraConfig lc = opt_.lora;
      lc.seed = opt_.seed;
      s.lora = std::make_unique<LoraAdapters>(*model_, lc);
    }
    model_->set_linear_hook(s.lora.get());
    const MemoryScope scope(device_, MemoryCategory::OptimizerState);
    s.lm = ops::full(device_, {s.lora->arena_size()}, 0.0);
    s.lv = ops::full(device_, {s.lora->arena_size()}, 0.0);
  }
  if (opt_.resume) {
    if (use_lora)
      load_lora_checkpoint(ckpt.string(), *model_, *s.lora, s.lm, s.lv, s.m.defined() ? &s.m : nullptr,
                           s.v.defined() ? &s.v : nullptr);
    else
      load_checkpoint(ckpt.string(), *model_, &s.m, &s.v);
  }
  std::string what = std::to_string(config.parameter_count()) + " parameters (" +
                     (config.quantize_blocks ? "q4gsw block linears, group " + std::to_string(config.group_size)
                                             : "fp32 linears") + ")";
  if (use_lora) {
    int64_t n = 0;
    for (const auto& a : s.lora->adapters()) n += a.rank * (a.in + a.out);
    what += ", frozen; LoRA rank " + std::to_string(opt_.lora.rank) + " on " + std::to_string(s.lora->adapters().size()) +
            " linears: " + std::to_string(n) + " trainable" + (opt_.train_norms ? " (and the norm gains)" : "");
  }
  log_("model: " + what + ", " + device_.info().name + " (" + device_.info().backend_label + ")");
  ops::AdamWOptions ao;
  ao.lr = opt_.lr;
  ao.beta1 = opt_.beta1;
  ao.beta2 = opt_.beta2;
  ao.eps = opt_.eps;
  ao.weight_decay = opt_.weight_decay;
  std::vector<ops::AdamWParam> params;
  if (s.lora) params = s.lora->adamw_params(s.lm, s.lv);
  if (model_->arena_size() > 0)
    for (auto& p : model_->adamw_params(s.m, s.v)) params.push_back(std::move(p));
  s.adamw = std::make_unique<ops::AdamW>(std::move(params), ao);

  // The two recorded steps. Inputs are tensors written before each replay. The step's memory report starts here:
  // what loading left idle in the pool (a Hugging Face import's conversions) goes back first, so that the step's
  // high-water mark is the model, the optimizer and the step's own buffers.
  device_.release_cached_memory();
  device_.reset_peak_memory();
  s.tokens = Tensor::empty(device_, {B, T}, DType::I32);
  s.targets = Tensor::empty(device_, {B * T}, DType::I32);
  s.eval_tokens = Tensor::empty(device_, {B, T}, DType::I32);
  s.eval_targets = Tensor::empty(device_, {B * T}, DType::I32);
  s.train_step = device_.record([&] {
    s.train_loss = s.lora ? s.lora->train_step(*model_, s.tokens, s.targets, *s.adamw)
                          : model_->train_step(s.tokens, s.targets, *s.adamw);
  });
  s.step_memory = device_.memory();
  s.eval_step = device_.record([&] {
    const MemoryScope scope(device_, MemoryCategory::Activations);
    s.eval_loss = model_->loss(s.eval_tokens, s.eval_targets, true).value();
  });
  log_("training step recorded: " + std::to_string(s.train_step.dispatches()) + " dispatches per step");

  // Run directory and loss curve.
  fs::create_directories(dir);
  // loss.csv rewritten atomically: for a resumed run, its rows up to the checkpoint's step (a run resumed from an
  // earlier checkpoint writes the rest again), whose losses continue the curves.
  s.csv = std::make_unique<detail::LossLog>((dir / "loss.csv").string(),
                                            opt_.resume ? std::optional<int64_t>(step_) : std::nullopt);
  for (const auto& row : s.csv->kept()) {
    if (row.train_loss) s.train_curve.emplace_back(static_cast<double>(row.step), *row.train_loss);
    if (row.val_loss) s.val_curve.emplace_back(static_cast<double>(row.step), *row.val_loss);
  }
  if (!opt_.resume && !use_lora) {
    write_text(dir / "config.json", config.to_json() + "\n");
    if (finetune) {
      copy_tokenizer_files(opt_.model, dir);
    } else if (!opt_.init_from.empty()) {
      copy_tokenizer_files(opt_.init_from, dir);
    } else {
      // The tokenizer trained here, with its special tokens, end-of-sequence ids and chat template.
      tokenizer_.save((dir / kTokenizer).string());
      json tc = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", config.max_seq_len},
                 {"clean_up_tokenization_spaces", false}};
      const auto end = tokenizer_.token_to_id("<|endoftext|>"), im_end = tokenizer_.token_to_id("<|im_end|>");
      if (end && im_end) {
        tc["eos_token"] = tc["pad_token"] = "<|endoftext|>";
        tc["chat_template"] = kOwnChatTemplate;
        write_text(dir / "generation_config.json", json({{"eos_token_id", {*end, *im_end}}}).dump(2) + "\n");
      }
      write_text(dir / "tokenizer_config.json", tc.dump(2) + "\n");
      tokenizer_ = Tokenizer::load_dir(dir.string());  // as a run's users will read it
    }
  }
  // Every checkpoint names the tokenizer.json beside it (checked against the checkpoint on resume, above), so that
  // generate, export and --resume can refuse another run's. A LoRA run keeps no tokenizer: its base model's is used.
  if (!use_lora && fs::exists(dir / kTokenizer)) s.tokenizer_hash = tokenizer_file_hash((dir / kTokenizer).string());
}

Trainer::~Trainer() = default;

const LoraAdapters* Trainer::lora() const { return impl_->lora.get(); }
const MemoryReport& Trainer::step_memory() const { return impl_->step_memory; }

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
  // Each batch's loss is a mean over its counted targets: weighted by their count, the mean over all of them.
  double total = 0, counted = 0;
  for (int64_t b = 0; b < s.eval_batches; ++b) {
    const std::span<const int32_t> targets(s.val_targets.data() + b * per, per);
    s.eval_tokens.write(std::span<const int32_t>(s.val_inputs.data() + b * per, per));
    s.eval_targets.write(targets);
    s.eval_step.replay();
    const double n = static_cast<double>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
    total += n * s.eval_loss.to_host_f32()[0];
    counted += n;
  }
  return counted > 0 ? total / counted : 0.0;
}

void Trainer::save() {
  Impl& s = *impl_;
  const fs::path dir = opt_.out_dir;
  const json state = {{"step", step_}, {"options", options_json(opt_)}};
  if (s.lora) {
    save_lora_checkpoint((dir / kCheckpoint).string(), *model_, *s.lora, s.lm, s.lv, s.m.defined() ? &s.m : nullptr,
                         s.v.defined() ? &s.v : nullptr, state.dump());
    save_peft(*s.lora, dir.string());  // adapter_model.safetensors + adapter_config.json, as peft saves them
  } else {
    save_checkpoint((dir / kCheckpoint).string(), *model_, &s.m, &s.v, state.dump(), s.tokenizer_hash);
  }
  s.last_saved = step_;
  s.csv->sync();  // the rows this checkpoint covers reach the disk with it
  std::vector<PlotSeries> series = {{"train", s.train_curve, {31, 119, 180}, false},
                                    {"validation", s.val_curve, {255, 127, 14}, true}};
  const std::string kind = std::string(s.lora ? "LoRA on " : "") + (model_->config().quantize_blocks ? "q4gsw " : "") +
                           model_->config().architecture;
  write_line_plot((dir / "loss.png").string(), "wgtrain: " + kind + " on " + opt_.data, "step", "loss (nats/token)",
                  series);
}

Trainer::Outcome Trainer::run(const std::function<void(const StepInfo&)>& on_step) {
  Impl& s = *impl_;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto csv_row = [&](int64_t step, double lr, std::optional<double> loss, std::optional<double> val) {
    s.csv->append(step, step * opt_.batch_size * s.seq_len, lr, loss, val, elapsed());
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
    s.batch(step_, inputs, targets);
    s.tokens.write(inputs);
    s.targets.write(targets);
    const double lr = lr_at(step);
    s.adamw->set_step(step, lr);
    s.train_step.replay();
    const double loss = s.train_loss.to_host_f32()[0];
    if (!std::isfinite(loss))
      throw Error("training diverged: the loss at step " + std::to_string(step) + " is " + fmt(loss) +
                  " (learning rate " + fmt(lr) + "); try a lower --lr. " +
                  (s.last_saved >= 0 ? "The checkpoint in '" + opt_.out_dir + "' (step " +
                                           std::to_string(s.last_saved) + ") is intact"
                                     : std::string("No checkpoint was saved")));
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
