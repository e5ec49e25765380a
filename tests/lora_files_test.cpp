// LoRA adapters in and out of files: peft's adapter format (written as peft writes it, read as peft reads it, with
// what wgtrain does not implement refused by name), fusing adapters into a plain model, and checkpoints that resume
// a LoRA run bit for bit. Tolerances: peft round trips and resumes are exact; fused logits equal adapted ones to
// 1e-4 of the logits' largest magnitude (W x + s B (A x) against (W + s B A) x in float32); losses through foreign
// adapters equal the float64 reference's to 1e-5 relative.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "model/llama_ref.h"
#include "support/test_support.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"
#include "wgtrain/ops.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using nlohmann::json;
using test::device;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 37;
  c.dim = 24;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 40;
  c.max_seq_len = 9;
  c.group_size = 8;
  return c;
}

std::vector<int32_t> random_tokens(const LlamaConfig& c, int64_t n, std::mt19937_64& g) {
  std::uniform_int_distribution<int> tok(0, static_cast<int>(c.vocab_size) - 1);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(tok(g));
  return out;
}

fs::path scratch(const std::string& name) {
  // One folder per test process, removed when the process exits.
  static const struct Scratch {
    fs::path dir = fs::temp_directory_path() / ("wgtrain_lora_" + std::to_string(::getpid()));
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } scratch_dir;
  const fs::path& dir = scratch_dir.dir;
  fs::create_directories(dir);
  fs::remove_all(dir / name);
  return dir / name;
}

void randomize_b(LoraAdapters& lora, double std) {
  std::vector<float> v = lora.values().to_host_f32();
  std::normal_distribution<double> n(0.0, std);
  for (const auto& a : lora.adapters())
    for (int64_t e = 0; e < a.out * a.rank; ++e) v[a.b_offset + e] = static_cast<float>(n(test::rng()));
  lora.values().write(v);
}

void randomize_trained_gains(Llama& model) {
  std::vector<float> v = model.values().to_host_f32();
  std::normal_distribution<float> n(1.0f, 0.3f);
  for (auto& e : v) e = n(test::rng());
  model.values().write(v);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

std::vector<float> logits(const Llama& model, const std::vector<int32_t>& tokens, int64_t B, int64_t T) {
  return model.logits(Tensor::from_host(device(), {B, T}, tokens)).value().to_host_f32();
}

// ---- peft: saving ---------------------------------------------------------------------------------------------------

TEST(LoraPeft, SavesAsPeftDoesAndLoadsBackExactly) {
  LlamaConfig c = small_config();
  c.qk_norm = true;
  c.head_dim_override = 8;
  Llama model(device(), c, test::seed(), Trainable::Norms);
  randomize_trained_gains(model);
  LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 16;
  lc.dropout = 0.05;
  lc.targets = {"v_proj", "q_proj", "down_proj"};
  lc.layers = 1;
  lc.base_model = "org/tiny-llama";
  lc.seed = test::seed();
  LoraAdapters lora(model, lc);
  randomize_b(lora, 0.1);
  const fs::path dir = scratch("peft_out");
  save_peft(lora, dir.string());

  const json j = json::parse(read_file(dir / "adapter_config.json"));
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("r"), 4);
  EXPECT_TRUE(j.at("lora_alpha").is_number_integer());
  EXPECT_EQ(j.at("lora_alpha"), 16);
  EXPECT_DOUBLE_EQ(j.at("lora_dropout").get<double>(), 0.05);
  EXPECT_EQ(j.at("target_modules"), json({"down_proj", "q_proj", "v_proj"}));
  EXPECT_EQ(j.at("layers_to_transform"), json({1}));
  EXPECT_EQ(j.at("layers_pattern"), "layers");
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("fan_in_fan_out"), false);
  EXPECT_EQ(j.at("use_rslora"), false);
  EXPECT_EQ(j.at("use_dora"), false);
  EXPECT_EQ(j.at("init_lora_weights"), true);
  EXPECT_EQ(j.at("inference_mode"), true);
  EXPECT_EQ(j.at("base_model_name_or_path"), "org/tiny-llama");
  EXPECT_EQ(j.at("rank_pattern"), json::object());
  EXPECT_EQ(j.at("modules_to_save"), json({"input_layernorm", "k_norm", "norm", "post_attention_layernorm", "q_norm"}));

  const st::Contents w = st::load((dir / "adapter_model.safetensors").string());
  std::set<std::string> names;
  for (const auto& [name, a] : w.tensors) {
    names.insert(name);
    EXPECT_EQ(a.dtype, "F32") << name;
  }
  const std::string pre = "base_model.model.model.layers.1.";
  for (const char* m : {"self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"})
    for (const char* ab : {".lora_A.weight", ".lora_B.weight"}) EXPECT_TRUE(names.count(pre + m + ab)) << m << ab;
  EXPECT_EQ(w.tensors.at(pre + "self_attn.q_proj.lora_A.weight").shape, (Shape{4, c.dim}));
  EXPECT_EQ(w.tensors.at(pre + "self_attn.v_proj.lora_B.weight").shape, (Shape{c.kv_dim(), 4}));
  EXPECT_EQ(w.tensors.at(pre + "mlp.down_proj.lora_A.weight").shape, (Shape{4, c.hidden_dim()}));
  EXPECT_TRUE(names.count("base_model.model.model.norm.weight"));
  EXPECT_TRUE(names.count("base_model.model.model.layers.0.self_attn.q_norm.weight"));
  EXPECT_EQ(names.size(), 6u + 1u + 4u * c.n_layers);  // adapters, final norm, four gains a layer
  EXPECT_EQ(w.metadata.at("format"), "pt");

  // Loaded into the same base with nothing trainable: the gains go into the model (as peft's modules_to_save
  // replace the modules), the adapters into a new arena; the two compute the same logits.
  Llama base(device(), c, test::seed(), Trainable::None);
  std::unique_ptr<LoraAdapters> back = load_peft(base, dir.string());
  EXPECT_EQ(back->values().to_host_f32(), lora.values().to_host_f32());
  EXPECT_EQ(back->config().rank, 4);
  EXPECT_EQ(back->config().layer_indices, (std::vector<int64_t>{1}));
  EXPECT_EQ(back->config().base_model, "org/tiny-llama");
  model.set_linear_hook(&lora);
  base.set_linear_hook(back.get());
  std::mt19937_64 g(test::seed());
  const auto tokens = random_tokens(c, 2 * 7, g);
  EXPECT_EQ(logits(base, tokens, 2, 7), logits(model, tokens, 2, 7));
  base.set_linear_hook(nullptr);
  model.set_linear_hook(nullptr);

  // Only adapters and gains fit a LoRA file.
  Llama full(device(), small_config(), 1, Trainable::All);
  LoraAdapters on_full(full, LoraConfig{});
  EXPECT_THROW(save_peft(on_full, scratch("never").string()), ArgumentError);
}

// ---- peft: loading what peft wrote ----------------------------------------------------------------------------------

// bf16 bytes of floats whose low 16 bits are zero (exactly representable), and those floats.
st::Array bf16_array(const Shape& shape, std::vector<float>& values, double std) {
  std::normal_distribution<float> n(0.0f, static_cast<float>(std));
  st::Array a;
  a.dtype = "BF16";
  a.shape = shape;
  values.resize(static_cast<size_t>(numel(shape)));
  for (auto& v : values) {
    uint32_t bits;
    const float x = n(test::rng());
    std::memcpy(&bits, &x, 4);
    bits &= 0xffff0000u;
    std::memcpy(&v, &bits, 4);
    a.bytes.push_back(static_cast<uint8_t>(bits >> 16));
    a.bytes.push_back(static_cast<uint8_t>(bits >> 24));
  }
  return a;
}

st::Array f64_array(const Shape& shape, std::vector<float>& values, double std) {
  std::normal_distribution<float> n(0.0f, static_cast<float>(std));
  st::Array a;
  a.dtype = "F64";
  a.shape = shape;
  values.resize(static_cast<size_t>(numel(shape)));
  for (auto& v : values) {
    v = n(test::rng());
    const double d = v;
    const auto* p = reinterpret_cast<const uint8_t*>(&d);
    a.bytes.insert(a.bytes.end(), p, p + 8);
  }
  return a;
}

// An adapter as a peft of the future might write it: a regex target, rsLoRA, rank and alpha patterns, bf16 and f64
// tensors, and fields wgtrain does not know whose values change nothing.
struct Foreign {
  json config;
  st::Contents weights;
  std::map<std::string, std::vector<float>> values;
};

Foreign foreign_adapter(const LlamaConfig& c) {
  Foreign f;
  f.config = json::parse(R"json({
    "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 6, "lora_dropout": 0.1,
    "target_modules": "model\\.layers\\.\\d+\\.(self_attn\\.(q|k)_proj|mlp\\.up_proj)",
    "use_rslora": true, "rank_pattern": {"up_proj": 3}, "alpha_pattern": {"layers.1.self_attn.k_proj": 10},
    "bias": "none", "fan_in_fan_out": false, "use_dora": false, "init_lora_weights": "gaussian",
    "inference_mode": true, "base_model_name_or_path": "somewhere/base", "revision": null,
    "peft_version": "0.99.0", "eva_config": null, "exclude_modules": null, "lora_bias": false,
    "target_parameters": null, "layers_to_transform": null, "layers_pattern": null, "modules_to_save": null,
    "megatron_core": "megatron.core", "megatron_config": null, "layer_replication": null, "loftq_config": {},
    "runtime_config": {"ephemeral_gpu_offload": false}, "trainable_token_indices": null, "use_qalora": false,
    "qalora_group_size": 16, "alora_invocation_tokens": null, "a_field_from_the_future": null
  })json");
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "mlp.up_proj"}) {
      const std::string name = "base_model.model.model.layers." + std::to_string(l) + "." + m;
      const bool up = std::string(m) == "mlp.up_proj";
      const int64_t r = up ? 3 : 2, out = up ? c.hidden_dim() : std::string(m) == "self_attn.q_proj" ? c.q_dim()
                                                                                                      : c.kv_dim();
      f.weights.tensors[name + ".lora_A.weight"] = bf16_array({r, c.dim}, f.values[name + ".lora_A.weight"], 0.2);
      f.weights.tensors[name + ".lora_B.weight"] = f64_array({out, r}, f.values[name + ".lora_B.weight"], 0.05);
    }
  f.weights.metadata["format"] = "pt";
  return f;
}

void write_adapter(const fs::path& dir, const json& config, const st::Contents& weights) {
  fs::create_directories(dir);
  write_file(dir / "adapter_config.json", config.dump(2));
  st::save((dir / "adapter_model.safetensors").string(), weights);
}

TEST(LoraPeft, LoadsWhatPeftWritesWithItsMatchingAndScaling) {
  const LlamaConfig c = small_config();
  Llama model(device(), c, test::seed(), Trainable::None);
  const Foreign f = foreign_adapter(c);
  const fs::path dir = scratch("foreign");
  write_adapter(dir, f.config, f.weights);
  const std::unique_ptr<LoraAdapters> lora = load_peft(model, dir.string());
  ASSERT_EQ(lora->adapters().size(), 6u);
  for (size_t i = 0; i < lora->adapters().size(); ++i) {
    const auto& a = lora->adapters()[i];
    SCOPED_TRACE(a.module);
    const bool up = a.module.find("up_proj") != std::string::npos;
    EXPECT_EQ(a.rank, up ? 3 : 2);
    const double alpha = a.module == "model.layers.1.self_attn.k_proj" ? 10 : 6;
    EXPECT_DOUBLE_EQ(a.scale, alpha / std::sqrt(static_cast<double>(a.rank)));  // use_rslora
    EXPECT_EQ(lora->a(i).to_host_f32(), f.values.at(lora->name_a(i)));
    EXPECT_EQ(lora->b(i).to_host_f32(), f.values.at(lora->name_b(i)));
  }
  EXPECT_DOUBLE_EQ(lora->config().dropout, 0.1);
  EXPECT_EQ(lora->config().base_model, "somewhere/base");
  // The model computes what the float64 reference computes with these adapters.
  model.set_linear_hook(lora.get());
  ref::LlamaRef ref(model);
  ref.set_lora(*lora);
  std::mt19937_64 g(test::seed() + 1);
  const auto tokens = random_tokens(c, 2 * 8, g), targets = random_tokens(c, 2 * 8, g);
  const double want = ref.loss(tokens, 2, 8, targets, false);
  const double got = model.loss(Tensor::from_host(device(), {2, 8}, tokens), Tensor::from_host(device(), {16}, targets))
                         .value()
                         .to_host_f32()[0];
  EXPECT_NEAR(got, want, 1e-5 * std::fabs(want)) << "WGTRAIN_TEST_SEED=" << test::seed();
  model.set_linear_hook(nullptr);

  // A list target with layers_to_transform as one int, and modules_to_save naming the final norm.
  Foreign g2 = foreign_adapter(c);
  g2.config["target_modules"] = {"q_proj"};
  g2.config["layers_to_transform"] = 1;
  g2.config["rank_pattern"] = json::object();
  g2.config["modules_to_save"] = {"norm"};
  st::Contents w;
  for (const char* ab : {".lora_A.weight", ".lora_B.weight"}) {
    const std::string n = std::string("base_model.model.model.layers.1.self_attn.q_proj") + ab;
    w.tensors[n] = g2.weights.tensors.at(n);
  }
  std::vector<float> gain;
  w.tensors["base_model.model.model.norm.weight"] = f64_array({c.dim}, gain, 1.0);
  const fs::path dir2 = scratch("foreign_list");
  write_adapter(dir2, g2.config, w);
  const auto one = load_peft(model, dir2.string());
  ASSERT_EQ(one->adapters().size(), 1u);
  EXPECT_EQ(one->adapters()[0].module, "model.layers.1.self_attn.q_proj");
  EXPECT_EQ(model.value(model.index_of("model.norm.weight")).to_host_f32(), gain);
}

TEST(LoraPeft, RefusesWhatWgtrainDoesNotComputeNamingTheField) {
  const LlamaConfig c = small_config();
  Llama model(device(), c, 1, Trainable::None);
  const Foreign f = foreign_adapter(c);
  int n = 0;
  auto expect_error = [&](const json& config, const st::Contents& weights, const std::string& needle) {
    const fs::path dir = scratch("refused_" + std::to_string(n++));
    write_adapter(dir, config, weights);
    try {
      load_peft(model, dir.string());
      ADD_FAILURE() << "loaded despite " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    }
  };
  const std::vector<std::pair<std::string, json>> fields = {
      {"use_dora", true},
      {"bias", "all"},
      {"fan_in_fan_out", true},
      {"modules_to_save", {"lm_head"}},
      {"layer_replication", {{0, 1}}},
      {"init_lora_weights", "pissa"},
      {"peft_type", "IA3"},
      {"task_type", "SEQ_CLS"},
      {"a_field_from_the_future", 3},
      {"megatron_config", {{"tensor_parallel", 2}}},
      {"trainable_token_indices", {1, 2}},
      {"use_qalora", true},
      {"lora_bias", true},
      {"exclude_modules", {"q_proj"}},
      {"layers_pattern", "h"},
      {"target_modules", "lm_head|.*q_proj"},
      {"r", 0},
  };
  for (const auto& [key, value] : fields) {
    SCOPED_TRACE(key);
    json config = f.config;
    config[key] = value;
    expect_error(config, f.weights, key == "r" ? "rank" : key == "target_modules" ? "lm_head" : key);
  }
  json list = f.config;
  list["target_modules"] = {"q_proj", "embed_tokens"};
  expect_error(list, f.weights, "embed_tokens");
  // The tensors: one missing, one unaccounted for, a wrong shape, an integer dtype.
  const std::string a0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  st::Contents missing = f.weights;
  missing.tensors.erase("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight");
  expect_error(f.config, missing, "up_proj.lora_B.weight");
  st::Contents extra = f.weights;
  extra.tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"] = f.weights.tensors.at(a0);
  expect_error(f.config, extra, "lora_magnitude_vector");
  st::Contents shape = f.weights;
  shape.tensors[a0].shape = {c.dim, 2};
  expect_error(f.config, shape, a0);
  st::Contents ints = f.weights;
  ints.tensors[a0].dtype = "I16";
  expect_error(f.config, ints, "I16");
  // Not an adapter directory, and a pickled one.
  const fs::path empty = scratch("empty");
  fs::create_directories(empty);
  EXPECT_THROW(load_peft(model, empty.string()), Error);
  write_file(empty / "adapter_config.json", f.config.dump());
  write_file(empty / "adapter_model.bin", "pickle");
  try {
    load_peft(model, empty.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("safetensors"), std::string::npos) << e.what();
  }
}

// ---- fuse -----------------------------------------------------------------------------------------------------------

TEST(LoraFuse, TheFusedModelComputesTheAdaptedLogits) {
  struct Case {
    const char* name;
    bool quantize, untied;
  };
  for (const Case cs : {Case{"q4 base", true, false}, Case{"q4 base, untied q4 head", true, true},
                        Case{"float base", false, false}}) {
    SCOPED_TRACE(cs.name);
    LlamaConfig c = small_config();
    c.quantize_blocks = cs.quantize;
    c.tie_embeddings = !cs.untied;
    c.quantize_head = cs.untied;
    Llama model(device(), c, test::seed(), Trainable::None);
    LoraConfig lc;
    lc.target_regex = "all-linear";
    lc.rank = 4;
    lc.seed = test::seed();
    LoraAdapters lora(model, lc);
    randomize_b(lora, 0.1);
    std::mt19937_64 g(test::seed());
    const auto tokens = random_tokens(c, 3 * 9, g);
    const std::vector<float> base = logits(model, tokens, 3, 9);
    model.set_linear_hook(&lora);
    const std::vector<float> adapted = logits(model, tokens, 3, 9);
    const std::unique_ptr<Llama> fused = fuse(model, lora);
    model.set_linear_hook(nullptr);
    for (const auto& p : fused->params()) {
      EXPECT_EQ(p.q4, -1) << p.name;
      EXPECT_FALSE(p.trainable) << p.name;
    }
    const std::vector<float> merged = logits(*fused, tokens, 3, 9);
    double err = 0, moved = 0, scale = 0;
    for (size_t i = 0; i < adapted.size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(merged[i] - adapted[i])));
      moved = std::max(moved, static_cast<double>(std::fabs(adapted[i] - base[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(adapted[i])));
    }
    EXPECT_LT(err, 1e-4 * scale) << "WGTRAIN_TEST_SEED=" << test::seed();
    EXPECT_GT(moved, 100 * 1e-4 * scale) << "the adapters must matter for the test to mean anything";
    const size_t emb = model.index_of("model.embed_tokens.weight");
    EXPECT_EQ(merged_weight(model, lora, emb), model.host_value(emb));
  }
}

// ---- resuming -------------------------------------------------------------------------------------------------------

struct LoraRun {
  std::unique_ptr<Llama> model;
  std::unique_ptr<LoraAdapters> lora;
  Tensor lm, lv, mm, mv;
  std::unique_ptr<ops::AdamW> adamw;
  Tensor tokens, targets, loss;
  Recording step;
  ops::AdamWOptions options;

  LoraRun(const LlamaConfig& c, const LoraConfig& lc) {
    model = std::make_unique<Llama>(device(), c, 77, Trainable::Norms);
    lora = std::make_unique<LoraAdapters>(*model, lc);
    model->set_linear_hook(lora.get());
    lm = ops::full(device(), {lora->arena_size()}, 0.0);
    lv = ops::full(device(), {lora->arena_size()}, 0.0);
    mm = ops::full(device(), {model->arena_size()}, 0.0);
    mv = ops::full(device(), {model->arena_size()}, 0.0);
    auto ps = lora->adamw_params(lm, lv);
    const auto mp = model->adamw_params(mm, mv);
    ps.insert(ps.end(), mp.begin(), mp.end());
    options.weight_decay = 0.05;
    adamw = std::make_unique<ops::AdamW>(ps, options);
    tokens = Tensor::empty(device(), {2, 8}, DType::I32);
    targets = Tensor::empty(device(), {16}, DType::I32);
    step = device().record([&] { loss = lora->train_step(*model, tokens, targets, *adamw); });
  }
  // Step s of the run: its batch is a function of s alone.
  float train(int64_t s) {
    std::mt19937_64 g(1000 + static_cast<uint64_t>(s));
    tokens.write(random_tokens(model->config(), 16, g));
    targets.write(random_tokens(model->config(), 16, g));
    adamw->set_step(s, 1e-2);
    lora->set_step(static_cast<uint64_t>(s));
    step.replay();
    return loss.to_host_f32()[0];
  }
  std::vector<std::vector<float>> state() const {
    return {lora->values().to_host_f32(), lm.to_host_f32(), lv.to_host_f32(), model->values().to_host_f32(),
            mm.to_host_f32(), mv.to_host_f32()};
  }
};

TEST(LoraCheckpoint, ResumingContinuesBitForBit) {
  const LlamaConfig c = small_config();
  LoraConfig lc;
  lc.target_regex = "all-linear";
  lc.rank = 2;
  lc.dropout = 0.2;
  lc.seed = 5;
  const std::string path = scratch("lora_ckpt.safetensors").string();
  std::vector<float> straight, resumed;
  std::vector<std::vector<float>> end_straight;
  {
    LoraRun run(c, lc);
    for (int64_t s = 1; s <= 6; ++s) {
      straight.push_back(run.train(s));
      if (s == 3)
        save_lora_checkpoint(path, *run.model, *run.lora, run.lm, run.lv, &run.mm, &run.mv, "{\"step\": 3}");
    }
    end_straight = run.state();
  }
  const LoraConfig saved = read_lora_checkpoint_config(path);
  EXPECT_EQ(saved.to_json(), lc.to_json());
  LoraRun run(c, saved);
  EXPECT_EQ(load_lora_checkpoint(path, *run.model, *run.lora, run.lm, run.lv, &run.mm, &run.mv), "{\"step\": 3}");
  for (int64_t s = 4; s <= 6; ++s) resumed.push_back(run.train(s));
  EXPECT_EQ(resumed, std::vector<float>(straight.begin() + 3, straight.end()));
  EXPECT_TRUE(run.state() == end_straight) << "parameters or moments differ after resuming";

  // Wrong adapters, a wrong model, a damaged file: errors, and nothing written.
  const std::vector<float> untouched = run.lora->values().to_host_f32();
  {
    LoraConfig other_seed = lc;
    other_seed.seed = 6;
    LoraRun different(c, other_seed);
    EXPECT_THROW(load_lora_checkpoint(path, *different.model, *different.lora, different.lm, different.lv,
                                      &different.mm, &different.mv),
                 Error);
  }
  Llama frozen(device(), c, 77, Trainable::None);
  LoraAdapters on_frozen(frozen, lc);
  const Tensor zm = ops::full(device(), {on_frozen.arena_size()}, 0.0), zv = ops::full(device(), {on_frozen.arena_size()}, 0.0);
  EXPECT_THROW(load_lora_checkpoint(path, frozen, on_frozen, zm, zv, nullptr, nullptr), Error);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 5] ^= 0x40;
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    load_lora_checkpoint(path, *run.model, *run.lora, run.lm, run.lv, &run.mm, &run.mv);
    ADD_FAILURE() << "a damaged checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run.lora->values().to_host_f32(), untouched);
  EXPECT_THROW(save_lora_checkpoint(path, *run.model, *run.lora, run.lm, run.lv, nullptr, nullptr, ""),
               ArgumentError);  // the norm gains' moments are needed
  Llama whole(device(), c, 77, Trainable::All);
  LoraAdapters on_whole(whole, lc);
  const Tensor wm = ops::full(device(), {whole.arena_size()}, 0.0), wv = ops::full(device(), {whole.arena_size()}, 0.0);
  EXPECT_THROW(save_lora_checkpoint(path, whole, on_whole, zm, zv, &wm, &wv, ""), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
