// LoRA adapters on frozen (q4) Llama weights, against the float64 reference (src/model/llama_ref.cpp, extended with
// adapters and their hand-derived backward) and finite differences of it.
// Tolerances (float32 rounding of short sums, about 10x what it gives here, as in llama_test.cpp): one LoRA linear's
// output and gradients 1e-5 of their norms; the reference's gradients against central differences 1e-8 (the loss
// is bilinear in each of x, A, B: the differences are exact but for float64 rounding); a whole model's loss 1e-5
// relative and each adapter's or gain's gradient 3e-5 of its norm; the losses of 5 training steps 5e-5 relative and
// the parameters after them 2e-3 of their norm (Adam turns near-zero gradients of differing sign into +-lr steps).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/llama_ref.h"
#include "ops/dropout/dropout_ref.h"
#include "support/test_support.h"
#include "wgtrain/device.h"
#include "wgtrain/dropout.h"
#include "wgtrain/error.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain {
namespace {

namespace ag = autograd;
using test::device;
using test::random_host;
using test::upload;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = 37;
  c.dim = 24;
  c.n_layers = 2;
  c.n_heads = 4;  // head dim 6
  c.n_kv_heads = 2;
  c.ffn_dim = 40;
  c.max_seq_len = 9;
  c.group_size = 8;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch random_batch(const LlamaConfig& c, int64_t B, int64_t T, std::mt19937_64& g) {
  Batch b;
  std::uniform_int_distribution<int> tok(0, static_cast<int>(c.vocab_size) - 1);
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(tok(g));
    b.targets.push_back(i % 5 == 3 ? -1 : tok(g));  // some ignored positions
  }
  return b;
}

template <class A, class B>
double rel_err(const A& got, const B& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-12);
}

// B starts at zero; random B makes every gradient (A's, the input's) non-trivial.
void randomize_b(LoraAdapters& lora, double std) {
  std::vector<float> v = lora.values().to_host_f32();
  std::normal_distribution<double> n(0.0, std);
  for (const auto& a : lora.adapters())
    for (int64_t e = 0; e < a.out * a.rank; ++e) v[a.b_offset + e] = static_cast<float>(n(test::rng()));
  lora.values().write(v);
}

// Gains start at one: random ones, so that a mis-wired gain shows.
void randomize_gains(Llama& model) {
  std::normal_distribution<float> noise(0.0f, 0.3f);
  model.load_weights([&](const Llama::Param& p) {
    std::vector<float> v = model.host_value(&p - model.params().data());
    if (p.kind == Llama::Kind::Norm)
      for (auto& e : v) e += noise(test::rng());
    return v;
  });
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Variant {
  const char* name;
  LlamaConfig config;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  out.push_back({"tied head", small_config()});
  LlamaConfig untied = small_config();
  untied.tie_embeddings = false;
  untied.quantize_head = true;
  out.push_back({"untied q4 head", untied});
  LlamaConfig qwen2 = small_config();
  qwen2.qkv_bias = true;
  qwen2.architecture = "Qwen2ForCausalLM";
  out.push_back({"qkv biases", qwen2});
  LlamaConfig qwen3 = small_config();
  qwen3.qk_norm = true;
  qwen3.head_dim_override = 8;
  qwen3.architecture = "Qwen3ForCausalLM";
  out.push_back({"qk norms, head_dim 8", qwen3});
  return out;
}

// ---- configuration and selection ------------------------------------------------------------------------------------

TEST(LoraConfig, ValidatesAndRoundTripsThroughJson) {
  LoraConfig c;
  EXPECT_EQ(c.rank, 8);
  EXPECT_EQ(c.alpha, 16);
  EXPECT_EQ(c.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  c.rank = 5;
  c.alpha = 2.5;
  c.dropout = 0.1;
  c.targets = {"q_proj", "mlp.down_proj"};
  c.layer_indices = {0, 3};
  c.rslora = true;
  c.rank_pattern = {{"q_proj", 2}, {"down_proj", 7}};
  c.alpha_pattern = {{"layers\\.0\\..*", 3.5}};
  c.seed = 0xfedcba9876543210ull;
  c.base_model = "org/model";
  EXPECT_EQ(LoraConfig::from_json(c.to_json()).to_json(), c.to_json());
  EXPECT_EQ(LoraConfig::from_json(c.to_json()).seed, c.seed);

  auto bad = [](auto edit, const char* needle) {
    LoraConfig b;
    edit(b);
    try {
      b.validate();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad([](LoraConfig& b) { b.rank = 0; }, "rank");
  bad([](LoraConfig& b) { b.alpha = 0; }, "alpha");
  bad([](LoraConfig& b) { b.dropout = 1.0; }, "dropout");
  bad([](LoraConfig& b) { b.targets = {"qproj"}; }, "qproj");
  bad([](LoraConfig& b) { b.targets = {"lm_head"}; }, "lm_head");
  bad([](LoraConfig& b) { b.targets = {}; }, "no target");
  bad([](LoraConfig& b) { b.layers = 0; }, "layers");
  bad([](LoraConfig& b) { b.layers = 2, b.layer_indices = {1}; }, "not both");
  bad([](LoraConfig& b) { b.target_regex = "(q_proj"; }, "regular expression");
  bad([](LoraConfig& b) { b.target_regex = ".*q_proj", b.layers = 1; }, "regex");
  bad([](LoraConfig& b) { b.rank_pattern = {{"q_proj", 0}}; }, "rank_pattern");
  EXPECT_THROW(LoraConfig::from_json("{\"rank\": 4, \"colour\": 1}"), ArgumentError);
  EXPECT_THROW(LoraConfig::from_json("{\"rank\": \"four\"}"), ArgumentError);
}

std::vector<std::string> modules(const LoraAdapters& lora) {
  std::vector<std::string> out;
  for (const auto& a : lora.adapters()) out.push_back(a.module);
  return out;
}

TEST(LoraAdapters, SelectLinearsAsPeftAndMlxDo) {
  LlamaConfig c = small_config();
  c.n_layers = 3;
  const Llama model(device(), c, 1, Trainable::None);
  LoraConfig lc;
  EXPECT_EQ(modules(LoraAdapters(model, lc)),
            (std::vector<std::string>{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                      "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj",
                                      "model.layers.2.self_attn.q_proj", "model.layers.2.self_attn.v_proj"}));
  lc.targets = {"down_proj", "o_proj"};
  lc.layers = 1;  // the last layer
  EXPECT_EQ(modules(LoraAdapters(model, lc)),
            (std::vector<std::string>{"model.layers.2.self_attn.o_proj", "model.layers.2.mlp.down_proj"}));
  lc.layers = -1;
  lc.layer_indices = {2, 0};
  lc.targets = {"mlp.up_proj"};
  EXPECT_EQ(modules(LoraAdapters(model, lc)),
            (std::vector<std::string>{"model.layers.0.mlp.up_proj", "model.layers.2.mlp.up_proj"}));
  lc.layer_indices.clear();
  lc.target_regex = "model\\.layers\\.1\\.mlp\\..*";
  EXPECT_EQ(modules(LoraAdapters(model, lc)),
            (std::vector<std::string>{"model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj",
                                      "model.layers.1.mlp.down_proj"}));
  lc.target_regex = "all-linear";
  lc.layers = 2;
  EXPECT_EQ(LoraAdapters(model, lc).adapters().size(), 14u);
  lc.layers = -1;
  lc.target_regex.clear();

  // Shapes, ranks and scales, with PEFT's patterns and rsLoRA.
  lc.targets = {"k_proj", "gate_proj"};
  lc.rank = 4;
  lc.alpha = 8;
  lc.rank_pattern = {{"gate_proj", 2}};
  lc.alpha_pattern = {{"layers.1.self_attn.k_proj", 3}};
  LoraAdapters lora(model, lc);
  ASSERT_EQ(lora.adapters().size(), 6u);
  for (const auto& a : lora.adapters()) {
    const bool gate = a.module.find("gate_proj") != std::string::npos;
    EXPECT_EQ(a.rank, gate ? 2 : 4) << a.module;
    EXPECT_EQ(a.in, c.dim);
    EXPECT_EQ(a.out, gate ? c.hidden_dim() : c.kv_dim());
    const double alpha = a.module == "model.layers.1.self_attn.k_proj" ? 3 : 8;
    EXPECT_DOUBLE_EQ(a.scale, alpha / static_cast<double>(a.rank)) << a.module;
    EXPECT_EQ(a.a_offset % 4, 0);
    EXPECT_EQ(a.b_offset % 4, 0);
  }
  EXPECT_EQ(lora.name_a(0), "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  EXPECT_EQ(lora.name_b(1), "base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight");
  lc.rslora = true;
  const LoraAdapters rs(model, lc);
  for (const auto& a : rs.adapters())
    EXPECT_DOUBLE_EQ(a.scale, (a.module == "model.layers.1.self_attn.k_proj" ? 3.0 : 8.0) /
                                  std::sqrt(static_cast<double>(a.rank)));

  LoraConfig e;
  e.targets = {"self_attn.up_proj"};  // up_proj lives in mlp
  EXPECT_THROW(LoraAdapters(model, e), ArgumentError);
  e.targets = {"q_proj"};
  e.layers = 4;
  EXPECT_THROW(LoraAdapters(model, e), ArgumentError);
  e.layers = -1;
  e.layer_indices = {3};
  EXPECT_THROW(LoraAdapters(model, e), ArgumentError);
  e.layer_indices.clear();
  e.target_regex = ".*q_proj|lm_head";
  EXPECT_THROW(LoraAdapters(model, e), ArgumentError);
  e.target_regex = "nothing";
  EXPECT_THROW(LoraAdapters(model, e), ArgumentError);
}

TEST(LoraAdapters, StartAsPeftDoesAndLeaveTheModelUnchanged) {
  const LlamaConfig c = small_config();
  Llama model(device(), c, test::seed(), Trainable::None);
  LoraConfig lc;
  lc.target_regex = "all-linear";
  lc.seed = test::seed();
  LoraAdapters lora(model, lc);
  const std::vector<float> v = lora.values().to_host_f32();
  double sum = 0, sq = 0;
  int64_t n = 0;
  for (size_t i = 0; i < lora.adapters().size(); ++i) {
    const auto& a = lora.adapters()[i];
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.in));
    for (int64_t e = 0; e < a.rank * a.in; ++e) {
      const double x = v[a.a_offset + e] / bound;
      ASSERT_LE(std::fabs(x), 1.0) << a.module;
      sum += x, sq += x * x, ++n;
    }
    for (int64_t e = 0; e < a.out * a.rank; ++e) ASSERT_EQ(v[a.b_offset + e], 0.0f) << a.module;
  }
  // Uniform(-1, 1) in units of the bound: mean 0, variance 1/3 (n is in the thousands: 5 sigma).
  EXPECT_NEAR(sum / n, 0.0, 5 * std::sqrt(1.0 / 3 / n));
  EXPECT_NEAR(sq / n, 1.0 / 3, 5 * std::sqrt(4.0 / 45 / n));
  EXPECT_EQ(LoraAdapters(model, lc).values().to_host_f32(), v) << "the same seed draws the same A";
  lc.seed += 1;
  EXPECT_NE(LoraAdapters(model, lc).values().to_host_f32(), v);

  // B = 0: the adapted model computes exactly what the base does.
  std::mt19937_64 g(test::seed());
  const Batch b = random_batch(c, 2, 7, g);
  const Tensor tokens = Tensor::from_host(device(), {2, 7}, b.tokens);
  const std::vector<float> base = model.logits(tokens).value().to_host_f32();
  model.set_linear_hook(&lora);
  EXPECT_EQ(model.logits(tokens).value().to_host_f32(), base);
  model.set_linear_hook(nullptr);
}

// ---- exactness --------------------------------------------------------------------------------------------------

TEST(LoraLinear, GradientsMatchTheReferenceAndFiniteDifferences) {
  struct Case {
    const char* target;
    int64_t rank;
    double dropout;
    bool rslora;
  };
  for (const Case cs : {Case{"q_proj", 1, 0.0, false}, Case{"down_proj", 3, 0.0, true}, Case{"k_proj", 5, 0.3, false},
                        Case{"gate_proj", 8, 0.5, false}}) {
    SCOPED_TRACE(std::string(cs.target) + " rank " + std::to_string(cs.rank) + " dropout " +
                 std::to_string(cs.dropout));
    const LlamaConfig c = small_config();
    const Llama model(device(), c, test::seed(), Trainable::None);
    LoraConfig lc;
    lc.rank = cs.rank;
    lc.alpha = 7;
    lc.dropout = cs.dropout;
    lc.rslora = cs.rslora;
    lc.targets = {cs.target};
    lc.seed = test::seed() + 1;
    LoraAdapters lora(model, lc);
    randomize_b(lora, 0.5);
    const size_t k = 1;  // layer 1's
    const LoraAdapters::Adapter& ad = lora.adapters()[k];
    EXPECT_DOUBLE_EQ(ad.scale, cs.rslora ? 7 / std::sqrt(static_cast<double>(cs.rank)) : 7.0 / cs.rank);
    const int64_t B = 3, T = 5, n = B * T;
    const auto x = random_host({B, T, ad.in}), dy = random_host({B, T, ad.out});
    const uint64_t counter = 17;
    lora.set_step(counter);
    lora.set_training(true);
    lora.zero_grads();
    const ag::Var xv = ag::Var::leaf(upload(x));
    const Q4Weight& w = model.q4_weights()[model.params()[ad.param].q4];
    const ag::Var y = lora.apply(model, ad.param, xv, ag::linear_q4gsw(xv, w));
    ag::backward(ag::sum(ag::mul(y, ag::Var::constant(upload(dy))), {}));
    lora.set_training(false);

    const std::vector<double> wd = to_double(model.host_value(ad.param));
    const std::vector<double> a = to_double(lora.a(k).to_host_f32()), b = to_double(lora.b(k).to_host_f32());
    const std::vector<double> mask =
        cs.dropout > 0 ? ref::dropout_mask(ops::dropout_key(lc.seed, counter), static_cast<uint32_t>(k), n * ad.in,
                                           cs.dropout)
                       : std::vector<double>{};
    auto run_ref = [&](const std::vector<double>& xr, const std::vector<double>& ar, const std::vector<double>& br) {
      return ref::lora_linear(xr, wd, ar, br, mask, n, ad.in, ad.out, ad.rank, ad.scale, dy.data);
    };
    const ref::LoraLinear want = run_ref(x.data, a, b);
    const auto seed_note = "WGTRAIN_TEST_SEED=" + std::to_string(test::seed());
    EXPECT_LT(rel_err(y.value().to_host_f32(), want.y), 1e-5) << seed_note;
    EXPECT_LT(rel_err(xv.grad().to_host_f32(), want.dx), 1e-5) << seed_note;
    EXPECT_LT(rel_err(lora.grad_a(k).to_host_f32(), want.da), 1e-5) << seed_note;
    EXPECT_LT(rel_err(lora.grad_b(k).to_host_f32(), want.db), 1e-5) << seed_note;
    for (const float g : lora.grad_a(0).to_host_f32()) ASSERT_EQ(g, 0.0f) << "another adapter got a gradient";

    // The reference's hand-derived gradients against central differences of its loss sum(dy * y).
    auto loss = [&](const std::vector<double>& xr, const std::vector<double>& ar, const std::vector<double>& br) {
      const std::vector<double> yr = run_ref(xr, ar, br).y;
      double s = 0;
      for (size_t i = 0; i < yr.size(); ++i) s += yr[i] * dy.data[i];
      return s;
    };
    const double h = 1e-3;
    std::uniform_int_distribution<size_t> pick(0, 1u << 30);
    for (int which = 0; which < 3; ++which) {
      const std::vector<double>& grad = which == 0 ? want.dx : which == 1 ? want.da : want.db;
      for (int t = 0; t < 12; ++t) {
        std::vector<double> xs = x.data, as = a, bs = b;
        std::vector<double>& v = which == 0 ? xs : which == 1 ? as : bs;
        const size_t i = pick(test::rng()) % v.size();
        const double v0 = v[i];
        v[i] = v0 + h;
        const double up = loss(xs, as, bs);
        v[i] = v0 - h;
        const double down = loss(xs, as, bs);
        EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-8 * (1 + std::fabs(grad[i])))
            << (which == 0 ? "x" : which == 1 ? "A" : "B") << "[" << i << "]";
      }
    }
  }
}

TEST(Lora, LossAndGradientsMatchTheReference) {
  // Every block linear adapted (rank 3), random B, dropout on as in a training step; the base frozen, or with its
  // norm gains training too.
  for (const Variant& var : variants())
    for (Trainable tr : {Trainable::None, Trainable::Norms}) {
      SCOPED_TRACE(std::string(var.name) + (tr == Trainable::Norms ? ", norms train" : ""));
      const LlamaConfig& c = var.config;
      Llama model(device(), c, test::seed(), tr);
      randomize_gains(model);
      LoraConfig lc;
      lc.rank = 3;
      lc.alpha = 5;
      lc.target_regex = "all-linear";
      lc.dropout = 0.25;
      lc.seed = test::seed() + 2;
      LoraAdapters lora(model, lc);
      randomize_b(lora, 0.05);
      model.set_linear_hook(&lora);
      ref::LlamaRef ref(model);
      ref.set_lora(lora);
      const int64_t B = 2, T = 7;
      std::mt19937_64 g(test::seed() + 3);
      const Batch batch = random_batch(c, B, T, g);
      const uint64_t counter = 9;
      ref.set_lora_dropout(true, counter);
      const double want = ref.loss(batch.tokens, B, T, batch.targets, true);
      lora.set_step(counter);
      lora.set_training(true);
      model.zero_grads();
      lora.zero_grads();
      const ag::Var loss = model.loss(Tensor::from_host(device(), {B, T}, batch.tokens),
                                      Tensor::from_host(device(), {B * T}, batch.targets));
      ag::backward(loss);
      lora.set_training(false);
      const auto note = "WGTRAIN_TEST_SEED=" + std::to_string(test::seed());
      EXPECT_NEAR(loss.value().to_host_f32()[0], want, 1e-5 * std::fabs(want)) << note;
      for (size_t i = 0; i < lora.adapters().size(); ++i) {
        EXPECT_LT(rel_err(lora.grad_a(i).to_host_f32(), ref.lora()[i].ga), 3e-5) << lora.name_a(i) << "; " << note;
        EXPECT_LT(rel_err(lora.grad_b(i).to_host_f32(), ref.lora()[i].gb), 3e-5) << lora.name_b(i) << "; " << note;
      }
      for (size_t i = 0; i < model.params().size(); ++i) {
        if (model.params()[i].trainable) {
          EXPECT_LT(rel_err(model.grad(i).to_host_f32(), ref.grads()[i]), 3e-5) << model.params()[i].name << "; "
                                                                                 << note;
        }
      }
      model.set_linear_hook(nullptr);
    }
}

// The frozen base as bytes: every q4 linear's codes and scales, every float weight.
std::vector<std::vector<uint8_t>> base_bytes(const Llama& model) {
  std::vector<std::vector<uint8_t>> out;
  for (const Q4Weight& w : model.q4_weights()) {
    out.push_back(q4gsw::download_bytes(w));
    const std::vector<float> s = w.scales.to_host_f32();
    out.emplace_back(reinterpret_cast<const uint8_t*>(s.data()), reinterpret_cast<const uint8_t*>(s.data() + s.size()));
  }
  for (size_t i = 0; i < model.params().size(); ++i) {
    const Llama::Param& p = model.params()[i];
    if (p.trainable || p.q4 >= 0) continue;
    const std::vector<float> v = model.value(i).to_host_f32();
    out.emplace_back(reinterpret_cast<const uint8_t*>(v.data()), reinterpret_cast<const uint8_t*>(v.data() + v.size()));
  }
  return out;
}

// Moments and an optimizer over the adapters and the model's trainable parameters (none, or its norm gains).
struct Optim {
  Tensor lm, lv, mm, mv;
  std::unique_ptr<ops::AdamW> adamw;
  Optim(const Llama& model, const LoraAdapters& lora, const ops::AdamWOptions& o) {
    lm = ops::full(device(), {lora.arena_size()}, 0.0);
    lv = ops::full(device(), {lora.arena_size()}, 0.0);
    std::vector<ops::AdamWParam> ps = lora.adamw_params(lm, lv);
    if (model.arena_size() > 0) {
      mm = ops::full(device(), {model.arena_size()}, 0.0);
      mv = ops::full(device(), {model.arena_size()}, 0.0);
      const auto mp = model.adamw_params(mm, mv);
      ps.insert(ps.end(), mp.begin(), mp.end());
    }
    adamw = std::make_unique<ops::AdamW>(ps, o);
  }
  const Tensor* model_m() const { return mm.defined() ? &mm : nullptr; }
  const Tensor* model_v() const { return mv.defined() ? &mv : nullptr; }
};

TEST(Lora, RecordedTrainingStepsMatchTheReferenceAndLeaveTheBaseAlone) {
  for (Trainable tr : {Trainable::None, Trainable::Norms}) {
    SCOPED_TRACE(tr == Trainable::Norms ? "norms train" : "base frozen");
    LlamaConfig c = small_config();
    c.qkv_bias = true;
    Llama model(device(), c, test::seed() + 1, tr);
    LoraConfig lc;
    lc.rank = 4;
    lc.alpha = 8;
    lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj"};
    lc.dropout = 0.1;
    lc.seed = test::seed() + 4;
    LoraAdapters lora(model, lc);
    model.set_linear_hook(&lora);
    ref::LlamaRef ref(model);
    ref.set_lora(lora);
    const auto before = base_bytes(model);

    ops::AdamWOptions o;
    o.weight_decay = 0.1;
    Optim opt(model, lora, o);
    // The model's own optimizer state is its norm gains' (or nothing): the frozen base has no gradient or moments.
    int64_t norm_elems = 0;
    for (size_t i = 0; i < model.params().size(); ++i) {
      const auto& p = model.params()[i];
      EXPECT_EQ(p.trainable, tr == Trainable::Norms && p.kind == Llama::Kind::Norm) << p.name;
      if (p.trainable) norm_elems += numel(p.shape);
      if (!p.trainable) {
        EXPECT_THROW(model.grad(i), ArgumentError) << p.name;
      }
    }
    EXPECT_EQ(model.arena_size() == 0, tr == Trainable::None);
    EXPECT_LT(model.arena_size(), norm_elems + 4 * static_cast<int64_t>(model.params().size()));

    const int64_t B = 3, T = 9;
    const Tensor tokens = Tensor::empty(device(), {B, T}, DType::I32);
    const Tensor targets = Tensor::empty(device(), {B * T}, DType::I32);
    Tensor loss;
    const Recording step = device().record([&] { loss = lora.train_step(model, tokens, targets, *opt.adamw); });
    std::mt19937_64 g(test::seed() + 5);
    for (int64_t s = 1; s <= 5; ++s) {
      const double lr = 4e-3 * s;  // a warm-up
      const Batch batch = random_batch(c, B, T, g);
      ref.set_lora_dropout(true, static_cast<uint64_t>(s));
      const double want = ref.train_step(batch.tokens, B, T, batch.targets, o, lr, s);
      tokens.write(batch.tokens);
      targets.write(batch.targets);
      opt.adamw->set_step(s, lr);
      lora.set_step(static_cast<uint64_t>(s));
      step.replay();
      EXPECT_NEAR(loss.to_host_f32()[0], want, 5e-5 * std::fabs(want))
          << "step " << s << "; WGTRAIN_TEST_SEED=" << test::seed();
    }
    std::vector<float> got;
    std::vector<double> want;
    for (size_t i = 0; i < lora.adapters().size(); ++i) {
      for (float e : lora.a(i).to_host_f32()) got.push_back(e);
      for (float e : lora.b(i).to_host_f32()) got.push_back(e);
      want.insert(want.end(), ref.lora()[i].a.begin(), ref.lora()[i].a.end());
      want.insert(want.end(), ref.lora()[i].b.begin(), ref.lora()[i].b.end());
    }
    EXPECT_LT(rel_err(got, want), 2e-3) << "WGTRAIN_TEST_SEED=" << test::seed();
    for (size_t i = 0; i < model.params().size(); ++i) {
      if (model.params()[i].trainable) {
        EXPECT_LT(rel_err(model.value(i).to_host_f32(), ref.values()[i]), 2e-3) << model.params()[i].name;
      }
    }
    // B moved off zero, and the base did not move at all.
    EXPECT_GT(std::sqrt(std::inner_product(got.begin(), got.end(), got.begin(), 0.0)), 0.0);
    EXPECT_TRUE(base_bytes(model) == before) << "a frozen weight, code or scale changed";
    model.set_linear_hook(nullptr);
  }
}

TEST(Lora, ARecordedStepReplaysTheEagerSteps) {
  // Same kernels, same order, same dropout counters: the losses agree bit for bit.
  const LlamaConfig c = small_config();
  const int64_t B = 2, T = 8;
  std::mt19937_64 g(test::seed() + 6);
  const Batch b0 = random_batch(c, B, T, g), b1 = random_batch(c, B, T, g);
  const std::vector<Batch> batches = {b0, b1, b0, b1, b0, b1};
  auto run = [&](bool recorded) {
    Llama model(device(), c, 99, Trainable::Norms);
    LoraConfig lc;
    lc.target_regex = "all-linear";
    lc.rank = 4;
    lc.dropout = 0.1;
    LoraAdapters lora(model, lc);
    model.set_linear_hook(&lora);
    ops::AdamWOptions o;
    o.lr = 1e-2;
    Optim opt(model, lora, o);
    const Tensor tokens = Tensor::empty(device(), {B, T}, DType::I32);
    const Tensor targets = Tensor::empty(device(), {B * T}, DType::I32);
    std::vector<float> losses;
    Recording rec;
    Tensor loss;
    if (recorded) rec = device().record([&] { loss = lora.train_step(model, tokens, targets, *opt.adamw); });
    for (size_t s = 0; s < batches.size(); ++s) {
      tokens.write(batches[s].tokens);
      targets.write(batches[s].targets);
      opt.adamw->set_step(static_cast<int64_t>(s) + 1, 1e-2);
      lora.set_step(s + 1);
      if (recorded)
        rec.replay();
      else
        loss = lora.train_step(model, tokens, targets, *opt.adamw);
      losses.push_back(loss.to_host_f32()[0]);
    }
    return losses;
  };
  const auto eager = run(false), replayed = run(true);
  EXPECT_EQ(eager, replayed);
  EXPECT_LT(eager[4], eager[0]);
  EXPECT_LT(eager[5], eager[1]);
}

TEST(Lora, DropoutRunsOnlyInTrainingStepsAndFollowsTheCounter) {
  const LlamaConfig c = small_config();
  Llama model(device(), c, 3, Trainable::None);
  LoraConfig lc;
  lc.dropout = 0.5;
  lc.seed = 8;
  LoraAdapters lora(model, lc);
  randomize_b(lora, 0.3);
  model.set_linear_hook(&lora);
  std::mt19937_64 g(test::seed());
  const Batch b = random_batch(c, 2, 6, g);
  const Tensor tokens = Tensor::from_host(device(), {2, 6}, b.tokens);
  const Tensor targets = Tensor::from_host(device(), {12}, b.targets);
  auto loss = [&](bool training, uint64_t counter) {
    lora.set_training(training);
    lora.set_step(counter);
    const float l = model.loss(tokens, targets, false).value().to_host_f32()[0];
    lora.set_training(false);
    return l;
  };
  const float eval = loss(false, 1), eval2 = loss(false, 2);
  EXPECT_EQ(eval, eval2) << "evaluation must not depend on the dropout counter";
  const float t1 = loss(true, 1), t1b = loss(true, 1), t2 = loss(true, 2);
  EXPECT_EQ(t1, t1b);
  EXPECT_NE(t1, t2);
  EXPECT_NE(t1, eval);
  // No dropout op when dropout is 0 or outside training: the same dispatches as evaluation.
  auto dispatches = [&](LoraAdapters& l, bool training) {
    l.set_training(training);
    model.set_linear_hook(&l);
    const Recording r = device().record([&] { model.loss(tokens, targets, false); });
    l.set_training(false);
    return r.dispatches();
  };
  LoraConfig none = lc;
  none.dropout = 0;
  LoraAdapters no_dropout(model, none);
  const size_t base = dispatches(lora, false);
  EXPECT_EQ(dispatches(no_dropout, true), base);
  EXPECT_EQ(dispatches(lora, true), base + 2 * lora.adapters().size());  // a mask and a multiply per adapter
  model.set_linear_hook(nullptr);
}

TEST(Lora, TrainStepNeedsTheAdaptersAsTheModelsHook) {
  Llama model(device(), small_config(), 3, Trainable::None);
  LoraAdapters lora(model, LoraConfig{});
  Optim opt(model, lora, {});
  const std::vector<int32_t> t(4, 1);
  const Tensor tokens = Tensor::from_host(device(), {1, 4}, t), targets = Tensor::from_host(device(), {4}, t);
  EXPECT_THROW(lora.train_step(model, tokens, targets, *opt.adamw), ArgumentError);
  Llama other(device(), small_config(), 3, Trainable::None);
  other.set_linear_hook(&lora);
  EXPECT_THROW(other.logits(tokens), ArgumentError);  // adapters made for another model
  EXPECT_THROW(lora.adamw_params(ops::full(device(), {3}, 0.0), ops::full(device(), {3}, 0.0)), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
