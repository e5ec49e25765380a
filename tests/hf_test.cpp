// Hugging Face model directories: import against transformers' own logits and greedy generations on tiny
// random-weight checkpoints of each architecture (tests/fixtures/hf/, made by make_fixtures.py with transformers),
// export and re-import, and bad directories as one-line errors.
//
// Tolerances: float32 logits within 1e-4 of the largest |logit| (transformers computes in float32 on the CPU,
// wgtrain on the GPU: other summation orders); q4gsw logits within 1e-4 of a float32 model holding the dequantised
// weights, and within 0.4 relative (Frobenius) of transformers' float32 ones (4-bit weights at these tiny random
// sizes: measured 0.2-0.3); greedy tokens equal while transformers' top two logits differ by more than 1e-4.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/generate.h"
#include "wgtrain/hf.h"
#include "wgtrain/llama.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::device;

const std::vector<std::string> kFixtures = {"llama", "llama3", "qwen2", "qwen3", "mistral"};

fs::path fixture(const std::string& name) { return fs::path(WGTRAIN_FIXTURES_DIR) / "hf" / name; }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("wgtrain_hf_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p;
}

std::vector<float> logits_of(const Llama& model, const std::vector<std::vector<int32_t>>& rows) {
  std::vector<int32_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const int64_t B = static_cast<int64_t>(rows.size()), T = static_cast<int64_t>(rows[0].size());
  return model.logits(Tensor::from_host(device(), {B, T}, flat)).value().to_host_f32();
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

TEST(HfImport, EveryArchitectureGivesTransformersLogits) {
  for (const auto& name : kFixtures) {
    SCOPED_TRACE(name);
    const fs::path dir = fixture(name);
    ASSERT_TRUE(hf::is_model_dir(dir.string())) << dir << " (made by tests/fixtures/hf/make_fixtures.py)";
    const json ref = read_json(dir / "reference.json");
    const auto rows = ref.at("input_ids").get<std::vector<std::vector<int32_t>>>();
    const safetensors::MappedFile want_file((dir / "logits.safetensors").string());
    const std::vector<float> want = want_file.to_f32("logits");

    hf::ImportOptions fp32;
    fp32.quantize = false;
    hf::ImportReport report;
    const auto model = hf::load_model(device(), dir.string(), fp32, &report);
    EXPECT_EQ(model->config().architecture, ref.at("architecture").get<std::string>());
    EXPECT_TRUE(report.quantisation_error.empty());
    const std::vector<float> got = logits_of(*model, rows);
    ASSERT_EQ(got.size(), want.size());
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
    EXPECT_LT(err, 1e-4 * max_abs(want)) << "max |logit| " << max_abs(want);

    // The same checkpoint with q4gsw block linears: the report names every linear kind, and the logits are those
    // of a float32 model holding the dequantised weights (the q4 GEMMs compute exactly that model).
    hf::ImportReport q4report;
    const auto q4 = hf::load_model(device(), dir.string(), {}, &q4report);
    EXPECT_EQ(q4report.quantisation_error.size(), 7u);
    for (const auto& [kind, e] : q4report.quantisation_error) {
      EXPECT_GT(e, 0.01) << kind;
      EXPECT_LT(e, 0.2) << kind;
    }
    LlamaConfig deq_config = q4->config();
    deq_config.quantize_blocks = false;
    Llama deq(device(), deq_config, Llama::NoInit{}, Trainable::None);
    deq.load_weights([&](const Llama::Param& p) { return q4->host_value(q4->index_of(p.name)); });
    const std::vector<float> gq = logits_of(*q4, rows), gd = logits_of(deq, rows);
    double qerr = 0, num = 0, den = 0;
    for (size_t i = 0; i < gq.size(); ++i) {
      qerr = std::max(qerr, static_cast<double>(std::fabs(gq[i] - gd[i])));
      num += (gq[i] - want[i]) * (gq[i] - want[i]);
      den += want[i] * want[i];
    }
    EXPECT_LT(qerr, 1e-4 * max_abs(gd));
    // And 4-bit weights are still this model: at these tiny random sizes they move the logits by 20-30%.
    EXPECT_LT(std::sqrt(num / den), 0.4);
  }
}

TEST(HfImport, GreedyGenerationEqualsTransformers) {
  for (const auto& name : kFixtures) {
    SCOPED_TRACE(name);
    const fs::path dir = fixture(name);
    const json ref = read_json(dir / "reference.json");
    hf::ImportOptions fp32;
    fp32.quantize = false;
    Generator gen(device(), dir.string(), fp32);
    for (const auto& g : ref.at("greedy")) {
      const std::string label = g.at("label");
      SCOPED_TRACE(label);
      const auto prompt = g.at("prompt").get<std::vector<int32_t>>();
      const auto want = g.at("output").get<std::vector<int32_t>>();
      const auto margins = g.at("margins").get<std::vector<double>>();
      // Our tokenizer and chat template give transformers' prompt ids.
      GenerateOptions o;
      o.temperature = 0;
      o.max_tokens = static_cast<int64_t>(want.size());
      if (label == "chat") {
        o.chat = true;
        o.prompt = "Tell me a fortune.";
      } else {
        o.prompt = ref.at("prompt_text").get<std::string>();
      }
      EXPECT_EQ(gen.prompt_ids(o), prompt);
      o.max_tokens = 24;
      const std::vector<int32_t> got = gen.generate_ids(prompt, o);
      // Equal up to the first step where transformers' choice was a near tie.
      size_t decisive = 0;
      while (decisive < margins.size() && margins[decisive] > 1e-4) ++decisive;
      const size_t n = std::min(decisive, want.size());
      ASSERT_GE(got.size(), n);
      EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + n), std::vector<int32_t>(want.begin(), want.begin() + n));
      if (decisive >= want.size()) {
        EXPECT_EQ(got, want);  // including where it stopped (EOS or max_tokens)
        EXPECT_EQ(gen.stats().stopped_at_eos, want.size() < 24u);
      }
    }
  }
}

TEST(HfExport, ARunsModelExportsAndReimportsWithItsLogits) {
  // Every variant the families need, with q4 blocks: exported (dequantised, f32) and read back as float32, the
  // logits are the q4 model's; exported as bf16, within bf16's rounding.
  Tokenizer tok = train_bpe("the cat sat on the mat. the dog sat on the log. 1 2 3 4 5 6 7 8 9", 300);
  struct Case {
    const char* arch;
    bool qkv_bias, o_bias, qk_norm, tie;
  };
  for (const Case& k : {Case{"LlamaForCausalLM", false, false, false, true}, Case{"LlamaForCausalLM", true, true, false, false},
                        Case{"Qwen2ForCausalLM", true, false, false, true}, Case{"Qwen3ForCausalLM", false, false, true, true},
                        Case{"MistralForCausalLM", false, false, false, false}}) {
    SCOPED_TRACE(k.arch);
    LlamaConfig c;
    c.architecture = k.arch;
    c.vocab_size = 300;
    c.dim = 32;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.ffn_dim = 64;
    c.max_seq_len = 16;
    c.qkv_bias = k.qkv_bias;
    c.o_bias = k.o_bias;
    c.qk_norm = k.qk_norm;
    c.tie_embeddings = k.tie;
    if (k.qk_norm) c.head_dim_override = 16;
    c.rope_scaling.type = k.o_bias ? "llama3" : "none";
    c.rope_scaling.original_max_position = 8;
    const Llama model(device(), c, test::seed());
    const std::vector<std::vector<int32_t>> rows = {{1, 5, 9, 200, 17, 3, 42, 8}, {299, 0, 4, 4, 150, 77, 6, 2}};
    const std::vector<float> want = logits_of(model, rows);

    const fs::path out = scratch(std::string("export_") + k.arch + (k.o_bias ? "_bias" : ""));
    hf::ExportOptions f32;
    f32.dtype = "f32";
    f32.max_shard_bytes = 40000;  // several shards and an index
    hf::export_model(model, out.string(), f32, &tok);
    EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
    EXPECT_THROW(hf::export_model(model, out.string(), f32, &tok), Error);  // exists: not overwritten
    hf::ImportOptions fp32;
    fp32.quantize = false;
    const auto back = hf::load_model(device(), out.string(), fp32);
    EXPECT_EQ(back->config().architecture, c.architecture);
    const std::vector<float> got = logits_of(*back, rows);
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
    EXPECT_LT(err, 1e-5 * max_abs(want) + 1e-6);
    EXPECT_EQ(Tokenizer::load_dir(out.string()).to_json(), tok.to_json());

    hf::ExportOptions bf16;
    const fs::path out16 = scratch(std::string("export16_") + k.arch);
    hf::export_model(model, out16.string(), bf16, &tok);
    const json cfg = read_json(out16 / "config.json");
    EXPECT_EQ(cfg.at("torch_dtype"), "bfloat16");
    const auto back16 = hf::load_model(device(), out16.string(), fp32);
    const std::vector<float> g16 = logits_of(*back16, rows);
    double num = 0, den = 0;
    for (size_t i = 0; i < g16.size(); ++i) {
      num += (g16[i] - want[i]) * (g16[i] - want[i]);
      den += want[i] * want[i];
    }
    EXPECT_LT(std::sqrt(num / den), 2e-2);
  }
}

// For tests/fixtures/hf/check_export.py on a machine with transformers: with WGTRAIN_EXPORT_CHECK_OUT=DIR, writes
// Hugging Face directories exported from wgtrain models (every variant above with random weights, and a model
// trained here on the fortunes for a few steps), each with the logits wgtrain computes (logits.safetensors).
TEST(HfExport, WritesModelsAndLogitsForCheckExport) {
  const char* env = std::getenv("WGTRAIN_EXPORT_CHECK_OUT");
  if (!env || !*env) GTEST_SKIP() << "set WGTRAIN_EXPORT_CHECK_OUT=DIR to write the export checks";
  const fs::path root(env);
  fs::create_directories(root);
  const std::vector<std::vector<int32_t>> rows = {{1, 5, 9, 200, 17, 3, 42, 8}, {299, 0, 4, 4, 150, 77, 6, 2}};
  auto write = [&](const Llama& model, const Tokenizer& tok, const std::string& name, const std::string& dtype) {
    const fs::path out = root / name;
    fs::remove_all(out);
    hf::ExportOptions o;
    o.dtype = dtype;
    hf::export_model(model, out.string(), o, &tok);
    std::vector<int32_t> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    safetensors::Contents c;
    c.tensors["input_ids"] = safetensors::from_tensor(Tensor::from_host(device(), {2, 8}, flat));
    // The logits of the model as exported: dequantised q4 (and bf16-rounded when exported so) weights.
    hf::ImportOptions fp32;
    fp32.quantize = false;
    const auto back = hf::load_model(device(), out.string(), fp32);
    c.tensors["logits"] = safetensors::from_tensor(back->logits(Tensor::from_host(device(), {2, 8}, flat)).value());
    safetensors::save((out / "logits.safetensors").string(), c);
    std::printf("python3 tests/fixtures/hf/check_export.py %s\n", out.c_str());
  };
  Tokenizer tok = train_bpe("the cat sat on the mat. the dog sat on the log. 1 2 3 4 5 6 7 8 9", 300);
  int k = 0;
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}) {
    LlamaConfig c;
    c.architecture = arch;
    c.vocab_size = 300, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 64, c.max_seq_len = 16;
    c.qkv_bias = std::string(arch) == "Qwen2ForCausalLM";
    c.qk_norm = std::string(arch) == "Qwen3ForCausalLM";
    c.head_dim_override = c.qk_norm ? 16 : 0;
    c.tie_embeddings = k % 2 == 0;
    if (k == 0) {
      c.rope_scaling.type = "llama3";
      c.rope_scaling.original_max_position = 8;
    }
    const Llama model(device(), c, 1000 + k);
    write(model, tok, std::string("random-") + arch, k % 2 ? "bf16" : "f32");
    ++k;
  }
  // A run trained by `wgtrain train` (WGTRAIN_EXPORT_CHECK_RUN=RUN_DIR), its q4 weights as they are.
  if (const char* run = std::getenv("WGTRAIN_EXPORT_CHECK_RUN"); run && *run) {
    const auto model = load_run_model(device(), run, Trainable::None);
    write(*model, Tokenizer::load_dir(run), "trained-run", "f32");
  }
}

// A fixture copied into a scratch directory, to be broken.
fs::path broken_copy(const std::string& fixture_name, const std::string& as) {
  const fs::path dst = scratch(as);
  fs::copy(fixture(fixture_name), dst, fs::copy_options::recursive);
  return dst;
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json j = read_json(dir / "config.json");
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

std::string error_of(const fs::path& dir) {
  try {
    hf::load_model(device(), dir.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfImport, BadDirectoriesAreOneLineErrorsNamingTheProblem) {
  auto expect = [](const fs::path& dir, const std::string& fragment) {
    const std::string msg = error_of(dir);
    EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message: " << msg;
  };
  {
    const fs::path d = broken_copy("llama", "no_config");
    fs::remove(d / "config.json");
    expect(d, "no config.json");
  }
  {
    const fs::path d = broken_copy("llama", "no_weights");
    fs::remove(d / "model.safetensors");
    expect(d, "no model.safetensors");
  }
  {
    const fs::path d = broken_copy("llama", "truncated");
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 100);
    expect(d, "truncated");
  }
  {
    const fs::path d = broken_copy("llama3", "missing_shard");  // the sharded fixture
    fs::path shard;
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().filename().string().find("-of-") != std::string::npos) shard = e.path();
    ASSERT_FALSE(shard.empty());
    fs::remove(shard);
    expect(d, shard.filename().string());
  }
  {
    const fs::path d = broken_copy("llama", "shape");
    edit_config(d, [](json& j) { j["intermediate_size"] = 128; });
    expect(d, "config.json implies");
  }
  {
    const fs::path d = broken_copy("llama", "arch");
    edit_config(d, [](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
    expect(d, "'architectures'");
  }
  {
    const fs::path d = broken_copy("llama", "rope");
    edit_config(d, [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
    expect(d, "yarn");
  }
  {
    const fs::path d = broken_copy("mistral", "window");
    edit_config(d, [](json& j) { j["sliding_window"] = 4; });
    expect(d, "'sliding_window'");
  }
  {
    const fs::path d = broken_copy("qwen2", "window2");
    edit_config(d, [](json& j) { j["use_sliding_window"] = true; });
    expect(d, "'use_sliding_window'");
  }
  {
    const fs::path d = broken_copy("llama", "act");
    edit_config(d, [](json& j) { j["hidden_act"] = "gelu"; });
    expect(d, "'hidden_act'");
  }
  {
    const fs::path d = broken_copy("llama", "quantised");
    edit_config(d, [](json& j) { j["quantization_config"] = {{"quant_method", "gptq"}}; });
    expect(d, "'quantization_config'");
  }
  {
    const fs::path d = broken_copy("qwen3", "wrong_arch");  // Qwen3 weights read as Llama: q/k norms left over
    edit_config(d, [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; });
    expect(d, "_norm.weight', which LlamaForCausalLM");
  }
}

}  // namespace
}  // namespace wgtrain
