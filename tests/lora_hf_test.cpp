// LoRA against Hugging Face peft and transformers on the tiny real checkpoints of tests/fixtures/hf (made by
// tests/fixtures/hf/make_fixtures.py):
//  - adapters that peft made (tests/fixtures/lora/*/, by make_peft_adapter.py) give peft's logits once loaded;
//  - a QLoRA model fused and exported as a Hugging Face directory loads back with the adapted model's logits;
//  - with WGTRAIN_LORA_PEFT_OUT set, adapters wgtrain saves and its logits are written there for check_peft.py.
// These need wgtrain/hf.h (the importer) and skip where the fixtures are absent. Tolerance: 1e-4 of the largest
// |logit| (float32 against float32 with other summation orders; the adapters move the logits by far more).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/llama.h"
#include "wgtrain/lora.h"
#include "wgtrain/safetensors.h"

#if __has_include("wgtrain/hf.h")
#include "wgtrain/hf.h"
#define WGTRAIN_LORA_HAVE_HF 1
#endif

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
namespace st = safetensors;
using test::device;

[[maybe_unused]] std::vector<fs::path> subdirs_with(const fs::path& root, const char* file) {
  std::vector<fs::path> out;
  if (!fs::is_directory(root)) return out;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / file)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// input_ids int32 [B, T] and (when present) logits float32 [B, T, V] of a fixture's logits.safetensors.
struct Reference {
  std::vector<int32_t> ids;
  int64_t batch = 0, time = 0;
  std::vector<float> logits;
};

[[maybe_unused]] Reference read_reference(const fs::path& file) {
  const st::Contents c = st::load(file.string());
  Reference r;
  const st::Array& ids = c.tensors.at("input_ids");
  EXPECT_EQ(ids.dtype, "I32");
  r.batch = ids.shape.at(0);
  r.time = ids.shape.at(1);
  r.ids.resize(ids.bytes.size() / 4);
  std::memcpy(r.ids.data(), ids.bytes.data(), ids.bytes.size());
  if (auto it = c.tensors.find("logits"); it != c.tensors.end()) {
    EXPECT_EQ(it->second.dtype, "F32");
    r.logits.resize(it->second.bytes.size() / 4);
    std::memcpy(r.logits.data(), it->second.bytes.data(), it->second.bytes.size());
  }
  return r;
}

[[maybe_unused]] std::vector<float> logits_of(const Llama& model, const Reference& r) {
  return model.logits(Tensor::from_host(device(), {r.batch, r.time}, r.ids)).value().to_host_f32();
}

// The largest |got - want| and |want|.
[[maybe_unused]] std::pair<double, double> max_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, s = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(got[i] - want[i])));
    s = std::max(s, static_cast<double>(std::fabs(want[i])));
  }
  return {d, s};
}

[[maybe_unused]] void randomize_b(LoraAdapters& lora, double std, uint64_t seed) {
  std::vector<float> v = lora.values().to_host_f32();
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n(0.0, std);
  for (const auto& a : lora.adapters())
    for (int64_t e = 0; e < a.out * a.rank; ++e) v[a.b_offset + e] = static_cast<float>(n(g));
  lora.values().write(v);
}

TEST(LoraHf, AdaptersPeftMadeGivePeftsLogits) {
#ifndef WGTRAIN_LORA_HAVE_HF
  GTEST_SKIP() << "needs wgtrain/hf.h (the Hugging Face importer)";
#else
  const fs::path fixtures = WGTRAIN_FIXTURES_DIR;
  const auto dirs = subdirs_with(fixtures / "lora", "fixture.json");
  if (dirs.empty()) GTEST_SKIP() << "no peft adapters under tests/fixtures/lora: run make_peft_adapter.py";
  for (const fs::path& d : dirs) {
    SCOPED_TRACE(d.filename().string());
    std::ifstream in(d / "fixture.json");
    const nlohmann::json meta = nlohmann::json::parse(in);
    const fs::path model_dir = fixtures / "hf" / meta.at("model").get<std::string>();
    ASSERT_TRUE(fs::exists(model_dir / "config.json")) << model_dir;
    hf::ImportOptions o;
    o.quantize = false;  // peft ran the float model
    // modules_to_save: the gains are written into the model, so each fixture gets a fresh one.
    const std::unique_ptr<Llama> model = hf::load_model(device(), model_dir.string(), o);
    const Reference ref = read_reference(d / "logits.safetensors");
    const std::vector<float> base = logits_of(*model, ref);
    const std::unique_ptr<LoraAdapters> lora = load_peft(*model, (d / "adapter").string());
    model->set_linear_hook(lora.get());
    const std::vector<float> got = logits_of(*model, ref);
    model->set_linear_hook(nullptr);
    ASSERT_EQ(got.size(), ref.logits.size());
    const auto [diff, scale] = max_diff(got, ref.logits);
    const double moved = max_diff(base, ref.logits).first;
    EXPECT_LT(diff, 1e-4 * scale) << meta.dump();
    EXPECT_GT(moved, 100 * 1e-4 * scale) << "the adapter must change the logits for the check to mean anything";
  }
#endif
}

TEST(LoraHf, AFusedQloraModelExportsAndLoadsBackWithTheAdaptedLogits) {
#ifndef WGTRAIN_LORA_HAVE_HF
  GTEST_SKIP() << "needs wgtrain/hf.h (the Hugging Face importer)";
#else
  const fs::path model_dir = fs::path(WGTRAIN_FIXTURES_DIR) / "hf" / "llama";
  if (!fs::exists(model_dir / "config.json")) GTEST_SKIP() << "no tests/fixtures/hf/llama: run make_fixtures.py";
  hf::ImportOptions o;
  o.quantize = true;  // QLoRA: adapters on 4-bit weights, merged into their dequantised values
  o.group_size = 32;
  const std::unique_ptr<Llama> model = hf::load_model(device(), model_dir.string(), o);
  LoraConfig lc;
  lc.target_regex = "all-linear";
  lc.rank = 4;
  lc.seed = 3;
  LoraAdapters lora(*model, lc);
  randomize_b(lora, 0.05, 4);
  const Reference ref = read_reference(model_dir / "logits.safetensors");
  model->set_linear_hook(&lora);
  const std::vector<float> adapted = logits_of(*model, ref);
  const std::unique_ptr<Llama> fused = fuse(*model, lora);
  model->set_linear_hook(nullptr);
  const fs::path out = fs::temp_directory_path() / ("wgtrain_lora_fused_" + std::to_string(::getpid()));
  hf::ExportOptions e;
  e.dtype = "f32";
  hf::export_model(*fused, out.string(), e, nullptr, model_dir.string(), /*overwrite=*/true);
  hf::ImportOptions back;
  back.quantize = false;
  const std::unique_ptr<Llama> loaded = hf::load_model(device(), out.string(), back);
  const auto [diff, scale] = max_diff(logits_of(*loaded, ref), adapted);
  EXPECT_LT(diff, 1e-4 * scale);
  fs::remove_all(out);
#endif
}

TEST(LoraHf, WritesAdaptersAndLogitsForCheckPeft) {
  const char* out_env = std::getenv("WGTRAIN_LORA_PEFT_OUT");
  if (!out_env || !*out_env) GTEST_SKIP() << "set WGTRAIN_LORA_PEFT_OUT=DIR to write adapters for check_peft.py";
#ifndef WGTRAIN_LORA_HAVE_HF
  GTEST_SKIP() << "needs wgtrain/hf.h (the Hugging Face importer)";
#else
  const fs::path out = out_env;
  const auto models = subdirs_with(fs::path(WGTRAIN_FIXTURES_DIR) / "hf", "config.json");
  if (models.empty()) GTEST_SKIP() << "no tests/fixtures/hf models: run make_fixtures.py";
  for (const fs::path& m : models)
    for (const bool norms : {false, true}) {
      const std::string name = m.filename().string() + (norms ? "-norms" : "-plain");
      SCOPED_TRACE(name);
      hf::ImportOptions o;
      o.quantize = false;  // peft loads the float model
      o.trainable = norms ? Trainable::Norms : Trainable::None;
      const std::unique_ptr<Llama> model = hf::load_model(device(), m.string(), o);
      LoraConfig lc;
      if (norms) {
        lc.targets = {"q_proj", "v_proj"};
        lc.layers = 1;
        lc.rslora = true;
      } else {
        lc.target_regex = "all-linear";
      }
      lc.rank = 4;
      lc.alpha = 8;
      lc.seed = 11;
      lc.base_model = m.string();
      LoraAdapters lora(*model, lc);
      randomize_b(lora, 0.05, 12);
      if (norms) {  // gains away from their trained values, so that a lost modules_to_save shows
        std::vector<float> v = model->values().to_host_f32();
        std::mt19937_64 g(13);
        std::normal_distribution<float> n(0.0f, 0.2f);
        for (auto& x : v) x += n(g);
        model->values().write(v);
      }
      model->set_linear_hook(&lora);
      const Reference ref = read_reference(m / "logits.safetensors");
      const std::vector<float> lg = logits_of(*model, ref);
      model->set_linear_hook(nullptr);
      const fs::path dir = out / name;
      fs::create_directories(dir);
      save_peft(lora, (dir / "adapter").string());
      st::Contents c;
      st::Array ids;
      ids.dtype = "I32";
      ids.shape = {ref.batch, ref.time};
      ids.bytes.resize(ref.ids.size() * 4);
      std::memcpy(ids.bytes.data(), ref.ids.data(), ids.bytes.size());
      c.tensors["input_ids"] = ids;
      st::Array l;
      l.dtype = "F32";
      l.shape = {ref.batch, ref.time, model->config().vocab_size};
      l.bytes.resize(lg.size() * 4);
      std::memcpy(l.bytes.data(), lg.data(), l.bytes.size());
      c.tensors["logits"] = l;
      st::save((dir / "logits.safetensors").string(), c);
      std::printf("python3 tests/fixtures/lora/check_peft.py %s %s %s\n", m.c_str(), (dir / "adapter").c_str(),
                  (dir / "logits.safetensors").c_str());
    }
#endif
}

}  // namespace
}  // namespace wgtrain
