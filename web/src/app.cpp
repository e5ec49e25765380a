// The page's model (web/index.html, through web/app_worker.js): a small q4gsw Llama over bytes (vocabulary 256, so
// any text trains without a tokenizer), trained with the recorded step the native trainer uses, sampled with a KV
// cache, and saved as safetensors. A C interface for the Worker's ccall; every function that waits on the GPU is
// called with {async: true} (ASYNCIFY). Errors are returned as a status with app_error() holding the message.
//
// Fine-tuning (app_ft_*) is the native CLI's `wgtrain finetune`: the library's Trainer on files the Worker wrote into
// Emscripten's in-memory file system (a Hugging Face or run directory, the data), its run directory there too, so
// what the page downloads is what the CLI writes and what the CLI wrote loads here.
#include <emscripten/emscripten.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/device.h"
#include "wgtrain/generate.h"
#include "wgtrain/llama.h"
#include "wgtrain/ops.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/tensor.h"
#include "wgtrain/trainer.h"
#include "zip.h"

namespace {

using namespace wgtrain;

struct App {
  std::optional<Device> device;
  LlamaConfig config;
  std::unique_ptr<Llama> model;
  Tensor m, v, tokens, targets, loss;
  std::unique_ptr<ops::AdamW> adamw;
  Recording step;
  int64_t batch = 0, seq = 0;
  uint64_t seed = 0;
  double lr = 0;
  int64_t steps = 0;  // of the schedule: warm-up then cosine to a tenth, as the native trainer's
  std::vector<uint8_t> data;
  std::string error, text;
  std::unique_ptr<Trainer> trainer;  // a fine-tune run
  std::vector<uint8_t> bytes;        // app_zip's archive
};

App& app() {
  static App a;
  return a;
}

// splitmix64: batches and sampling draws from (seed, step) alone, so a run is repeatable.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    app().error = e.what();
    return 1;
  }
}

void build_step() {
  App& a = app();
  a.m = ops::full(*a.device, {a.model->arena_size()}, 0.0);
  a.v = ops::full(*a.device, {a.model->arena_size()}, 0.0);
  ops::AdamWOptions o;
  o.lr = a.lr;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.weight_decay = 0.1;
  a.adamw = std::make_unique<ops::AdamW>(a.model->adamw_params(a.m, a.v), o);
  a.tokens = Tensor::empty(*a.device, {a.batch, a.seq}, DType::I32);
  a.targets = Tensor::empty(*a.device, {a.batch * a.seq}, DType::I32);
  a.step = a.device->record([&] { a.loss = a.model->train_step(a.tokens, a.targets, *a.adamw); });
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* app_error() { return app().error.c_str(); }

// Opens the browser's WebGPU device; app_text() then describes it as JSON.
EMSCRIPTEN_KEEPALIVE int app_open() {
  return guarded([] {
    App& a = app();
    if (!a.device) a.device.emplace(Device::open({}));
    const AdapterInfo& i = a.device->info();
    const DeviceLimits& l = a.device->limits();
    a.text = "{\"name\": \"" + i.name + "\", \"software\": " + (i.software ? "true" : "false") +
             ", \"invocations\": " + std::to_string(l.max_invocations_per_workgroup) +
             ", \"storage_offset_alignment\": " + std::to_string(l.min_storage_offset_alignment) +
             ", \"max_buffer\": " + std::to_string(l.max_buffer_size) + "}";
  });
}

EMSCRIPTEN_KEEPALIVE const char* app_text() { return app().text.c_str(); }

// A new model of the given size over bytes, with a fresh optimizer and its recorded training step.
EMSCRIPTEN_KEEPALIVE int app_create(int dim, int layers, int heads, int kv_heads, int seq, int batch, double lr,
                                    int steps, int seed) {
  return guarded([=] {
    App& a = app();
    LlamaConfig c;
    c.vocab_size = 256;
    c.dim = dim;
    c.n_layers = layers;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.max_seq_len = seq;
    c.validate();
    a.config = c;
    a.batch = batch;
    a.seq = seq;
    a.lr = lr;
    a.steps = steps;
    a.seed = static_cast<uint64_t>(seed);
    a.step = Recording();
    a.adamw.reset();
    a.model = std::make_unique<Llama>(*a.device, c, a.seed);
    build_step();
  });
}

// The training text (copied).
EMSCRIPTEN_KEEPALIVE int app_set_data(const uint8_t* bytes, int n) {
  return guarded([=] {
    App& a = app();
    if (n < a.seq + 2) throw ArgumentError("the training text has " + std::to_string(n) + " bytes; it needs more than " +
                                           std::to_string(a.seq + 1) + " (the sequence length and one)");
    a.data.assign(bytes, bytes + n);
  });
}

// One training step (counting from 1): a batch of windows of the text drawn from (seed, step), the learning rate of
// the schedule; returns the loss, or NaN with app_error() set.
EMSCRIPTEN_KEEPALIVE double app_step(int step) {
  double loss = NAN;
  const int rc = guarded([&] {
    App& a = app();
    if (!a.model) throw Error("no model: create one first");
    std::vector<int32_t> in(a.batch * a.seq), out(a.batch * a.seq);
    const uint64_t span = a.data.size() - static_cast<uint64_t>(a.seq) - 1;
    for (int64_t b = 0; b < a.batch; ++b) {
      const uint64_t at = mix(a.seed * 1000003u + static_cast<uint64_t>(step) * 131u + static_cast<uint64_t>(b)) % span;
      for (int64_t t = 0; t < a.seq; ++t) {
        in[b * a.seq + t] = a.data[at + t];
        out[b * a.seq + t] = a.data[at + t + 1];
      }
    }
    a.tokens.write(in);
    a.targets.write(out);
    const int64_t warmup = std::min<int64_t>(20, a.steps / 10);
    double lr = a.lr;
    if (step <= warmup) lr = a.lr * step / std::max<int64_t>(warmup, 1);
    else {
      const double p = std::min(1.0, static_cast<double>(step - warmup) / std::max<int64_t>(a.steps - warmup, 1));
      lr = a.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * p)));
    }
    a.adamw->set_step(step, lr);
    a.step.replay();
    loss = a.loss.to_host_f32()[0];
  });
  return rc ? NAN : loss;
}

// Continues `prompt` by up to `max_new` bytes (temperature 0: greedy); app_text() holds the new bytes.
EMSCRIPTEN_KEEPALIVE int app_generate(const uint8_t* prompt, int n, int max_new, double temperature, int seed) {
  return guarded([=] {
    App& a = app();
    if (!a.model) throw Error("no model: create or load one first");
    const int64_t ctx = a.config.max_seq_len;
    std::vector<int32_t> p(prompt, prompt + n);
    if (p.empty()) p.push_back('\n');
    const int64_t budget = std::min<int64_t>(max_new, ctx - 1);
    if (static_cast<int64_t>(p.size()) + budget > ctx) p.erase(p.begin(), p.end() - (ctx - budget));
    KVCache cache = a.model->make_cache(1, static_cast<int64_t>(p.size()) + budget);
    Tensor logits = a.model->next_logits(Tensor::from_host(*a.device, {1, static_cast<int64_t>(p.size())}, p), cache);
    std::string out;
    for (int64_t k = 0; k < budget; ++k) {
      const std::vector<float> l = logits.to_host_f32();
      int32_t next = 0;
      if (temperature <= 0) {
        for (size_t j = 1; j < l.size(); ++j)
          if (l[j] > l[next]) next = static_cast<int32_t>(j);
      } else {
        double top = l[0];
        for (float x : l) top = std::max<double>(top, x);
        std::vector<double> w(l.size());
        double sum = 0;
        for (size_t j = 0; j < l.size(); ++j) sum += w[j] = std::exp((l[j] - top) / temperature);
        double r = static_cast<double>(mix(static_cast<uint64_t>(seed) * 7919u + static_cast<uint64_t>(k)) >> 11) *
                   0x1.0p-53 * sum;
        for (next = 0; next + 1 < static_cast<int32_t>(w.size()) && r >= w[next]; ++next) r -= w[next];
      }
      out.push_back(static_cast<char>(next));
      if (k + 1 < budget) logits = a.model->next_logits(Tensor::from_host(*a.device, {1, 1}, std::vector<int32_t>{next}), cache);
    }
    a.text = out;
  });
}

EMSCRIPTEN_KEEPALIVE int app_text_size() { return static_cast<int>(app().text.size()); }

// The model as safetensors: every weight with its Hugging Face name in float32 (a q4 linear dequantised: what the
// forward computes with), the config in the metadata. The bytes stay valid until the next call; app_bytes_size().
EMSCRIPTEN_KEEPALIVE const uint8_t* app_save() {
  static std::vector<uint8_t> bytes;
  const int rc = guarded([] {
    App& a = app();
    if (!a.model) throw Error("no model to save");
    safetensors::Contents c;
    for (size_t i = 0; i < a.model->params().size(); ++i) {
      const Llama::Param& p = a.model->params()[i];
      const std::vector<float> v = a.model->host_value(i);
      safetensors::Array arr;
      arr.dtype = "F32";
      arr.shape = p.shape;
      arr.bytes.resize(v.size() * sizeof(float));
      std::memcpy(arr.bytes.data(), v.data(), arr.bytes.size());
      c.tensors[p.name] = std::move(arr);
    }
    c.metadata["wgtrain_config"] = a.config.to_json();
    c.metadata["wgtrain_tokenizer"] = "bytes";
    bytes = safetensors::serialize(c);
  });
  app().text = rc ? "" : std::to_string(bytes.size());
  return rc ? nullptr : bytes.data();
}

// A model from safetensors app_save() wrote (or any file with the same names and shapes, config in the metadata).
EMSCRIPTEN_KEEPALIVE int app_load(const uint8_t* file, int n, int seq, int batch, double lr, int steps, int seed) {
  return guarded([=] {
    App& a = app();
    const safetensors::Contents c = safetensors::parse({file, static_cast<size_t>(n)});
    const auto it = c.metadata.find("wgtrain_config");
    if (it == c.metadata.end()) throw ArgumentError("the file has no wgtrain_config in its metadata: not a model this page saved");
    LlamaConfig cfg = LlamaConfig::from_json(it->second);
    if (cfg.vocab_size != 256) throw ArgumentError("the page's models read bytes (vocabulary 256); this one has " +
                                                   std::to_string(cfg.vocab_size));
    a.config = cfg;
    a.seq = std::min<int64_t>(seq, cfg.max_seq_len);
    a.batch = batch;
    a.lr = lr;
    a.steps = steps;
    a.seed = static_cast<uint64_t>(seed);
    a.step = Recording();
    a.adamw.reset();
    a.model = std::make_unique<Llama>(*a.device, cfg, Llama::NoInit{});
    a.model->load_weights([&](const Llama::Param& p) {
      const auto t = c.tensors.find(p.name);
      if (t == c.tensors.end()) throw ArgumentError("the file lacks " + p.name);
      if (t->second.dtype != "F32" || t->second.shape != p.shape)
        throw ArgumentError(p.name + ": expected F32 " + shape_str(p.shape));
      std::vector<float> v(numel(p.shape));
      std::memcpy(v.data(), t->second.bytes.data(), v.size() * sizeof(float));
      return v;
    });
    build_step();
  });
}

// ---- fine-tuning ----------------------------------------------------------------------------------------------

// A step's numbers to the Worker (which posts them to the page), and whether the page asked to stop.
EM_JS(void, app_js_on_step, (const char* json), { self.wgtrainOnStep(UTF8ToString(json)); });
EM_JS(int, app_js_stop_requested, (), { return self.wgtrainStopRequested ? 1 : 0; });
EM_JS(void, app_js_log, (const char* line), { self.wgtrainOnLog(UTF8ToString(line)); });

// Sets a fine-tune run up from JSON options (the CLI's flags by their TrainOptions names: model, data, out,
// fine_tune, steps, batch_size, seq_len, lr, warmup, min_lr_ratio, weight_decay, eval_every, eval_batches,
// save_every, seed, lora_rank, lora_alpha, lora_dropout, lora_layers, targets, train_norms, mask_prompt, pack,
// quantize, resume). Left out, each is `wgtrain finetune`'s default (src/cli/main.cpp). app_text(): the run as JSON.
EMSCRIPTEN_KEEPALIVE int app_ft_start(const char* options) {
  return guarded([=] {
    App& a = app();
    a.trainer.reset();
    const nlohmann::json j = nlohmann::json::parse(options);
    TrainOptions o;
    o.fine_tune = "lora";  // the CLI's finetune defaults
    o.lr = 1e-4;
    o.warmup = 10;
    o.weight_decay = 0.0;
    o.eval_every = 50;
    o.save_every = 100;
    o.model = j.at("model").get<std::string>();
    o.data = j.at("data").get<std::string>();
    o.out_dir = j.value("out", std::string("/run"));
    o.fine_tune = j.value("fine_tune", o.fine_tune);
    o.steps = j.value("steps", o.steps);
    o.batch_size = j.value("batch_size", o.batch_size);
    o.seq_len = j.value("seq_len", o.seq_len);
    o.lr = j.value("lr", o.lr);
    o.warmup = j.value("warmup", o.warmup);
    o.min_lr_ratio = j.value("min_lr_ratio", o.min_lr_ratio);
    o.weight_decay = j.value("weight_decay", o.weight_decay);
    o.eval_every = j.value("eval_every", o.eval_every);
    o.eval_batches = j.value("eval_batches", o.eval_batches);
    o.save_every = j.value("save_every", o.save_every);
    o.seed = j.value("seed", o.seed);
    o.lora.rank = j.value("lora_rank", o.lora.rank);
    o.lora.alpha = j.value("lora_alpha", o.lora.alpha);
    o.lora.dropout = j.value("lora_dropout", o.lora.dropout);
    o.lora.layers = j.value("lora_layers", o.lora.layers);
    if (j.contains("targets")) {
      const auto t = j["targets"].get<std::vector<std::string>>();
      o.lora.targets = (t.size() == 1 && t[0] == "all") ? LoraConfig::module_names() : t;
    }
    o.train_norms = j.value("train_norms", o.train_norms);
    o.mask_prompt = j.value("mask_prompt", o.mask_prompt);
    o.pack = j.value("pack", o.pack);
    o.quantize = j.value("quantize", o.quantize);
    o.resume = j.value("resume", false);
    o.overwrite = !o.resume;  // the page's run directory is its own: a new run replaces the last
    if (o.fine_tune != "lora" && o.fine_tune != "full") throw ArgumentError("fine_tune: lora or full");
    a.trainer = std::make_unique<Trainer>(*a.device, o, [](const std::string& line) { app_js_log(line.c_str()); });
    const TrainOptions& t = a.trainer->options();
    nlohmann::json r = {{"step", a.trainer->step()},         {"steps", t.steps},
                        {"batch_size", t.batch_size},        {"seq_len", t.seq_len},
                        {"train_tokens", a.trainer->train_tokens()}, {"val_tokens", a.trainer->val_tokens()},
                        {"parameters", a.trainer->model().config().parameter_count()},
                        {"architecture", a.trainer->model().config().architecture},
                        {"adapters", a.trainer->lora() ? a.trainer->lora()->adapters().size() : 0}};
    a.text = r.dump();
  });
}

// Trains the run to its last step or until the page asks to stop (checked after each step), then saves (the
// Trainer does). Each step goes to the page through app_js_on_step.
EMSCRIPTEN_KEEPALIVE int app_ft_run() {
  return guarded([] {
    App& a = app();
    if (!a.trainer) throw Error("no fine-tune run: start one first");
    Trainer& tr = *a.trainer;
    const Trainer::Outcome outcome = tr.run([&](const StepInfo& s) {
      nlohmann::json j = {{"step", s.step}, {"steps", s.steps}, {"loss", s.loss}, {"lr", s.lr},
                          {"tokens_per_second", s.tokens_per_second}, {"elapsed", s.elapsed}, {"saved", s.saved}};
      if (s.val_loss) j["val_loss"] = *s.val_loss;
      app_js_on_step(j.dump().c_str());
      if (app_js_stop_requested()) tr.request_stop();
    });
    a.text = outcome == Trainer::Outcome::Finished ? "finished" : "stopped";
    a.trainer.reset();  // the run's files are complete; its lock and buffers go
  });
}

// Generates from a model directory (Hugging Face or run) with the peft adapters of `adapter` when given, as
// `wgtrain generate` does (the base's linears as q4gsw, as QLoRA trained on them). JSON: model, adapter, prompt,
// chat, max_tokens, temperature, top_k, seed. app_text(): the new text.
EMSCRIPTEN_KEEPALIVE int app_ft_generate(const char* options) {
  return guarded([=] {
    App& a = app();
    const nlohmann::json j = nlohmann::json::parse(options);
    hf::ImportOptions import;
    import.quantize = j.value("quantize", true);
    Generator gen(*a.device, j.at("model").get<std::string>(), import, j.value("adapter", std::string()));
    GenerateOptions g;
    g.prompt = j.value("prompt", std::string());
    g.chat = j.value("chat", false);
    g.max_tokens = j.value("max_tokens", g.max_tokens);
    g.temperature = j.value("temperature", g.temperature);
    g.top_k = j.value("top_k", g.top_k);
    g.seed = j.value("seed", g.seed);
    a.text = gen.generate(g);
  });
}

// A store-only zip of files: JSON [[name in the archive, path], ...]. Returns the bytes (valid until the next
// call); app_bytes_size() their count.
EMSCRIPTEN_KEEPALIVE const uint8_t* app_zip(const char* entries) {
  App& a = app();
  const int rc = guarded([=] {
    const auto e = nlohmann::json::parse(entries).get<std::vector<std::pair<std::string, std::string>>>();
    app().bytes = web::zip_files(e);
  });
  return rc ? nullptr : a.bytes.data();
}
EMSCRIPTEN_KEEPALIVE int app_bytes_size() { return static_cast<int>(app().bytes.size()); }

}  // extern "C"
