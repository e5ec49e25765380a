// Hugging Face model directories: config.json to LlamaConfig, safetensors shards to the model's parameters, and
// the way back (export).
#include "wgtrain/hf.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include "wgtrain/atomic_file.h"
#include "wgtrain/error.h"
#include "wgtrain/safetensors.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain::hf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kArchitectures = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                                 "MistralForCausalLM"};

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path.string() + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    throw Error("'" + path.string() + "' is not valid JSON: " + what);
  }
}

// Fields of config.json, read with the file named in every message.
struct ConfigFile {
  json j;
  std::string path;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(path + ": '" + field + "' " + what);
  }
  bool has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const std::string& key) const {
    if (!has(key)) fail(key, "is missing");
    const json& v = j.at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer, got " + v.dump());
    return v.get<int64_t>();
  }
  int64_t integer(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const json& v, const std::string& key) const {
    if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
    return v.get<double>();
  }
  double number(const std::string& key, double fallback) const { return has(key) ? number(j.at(key), key) : fallback; }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) fail(key, "must be true or false, got " + j.at(key).dump());
    return j.at(key).get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string()) fail(key, "must be a string, got " + j.at(key).dump());
    return j.at(key).get<std::string>();
  }
};

// Rope settings, in either spelling: rope_theta + rope_scaling (the hub's checkpoints), or rope_parameters
// (transformers 5).
void read_rope(const ConfigFile& f, LlamaConfig& c) {
  json scaling;
  std::string where = "rope_scaling";
  if (f.has("rope_parameters")) {
    const json& rp = f.j.at("rope_parameters");
    if (!rp.is_object()) f.fail("rope_parameters", "must be an object");
    if (rp.contains("rope_theta")) c.rope_theta = f.number(rp.at("rope_theta"), "rope_parameters.rope_theta");
    scaling = rp;
    where = "rope_parameters";
  }
  if (f.has("rope_theta")) c.rope_theta = f.number(f.j.at("rope_theta"), "rope_theta");
  if (f.has("rope_scaling")) {
    scaling = f.j.at("rope_scaling");
    where = "rope_scaling";
  }
  if (scaling.is_null()) return;
  if (!scaling.is_object()) f.fail(where, "must be an object or null");
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (scaling.contains(key) && scaling.at(key).is_string()) type = scaling.at(key).get<std::string>();
  if (type == "default") return;
  if (type != "llama3")
    f.fail(where, "has rope type '" + type + "', which wgtrain does not implement (default, llama3)");
  auto num = [&](const char* key) {
    if (!scaling.contains(key)) f.fail(where + "." + key, "is missing (rope type llama3)");
    return f.number(scaling.at(key), where + "." + key);
  };
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = num("factor");
  c.rope_scaling.low_freq_factor = num("low_freq_factor");
  c.rope_scaling.high_freq_factor = num("high_freq_factor");
  const double orig = num("original_max_position_embeddings");
  if (orig != std::floor(orig) || orig < 1) f.fail(where + ".original_max_position_embeddings", "must be a positive integer");
  c.rope_scaling.original_max_position = static_cast<int64_t>(orig);
}

// The parameter a checkpoint tensor is, for tensors that are not parameters but may appear: rotary buffers of
// old conversions.
bool ignorable(const std::string& name) { return name.find("rotary_emb.inv_freq") != std::string::npos; }

// The shards of a directory: one model.safetensors, or the files an index names, each tensor's file.
struct Shards {
  std::vector<safetensors::MappedFile> files;
  std::map<std::string, size_t> where;  // tensor name -> index into files

  explicit Shards(const fs::path& dir) {
    const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    if (fs::exists(index)) {
      const json j = read_json(index);
      if (!j.contains("weight_map") || !j.at("weight_map").is_object())
        throw Error(index.string() + ": no \"weight_map\" object");
      std::map<std::string, size_t> file_index;
      for (const auto& [name, file] : j.at("weight_map").items()) {
        if (!file.is_string()) throw Error(index.string() + ": the shard of '" + name + "' is not a file name");
        const std::string shard = file.get<std::string>();
        if (shard.find('/') != std::string::npos || shard == "..")
          throw Error(index.string() + ": shard '" + shard + "' is not a file in the model directory");
        if (!file_index.count(shard)) {
          const fs::path p = dir / shard;
          if (!fs::exists(p))
            throw Error(index.string() + " names shard '" + shard + "', which is not in " + dir.string());
          file_index[shard] = files.size();
          files.emplace_back(p.string());
        }
        const safetensors::MappedFile& f = files[file_index[shard]];
        if (!f.has(name))
          throw Error(index.string() + " puts '" + name + "' in '" + shard + "', which does not hold it");
        where[name] = file_index[shard];
      }
    } else if (fs::exists(single)) {
      files.emplace_back(single.string());
      for (const auto& [name, info] : files[0].tensors()) where[name] = 0;
    } else {
      const bool bin = fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json");
      throw Error(dir.string() + " has no model.safetensors or model.safetensors.index.json" +
                  (bin ? " (it holds PyTorch .bin weights: save them as safetensors first, e.g. with "
                         "model.save_pretrained(dir, safe_serialization=True))"
                       : ""));
    }
  }
  const safetensors::MappedFile& file_of(const std::string& name) const { return files[where.at(name)]; }
};

uint16_t to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

uint16_t to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow (rounds to inf)
  if (a < 0x38800000u) {  // subnormal or zero in f16: round |f| * 2^24 to an integer, half to even
    const float scaled = std::bit_cast<float>(a) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t v = a - 0x38000000u;  // rebias 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

std::string model_type_of(const std::string& arch) {
  if (arch == "Qwen2ForCausalLM") return "qwen2";
  if (arch == "Qwen3ForCausalLM") return "qwen3";
  if (arch == "MistralForCausalLM") return "mistral";
  return "llama";
}

void write_file(const fs::path& path, const std::string& text) { write_file_atomic(path.string(), text); }

}  // namespace

bool is_model_dir(const std::string& dir) {
  const fs::path d(dir);
  return fs::is_directory(d) && fs::exists(d / "config.json") &&
         (fs::exists(d / "model.safetensors") || fs::exists(d / "model.safetensors.index.json"));
}

LlamaConfig read_config(const std::string& dir, const ImportOptions& options) {
  const fs::path path = fs::path(dir) / "config.json";
  if (!fs::exists(path)) throw Error(dir + " is not a Hugging Face model directory: it has no config.json");
  ConfigFile f{read_json(path), path.string()};
  if (!f.j.is_object()) throw Error(f.path + ": expected a JSON object");
  if (!f.has("architectures") || !f.j.at("architectures").is_array() || f.j.at("architectures").empty() ||
      !f.j.at("architectures")[0].is_string())
    f.fail("architectures", "is missing (expected e.g. [\"LlamaForCausalLM\"])");
  const std::string arch = f.j.at("architectures")[0].get<std::string>();
  if (std::find(kArchitectures.begin(), kArchitectures.end(), arch) == kArchitectures.end())
    f.fail("architectures", "is [\"" + arch + "\"]: wgtrain reads LlamaForCausalLM, Qwen2ForCausalLM, "
                            "Qwen3ForCausalLM and MistralForCausalLM");
  if (f.has("quantization_config"))
    f.fail("quantization_config", "is set: this is a quantised checkpoint; wgtrain reads bf16, f16 or f32 weights "
                                  "(and quantises them itself)");

  LlamaConfig c;
  c.architecture = arch;
  c.vocab_size = f.integer("vocab_size");
  c.dim = f.integer("hidden_size");
  c.n_layers = f.integer("num_hidden_layers");
  c.n_heads = f.integer("num_attention_heads");
  c.n_kv_heads = f.integer("num_key_value_heads", c.n_heads);
  c.ffn_dim = f.integer("intermediate_size");
  if (f.has("head_dim")) {
    const int64_t hd = f.integer("head_dim");
    if (c.n_heads <= 0 || c.dim % c.n_heads != 0 || hd != c.dim / c.n_heads) c.head_dim_override = hd;
  }
  c.max_seq_len = options.max_seq_len > 0 ? options.max_seq_len : f.integer("max_position_embeddings");
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.tie_embeddings = f.boolean("tie_word_embeddings", false);
  read_rope(f, c);

  const std::string act = f.string("hidden_act", f.string("hidden_activation", "silu"));
  if (act != "silu") f.fail("hidden_act", "is '" + act + "': wgtrain's MLP is SwiGLU with silu");
  if (f.boolean("mlp_bias", false)) f.fail("mlp_bias", "is true: wgtrain's MLP has no biases");
  if (f.has("partial_rotary_factor") && f.number(f.j.at("partial_rotary_factor"), "partial_rotary_factor") != 1.0)
    f.fail("partial_rotary_factor", "is not 1: wgtrain rotates whole heads");
  if (arch == "Qwen2ForCausalLM") {
    c.qkv_bias = true;  // Qwen2's q, k and v projections always carry biases
  } else {
    c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  }
  c.qk_norm = arch == "Qwen3ForCausalLM";
  if (arch == "MistralForCausalLM" && f.has("sliding_window") &&
      f.integer("sliding_window") < f.integer("max_position_embeddings"))
    f.fail("sliding_window", "is " + std::to_string(f.integer("sliding_window")) +
                                 ": wgtrain has no sliding-window attention (Mistral v0.2 and later have none)");
  if (f.boolean("use_sliding_window", false))
    f.fail("use_sliding_window", "is true: wgtrain has no sliding-window attention");
  if (f.has("layer_types")) {
    const json& lt = f.j.at("layer_types");
    if (!lt.is_array()) f.fail("layer_types", "must be a list");
    for (const auto& t : lt)
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        f.fail("layer_types", "has a layer of type " + t.dump() + ": wgtrain has full attention only");
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (f.has(key)) f.fail(key, "is set: wgtrain applies no logit soft-capping");

  c.quantize_blocks = options.quantize;
  c.group_size = options.group_size;
  c.quantize_head = options.quantize && options.quantize_head && !c.tie_embeddings;
  try {
    c.validate();
  } catch (const ArgumentError& e) {
    throw Error(f.path + ": " + e.what());
  }
  return c;
}

std::unique_ptr<Llama> load_model(Device& device, const std::string& dir, const ImportOptions& options,
                                  ImportReport* report) {
  const LlamaConfig config = read_config(dir, options);
  const Shards shards{fs::path(dir)};

  // The model's parameter list first, to check every tensor before uploading any.
  auto model = std::make_unique<Llama>(device, config, Llama::NoInit{}, options.trainable);
  std::set<std::string> used;
  std::set<std::string> dtypes;
  for (const Llama::Param& p : model->params()) {
    auto it = shards.where.find(p.name);
    if (it == shards.where.end())
      throw Error(dir + ": the checkpoint has no tensor '" + p.name + "', which " + config.architecture +
                  " with this config.json needs");
    const safetensors::TensorInfo& info = shards.files[it->second].info(p.name);
    if (info.shape != p.shape)
      throw Error(dir + ": tensor '" + p.name + "' is " + shape_str(info.shape) + ", config.json implies " +
                  shape_str(p.shape));
    if (info.dtype != "BF16" && info.dtype != "F16" && info.dtype != "F32" && info.dtype != "F64")
      throw Error(dir + ": tensor '" + p.name + "' is " + info.dtype + "; wgtrain reads BF16, F16, F32 or F64");
    used.insert(p.name);
    dtypes.insert(info.dtype);
  }
  for (const auto& [name, file] : shards.where) {
    if (used.count(name) || ignorable(name)) continue;
    if (name == "lm_head.weight" && config.tie_embeddings) continue;  // a tied head saved anyway
    throw Error(dir + ": the checkpoint holds '" + name + "', which " + config.architecture +
                " with this config.json does not have (a different architecture?)");
  }

  std::map<std::string, std::pair<double, int>> errors;  // kind -> (sum of relative errors, count)
  model->load_weights([&](const Llama::Param& p) { return shards.file_of(p.name).to_f32(p.name); },
                      [&](const Llama::Param& p, double err) {
                        std::string kind = p.name.substr(0, p.name.rfind('.'));
                        kind = kind.substr(kind.rfind('.') + 1);
                        errors[kind].first += err;
                        errors[kind].second += 1;
                      });
  if (report) {
    report->dtypes.clear();
    for (const auto& d : dtypes) report->dtypes += (report->dtypes.empty() ? "" : ", ") + d;
    report->files = static_cast<int64_t>(shards.files.size());
    report->tensors = static_cast<int64_t>(used.size());
    report->quantisation_error.clear();
    for (const auto& [kind, e] : errors) report->quantisation_error[kind] = e.first / e.second;
  }
  return model;
}

void export_model(const Llama& model, const std::string& out_dir, const ExportOptions& options,
                  const Tokenizer* tokenizer, const std::string& tokenizer_dir, bool overwrite) {
  const LlamaConfig& c = model.config();
  if (options.dtype != "bf16" && options.dtype != "f16" && options.dtype != "f32")
    throw ArgumentError("export: dtype '" + options.dtype + "' is not one of bf16, f16, f32");
  if (options.max_shard_bytes < 1) throw ArgumentError("export: max_shard_bytes must be positive");
  // What the Hugging Face class can express.
  const std::string& arch = c.architecture;
  auto refuse = [&](const std::string& why) { throw Error("export: a " + arch + " cannot have " + why); };
  if (c.qk_norm != (arch == "Qwen3ForCausalLM")) refuse(c.qk_norm ? "q/k norms" : "no q/k norms");
  if (arch == "Qwen2ForCausalLM" && (!c.qkv_bias || c.o_bias)) refuse("other biases than q, k and v");
  if ((arch == "LlamaForCausalLM" || arch == "Qwen3ForCausalLM") && c.qkv_bias != c.o_bias)
    refuse("q/k/v biases without an o bias (attention_bias covers all four)");
  if (arch == "MistralForCausalLM" && (c.qkv_bias || c.o_bias)) refuse("attention biases");
  const fs::path out(out_dir);
  if (fs::exists(out) && !overwrite)
    throw Error("export: '" + out_dir + "' already exists (choose another --out, or remove it first)");
  if (!tokenizer && tokenizer_dir.empty()) throw ArgumentError("export: no tokenizer to write with the model");

  const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    // Weights, in parameter order, into shards of at most max_shard_bytes, each written as soon as it is full: at
    // most one shard on the host.
    const std::string st_dtype = options.dtype == "bf16" ? "BF16" : options.dtype == "f16" ? "F16" : "F32";
    const size_t esize = safetensors::dtype_bytes(st_dtype);
    safetensors::Contents shard;
    int64_t shard_bytes = 0, total = 0;
    size_t shards = 0;
    std::vector<std::pair<std::string, size_t>> placed;  // tensor -> shard
    auto provisional = [&](size_t k) { return tmp / ("shard-" + std::to_string(k) + ".part"); };
    auto flush = [&] {
      shard.metadata["format"] = "pt";  // what transformers' save_pretrained writes
      safetensors::save(provisional(shards).string(), shard);
      shard = {};
      shard_bytes = 0;
      ++shards;
    };
    for (size_t i = 0; i < model.params().size(); ++i) {
      const Llama::Param& p = model.params()[i];
      const std::vector<float> v = model.host_value(i);
      safetensors::Array a;
      a.dtype = st_dtype;
      a.shape = p.shape;
      a.bytes.resize(v.size() * esize);
      for (size_t k = 0; k < v.size(); ++k) {
        if (esize == 4) {
          std::memcpy(a.bytes.data() + 4 * k, &v[k], 4);
        } else {
          const uint16_t h = st_dtype == "BF16" ? to_bf16(v[k]) : to_f16(v[k]);
          std::memcpy(a.bytes.data() + 2 * k, &h, 2);
        }
      }
      const int64_t bytes = static_cast<int64_t>(a.bytes.size());
      if (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes) flush();
      placed.emplace_back(p.name, shards);
      shard.tensors[p.name] = std::move(a);
      shard_bytes += bytes;
      total += bytes;
    }
    flush();
    auto shard_name = [&](size_t k) {
      if (shards == 1) return std::string("model.safetensors");
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, shards);
      return std::string(buf);
    };
    for (size_t k = 0; k < shards; ++k) fs::rename(provisional(k), tmp / shard_name(k));
    if (shards > 1) {
      json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
      for (const auto& [name, k] : placed) index["weight_map"][name] = shard_name(k);
      write_file(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
    }

    // Tokenizer files.
    std::optional<int32_t> bos, eos;
    if (!tokenizer_dir.empty()) {
      for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"})
        if (fs::exists(fs::path(tokenizer_dir) / f))
          copy_file_atomic((fs::path(tokenizer_dir) / f).string(), (tmp / f).string());
      if (!fs::exists(tmp / "tokenizer.json")) throw Error("export: '" + tokenizer_dir + "' has no tokenizer.json");
      const Tokenizer t = Tokenizer::load_dir(tokenizer_dir);
      bos = t.bos_id();
      eos = t.eos_id();
    } else {
      tokenizer->save((tmp / "tokenizer.json").string());
      json tc = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", c.max_seq_len},
                 {"clean_up_tokenization_spaces", false}};
      if (!tokenizer->bos_token().empty()) tc["bos_token"] = tokenizer->bos_token();
      if (!tokenizer->eos_token().empty()) tc["eos_token"] = tokenizer->eos_token();
      if (!tokenizer->chat_template().empty()) tc["chat_template"] = tokenizer->chat_template();
      write_file(tmp / "tokenizer_config.json", tc.dump(2) + "\n");
      bos = tokenizer->bos_id();
      eos = tokenizer->eos_id();
    }

    // config.json as the hub's checkpoints spell it (rope_theta, rope_scaling, torch_dtype): what transformers 4
    // and 5 both read.
    json j = {{"architectures", {arch}},
              {"model_type", model_type_of(arch)},
              {"vocab_size", c.vocab_size},
              {"hidden_size", c.dim},
              {"intermediate_size", c.hidden_dim()},
              {"num_hidden_layers", c.n_layers},
              {"num_attention_heads", c.n_heads},
              {"num_key_value_heads", c.n_kv_heads},
              {"head_dim", c.head_dim()},
              {"max_position_embeddings", c.max_seq_len},
              {"rms_norm_eps", c.norm_eps},
              {"rope_theta", c.rope_theta},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", c.tie_embeddings},
              {"attention_dropout", 0.0},
              {"initializer_range", 0.02},
              {"use_cache", true},
              {"torch_dtype", options.dtype == "bf16" ? "bfloat16" : options.dtype == "f16" ? "float16" : "float32"}};
    if (c.rope_scaling.type == "llama3")
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
    else
      j["rope_scaling"] = nullptr;
    if (arch == "LlamaForCausalLM") {
      j["attention_bias"] = c.qkv_bias;
      j["mlp_bias"] = false;
    } else if (arch == "Qwen3ForCausalLM") {
      j["attention_bias"] = c.qkv_bias;
    }
    if (arch == "Qwen2ForCausalLM" || arch == "Qwen3ForCausalLM") {
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.n_layers;
    }
    if (arch == "MistralForCausalLM") j["sliding_window"] = nullptr;
    json gen = json::object();
    if (bos) j["bos_token_id"] = gen["bos_token_id"] = *bos;
    if (eos) j["eos_token_id"] = gen["eos_token_id"] = *eos;
    write_file(tmp / "config.json", j.dump(2) + "\n");
    const fs::path gen_src = tokenizer_dir.empty() ? fs::path() : fs::path(tokenizer_dir) / "generation_config.json";
    if (!gen_src.empty() && fs::exists(gen_src))
      copy_file_atomic(gen_src.string(), (tmp / "generation_config.json").string());
    else
      write_file(tmp / "generation_config.json", gen.dump(2) + "\n");

    if (fs::exists(out)) fs::remove_all(out);  // overwrite was asked for
    fs::rename(tmp, out);
    sync_directory(out.parent_path().empty() ? "." : out.parent_path().string());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace wgtrain::hf
