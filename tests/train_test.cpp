// End to end on the real corpora: a small model trained on the Brown corpus ends well below the unigram entropy on
// validation; a run stopped and resumed from its checkpoint repeats the uninterrupted run's losses bit for bit;
// fine-tuning on the fortunes lowers their validation loss; bad checkpoints are clear errors; generation samples
// from a trained run. (The step itself is checked against the float64 reference in llama_test.cpp.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "support/test_support.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/corpus.h"
#include "wgtrain/data.h"
#include "wgtrain/generate.h"
#include "wgtrain/hf.h"
#include "wgtrain/lora.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/trainer.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;

// Training needs no poisoned buffers (the op tests catch unwritten elements), and runs faster without: its own
// device, kept to the end like the shared one (see test_support.cpp).
Device& train_device() {
  static Device* dev = new Device(Device::open());
  return *dev;
}

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("wgtrain-train-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p;
}

std::string write_config(const std::string& json) {
  const fs::path p = scratch("model.json");
  std::ofstream(p) << json;
  return p.string();
}

// A 2-layer model with a 512-token vocabulary: small enough for a few minutes on llvmpipe, big enough to learn
// more than token frequencies.
const char* kSmallModel =
    R"({"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 128,
        "max_seq_len": 64})";

// Prints how long a part of a long test took, so that whoever has to shorten the test sees where its time goes.
struct SectionTimer {
  const char* name;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~SectionTimer() {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::printf("[ section  ] %s: %.1f s\n", name, took.count());
    std::fflush(stdout);
  }
};

// Cross-entropy of the validation text under the training text's unigram distribution (add-one smoothed): what a
// model that ignores context scores.
double unigram_entropy(const Tokenizer& tok, const std::string& corpus) {
  const data::TextSplit split = data::split_text(load_corpus(corpus));
  const auto train = tok.encode(split.train, false), val = tok.encode(split.val, false);
  std::vector<double> count(static_cast<size_t>(tok.vocab_size()), 1.0);
  for (int32_t t : train) count[t] += 1;
  const double total = static_cast<double>(train.size()) + static_cast<double>(count.size());
  double h = 0;
  for (int32_t t : val) h -= std::log(count[t] / total);
  return h / static_cast<double>(val.size());
}

// The long test: pretraining on Brown, then what stands on it. One test, because ctest runs each test in a process
// of its own, and the pretraining (about two minutes on llvmpipe) should happen once.
TEST(Train, OnBrownThenFineTunedOnFortunesThenSampled) {
  TrainOptions o;
  o.model = write_config(kSmallModel);
  o.data = "brown";
  o.out_dir = scratch("brown").string();
  // 400, not 250: this model leaves the unigram plateau somewhere between step 90 and past step 250 depending on
  // nothing but rounding (measured 2026-12-04: the same 250-step run escaped near step 90 with the row attention
  // kernels, near 200 with the tiled ones, and not at all with the tiled dS path, which escaped near 90 in a
  // 400-step schedule). The test is about training working, not about when a chaotic escape happens.
  o.steps = 400;
  o.batch_size = 16;
  o.seq_len = 64;
  o.lr = 1e-2;
  o.warmup = 25;
  o.eval_every = 125;
  o.save_every = 1000;
  double final_val = NAN, unigram = NAN;
  {
    SectionTimer timer{"pretraining on Brown"};
    Trainer t(train_device(), o);
    t.run([&](const StepInfo& s) {
      if (s.val_loss) final_val = *s.val_loss;
    });
    unigram = unigram_entropy(t.tokenizer(), "brown");
  }
  const std::string dir = o.out_dir;
  {
    SCOPED_TRACE("pretraining");
    // About 5.3 nats for this tokenizer; the run ends near 4.5.
    EXPECT_LT(final_val, unigram - 0.5) << "unigram entropy " << unigram;
    for (const char* f : {"checkpoint.safetensors", "tokenizer.json", "config.json", "loss.csv", "loss.png"})
      EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
    // The curve: a header, the step-0 validation row, then one row per step.
    std::ifstream csv(fs::path(dir) / "loss.csv");
    int rows = 0;
    for (std::string line; std::getline(csv, line);) ++rows;
    EXPECT_EQ(rows, 1 + 1 + 400);
  }
  {
    SCOPED_TRACE("fine-tuning on the fortunes");
    SectionTimer timer{"fine-tuning"};
    TrainOptions f;
    f.init_from = dir;
    f.data = "fortunes";
    f.out_dir = scratch("fortunes").string();
    f.steps = 60;
    f.batch_size = 16;
    f.seq_len = 64;
    f.lr = 3e-3;
    f.warmup = 6;
    f.eval_every = 60;
    Trainer t(train_device(), f);
    const double before = t.evaluate();
    double after = NAN;
    t.run([&](const StepInfo& s) {
      if (s.val_loss) after = *s.val_loss;
    });
    EXPECT_LT(after, before - 0.2) << "fortunes validation loss " << before << " -> " << after;
    // The fine-tuned run kept the pretrained tokenizer.
    EXPECT_EQ(Tokenizer::load((fs::path(f.out_dir) / "tokenizer.json").string()).to_json(),
              Tokenizer::load((fs::path(dir) / "tokenizer.json").string()).to_json());
  }
  {
    SCOPED_TRACE("generation");
    SectionTimer timer{"generation"};
    Generator g(train_device(), dir);
    GenerateOptions go;
    go.prompt = "The jury said";
    go.max_tokens = 12;
    go.temperature = 0;  // greedy: the same every time
    std::string streamed;
    const std::string a = g.generate(go, [&](const std::string& piece) { streamed += piece; });
    EXPECT_FALSE(a.empty());  // the new text alone, the prompt not repeated
    EXPECT_EQ(streamed, a);
    EXPECT_EQ(g.stats().new_tokens, 12);
    EXPECT_EQ(g.generate(go), a);
    go.temperature = 1.0;
    go.top_k = 20;
    go.seed = 5;
    const std::string b = g.generate(go);
    EXPECT_EQ(g.generate(go), b) << "a seed decides the sample";
  }
  {
    SCOPED_TRACE("exported, re-imported and LoRA-fine-tuned on the fortunes as chat data");
    SectionTimer timer{"export, import, LoRA"};
    // The Brown model as a Hugging Face directory, read back as any Hugging Face model is.
    const fs::path hf_dir = scratch("brown-hf");
    {
      const auto model = load_run_model(train_device(), dir, Trainable::None);
      hf::ExportOptions eo;
      eo.dtype = "f32";
      hf::export_model(*model, hf_dir.string(), eo, nullptr, dir);
    }
    ASSERT_TRUE(hf::is_model_dir(hf_dir.string()));
    // Fortunes as conversations: a user asks, the assistant answers with a fortune (short ones, to fit the rows).
    const fs::path data = scratch("fortune-chat");
    fs::create_directories(data);
    {
      const std::string text = load_corpus("fortunes");
      std::ofstream train(data / "train.jsonl"), valid(data / "valid.jsonl");
      int n = 0;
      for (size_t at = 0; at < text.size() && n < 600;) {
        size_t end = text.find("\n\n", at);
        if (end == std::string::npos) end = text.size();
        const std::string fortune = text.substr(at, end - at);
        at = end + 2;
        if (fortune.size() < 20 || fortune.size() > 120) continue;
        const nlohmann::json line = {{"messages", {{{"role", "user"}, {"content", "Tell me a fortune."}},
                                                   {{"role", "assistant"}, {"content", fortune}}}}};
        (n++ % 10 == 9 ? valid : train) << line.dump() << "\n";
      }
    }
    // A 30-step LoRA run, stopped after `stop_at` steps (as Ctrl-C stops one) or resumed to its end.
    auto lora_run = [&](const std::string& out, int64_t stop_at, bool resume) {
      TrainOptions l;
      l.fine_tune = "lora";
      l.model = hf_dir.string();
      l.data = data.string();
      l.out_dir = out;
      l.mask_prompt = true;
      l.lora.rank = 8;
      l.lora.alpha = 16;
      l.lora.targets = LoraConfig::module_names();
      l.steps = 30;
      l.batch_size = 8;
      l.seq_len = 48;
      l.lr = 1e-2;
      l.warmup = 4;
      l.weight_decay = 0;
      l.eval_every = 1000;
      l.eval_batches = 4;
      l.save_every = 1000;
      l.resume = resume;
      Trainer t(train_device(), l);
      const double before = t.evaluate();
      std::vector<double> losses;
      double after = NAN;
      t.run([&](const StepInfo& s) {
        losses.push_back(s.loss);
        if (s.val_loss) after = *s.val_loss;
        if (s.step == stop_at) t.request_stop();
      });
      return std::make_tuple(before, after, losses);
    };
    const std::string whole = scratch("lora-whole").string(), split = scratch("lora-split").string();
    const auto [before, after, losses] = lora_run(whole, 0, false);
    EXPECT_LT(after, before - 0.1) << "held-out assistant loss " << before << " -> " << after;
    for (const char* f : {"adapter_model.safetensors", "adapter_config.json", "checkpoint.safetensors", "loss.csv"})
      EXPECT_TRUE(fs::exists(fs::path(whole) / f)) << f;
    // Stopped at 15 and resumed: steps 16..30 are the uninterrupted run's, bit for bit.
    lora_run(split, 15, false);
    const auto resumed = std::get<2>(lora_run(split, 0, true));
    ASSERT_EQ(resumed.size(), 15u);
    EXPECT_EQ(resumed, std::vector<double>(losses.begin() + 15, losses.end()));
  }
}

TEST(Train, AResumedRunRepeatsTheUninterruptedOneBitForBit) {
  TrainOptions o;
  o.model = write_config(kSmallModel);
  o.steps = 14;
  o.batch_size = 4;
  o.seq_len = 32;
  o.warmup = 4;
  o.eval_every = 5;
  o.eval_batches = 2;
  o.save_every = 100;
  std::vector<double> straight, resumed;
  std::map<int64_t, double> straight_val, resumed_val;
  {
    o.out_dir = scratch("straight").string();
    Trainer t(train_device(), o);
    t.run([&](const StepInfo& s) {
      straight.push_back(s.loss);
      if (s.val_loss) straight_val[s.step] = *s.val_loss;
    });
  }
  o.out_dir = scratch("resumed").string();
  {
    Trainer t(train_device(), o);
    const auto outcome = t.run([&](const StepInfo& s) {
      resumed.push_back(s.loss);
      if (s.val_loss) resumed_val[s.step] = *s.val_loss;
      if (s.step == 6) t.request_stop();  // as Ctrl-C does
    });
    EXPECT_EQ(outcome, Trainer::Outcome::Interrupted);
    EXPECT_EQ(t.step(), 6);
  }
  {
    TrainOptions r;  // no steps: the run's own
    r.out_dir = o.out_dir;
    r.resume = true;
    r.eval_every = o.eval_every;
    r.eval_batches = o.eval_batches;
    Trainer t(train_device(), r);
    EXPECT_EQ(t.step(), 6);
    EXPECT_EQ(t.run([&](const StepInfo& s) {
      resumed.push_back(s.loss);
      if (s.val_loss) resumed_val[s.step] = *s.val_loss;
    }), Trainer::Outcome::Finished);
  }
  ASSERT_EQ(straight.size(), 14u);
  EXPECT_EQ(resumed, straight);
  EXPECT_EQ(resumed_val, straight_val);
  // The resumed run's CSV continues the first: one row per step, none repeated.
  std::ifstream csv(fs::path(o.out_dir) / "loss.csv");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 1 + 1 + 14);
}

TEST(Train, BadCheckpointsAreClearErrors) {
  TrainOptions o;
  o.model = write_config(kSmallModel);
  o.out_dir = scratch("two-steps").string();
  o.steps = 2;
  o.batch_size = 2;
  o.seq_len = 16;
  o.eval_batches = 1;
  Trainer(train_device(), o).run();
  const fs::path good = fs::path(o.out_dir) / "checkpoint.safetensors";
  // A flipped byte in the tensor data: the checksum catches it.
  const fs::path flipped = scratch("flipped.safetensors");
  fs::copy_file(good, flipped);
  {
    std::fstream f(flipped, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  }
  try {
    read_checkpoint_info(flipped.string());
    ADD_FAILURE() << "a corrupt checkpoint was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
  // Truncated.
  const fs::path cut = scratch("cut.safetensors");
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  EXPECT_THROW(read_checkpoint_info(cut.string()), Error);
  // Another model's shapes.
  LlamaConfig other = read_checkpoint_info(good.string()).config;
  other.dim = 32;
  Llama model(train_device(), other, 1);
  try {
    load_checkpoint(good.string(), model, nullptr, nullptr);
    ADD_FAILURE() << "a checkpoint of another model was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different model"), std::string::npos) << e.what();
  }
  // Resuming where there is nothing to resume.
  TrainOptions r;
  r.out_dir = scratch("empty").string();
  r.resume = true;
  EXPECT_THROW(Trainer(train_device(), r), Error);
}

}  // namespace
}  // namespace wgtrain
