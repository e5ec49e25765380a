// LoRA adapters in Hugging Face peft's format: adapter_model.safetensors and adapter_config.json, written as
// PeftModel.save_pretrained writes them and read as PeftModel.from_pretrained reads them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "lora/lora_internal.h"
#include "train/checkpoint_format.h"
#include "wgtrain/atomic_file.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/lora.h"
#include "wgtrain/ops.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {

namespace st = safetensors;
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr const char* kWeights = "adapter_model.safetensors";
constexpr const char* kConfig = "adapter_config.json";
// The prefix peft gives every tensor of an adapter on a *ForCausalLM (PeftModel.base_model.model).
const std::string kPrefix = "base_model.model.";

std::string module_of(const std::string& param_name) { return param_name.substr(0, param_name.rfind('.')); }
std::string last_part(const std::string& module) { return module.substr(module.rfind('.') + 1); }

// A number as JSON: an integer when it is one (peft's lora_alpha is usually an int), else a float.
json number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

// The norm gains that train with the adapters (Trainable::Norms), as parameter indices; anything else trainable
// cannot be expressed in a PEFT LoRA file.
std::vector<size_t> trained_norms(const Llama& model) {
  std::vector<size_t> out;
  for (size_t i = 0; i < model.params().size(); ++i) {
    const Llama::Param& p = model.params()[i];
    if (!p.trainable) continue;
    if (p.kind != Llama::Kind::Norm)
      throw ArgumentError("save_peft: the model's own weight '" + p.name +
                          "' trains: a PEFT LoRA adapter holds only adapters and norm gains (use Trainable::None or "
                          "Trainable::Norms)");
    out.push_back(i);
  }
  return out;
}

}  // namespace

// ---- saving ---------------------------------------------------------------------------------------------------------

void save_peft(const LoraAdapters& lora, const std::string& dir) {
  const Llama& model = lora.model();
  const LoraConfig& c = lora.config();
  const std::vector<size_t> norms = trained_norms(model);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the adapter directory '" + dir + "': " + ec.message());

  st::Contents w;
  const std::vector<float> values = lora.values().to_host_f32();
  for (size_t i = 0; i < lora.adapters().size(); ++i) {
    const LoraAdapters::Adapter& a = lora.adapters()[i];
    w.tensors[lora.name_a(i)] = detail::f32_array(values.data() + a.a_offset, {a.rank, a.in});
    w.tensors[lora.name_b(i)] = detail::f32_array(values.data() + a.b_offset, {a.out, a.rank});
  }
  std::set<std::string> to_save;
  for (size_t i : norms) {
    const Llama::Param& p = model.params()[i];
    w.tensors[kPrefix + p.name] = detail::f32_array(model.value(i).to_host_f32().data(), p.shape);
    to_save.insert(last_part(module_of(p.name)));
  }
  w.metadata["format"] = "pt";  // as peft (through safetensors.torch.save_file) marks its files
  st::save((fs::path(dir) / kWeights).string(), w);

  // The fields of peft's LoraConfig as save_pretrained writes them (sorted keys, indent 2), those of peft 0.10,
  // which every later version reads without warnings (newer fields keep their defaults).
  json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = c.base_model.empty() ? json(nullptr) : json(c.base_model);
  j["revision"] = nullptr;
  j["inference_mode"] = true;  // save_pretrained writes the config in inference mode
  j["r"] = c.rank;
  j["lora_alpha"] = number(c.alpha);
  j["lora_dropout"] = c.dropout;
  if (c.target_regex.empty()) {
    std::vector<std::string> t = c.targets;
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    j["target_modules"] = t;
  } else if (c.target_regex == "all-linear") {
    j["target_modules"] = LoraConfig::module_names();
  } else {
    j["target_modules"] = c.target_regex;
  }
  std::vector<int64_t> layers = c.layer_indices;
  if (c.layers > 0)
    for (int64_t l = model.config().n_layers - c.layers; l < model.config().n_layers; ++l) layers.push_back(l);
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  j["layers_to_transform"] = layers.empty() ? json(nullptr) : json(layers);
  j["layers_pattern"] = layers.empty() ? json(nullptr) : json("layers");
  j["rank_pattern"] = json::object();
  for (const auto& [k, v] : c.rank_pattern) j["rank_pattern"][k] = v;
  j["alpha_pattern"] = json::object();
  for (const auto& [k, v] : c.alpha_pattern) j["alpha_pattern"][k] = number(v);
  j["use_rslora"] = c.rslora;
  j["fan_in_fan_out"] = false;
  j["bias"] = "none";
  j["modules_to_save"] = to_save.empty() ? json(nullptr) : json(std::vector<std::string>(to_save.begin(), to_save.end()));
  j["init_lora_weights"] = true;
  j["use_dora"] = false;
  j["layer_replication"] = nullptr;
  j["loftq_config"] = json::object();
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  write_file_atomic((fs::path(dir) / kConfig).string(), j.dump(2));
}

// ---- loading --------------------------------------------------------------------------------------------------------

namespace {

struct PeftFile {
  LoraConfig config;
  std::vector<std::string> modules_to_save;
};

bool default_like(const ordered_json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.get<std::string>().empty()) ||
         ((v.is_array() || v.is_object()) && v.empty());
}

PeftFile parse_peft_config(const std::string& text, const std::string& file) {
  auto fail = [&](const std::string& what) { throw Error(file + ": " + what); };
  ordered_json j;
  try {
    j = ordered_json::parse(text);
  } catch (const json::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("expected a JSON object");
  PeftFile out;
  LoraConfig& c = out.config;
  c.targets = {"q_proj", "v_proj"};  // target_modules null: peft's default for the Llama, Qwen2/3 and Mistral types
  // Fields that do not change the model an adapter computes once loaded: initialisation, versions, training-only
  // and runtime settings.
  static const std::set<std::string> inert = {"auto_mapping", "revision", "inference_mode", "loftq_config",
                                              "eva_config", "corda_config", "lora_ga_config", "megatron_core",
                                              "peft_version", "runtime_config", "qalora_group_size",
                                              "ensure_weight_tying", "loftq_bits", "loftq_iter"};
  auto want = [&](bool ok, const std::string& key, const ordered_json& v, const std::string& why) {
    if (!ok) fail("field '" + key + "' = " + v.dump() + ": " + why);
  };
  auto integer = [&](const std::string& key, const ordered_json& v) {
    want(v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>())), key, v,
         "must be an integer");
    return static_cast<int64_t>(v.get<double>());
  };
  bool saw_type = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "peft_type") {
      want(v == "LORA", key, v, "only LoRA adapters are supported");
      saw_type = true;
    } else if (key == "r") {
      c.rank = integer(key, v);
    } else if (key == "lora_alpha") {
      want(v.is_number(), key, v, "must be a number");
      c.alpha = v.get<double>();
    } else if (key == "lora_dropout") {
      want(v.is_number(), key, v, "must be a number");
      c.dropout = v.get<double>();
    } else if (key == "target_modules") {
      if (v.is_string()) {
        c.target_regex = v.get<std::string>();
      } else if (v.is_array()) {
        c.targets.clear();
        for (const auto& e : v) {
          want(e.is_string(), key, v, "must be a list of module names or a regex string");
          c.targets.push_back(e.get<std::string>());
        }
      } else {
        want(v.is_null(), key, v, "must be a list of module names or a regex string");
      }
    } else if (key == "layers_to_transform") {
      if (v.is_array()) {
        for (const auto& e : v) c.layer_indices.push_back(integer(key, e));
      } else if (!v.is_null()) {
        c.layer_indices = {integer(key, v)};
      }
    } else if (key == "layers_pattern") {
      // wgtrain's layers are "model.layers.N": peft finds the index with the pattern "layers", or with none.
      bool ok = default_like(v) || v == "layers";
      if (v.is_array()) ok = v.size() == 1 && v[0] == "layers";
      want(ok, key, v, "the Llama family's layers are 'layers'");
    } else if (key == "use_rslora") {
      want(v.is_boolean(), key, v, "must be true or false");
      c.rslora = v.get<bool>();
    } else if (key == "rank_pattern" || key == "alpha_pattern") {
      if (v.is_null()) continue;
      want(v.is_object(), key, v, "must be an object of pattern: value");
      for (const auto& [k, e] : v.items()) {
        if (key == "rank_pattern") {
          c.rank_pattern.emplace_back(k, integer(key, e));
        } else {
          want(e.is_number(), key, v, "values must be numbers");
          c.alpha_pattern.emplace_back(k, e.get<double>());
        }
      }
    } else if (key == "modules_to_save") {
      if (v.is_null()) continue;
      want(v.is_array(), key, v, "must be a list of module names");
      for (const auto& e : v) {
        want(e.is_string(), key, v, "must be a list of module names");
        out.modules_to_save.push_back(e.get<std::string>());
      }
    } else if (key == "base_model_name_or_path") {
      if (v.is_string()) c.base_model = v.get<std::string>();
    } else if (key == "task_type") {
      want(v.is_null() || v == "CAUSAL_LM", key, v, "wgtrain loads adapters of causal language models (CAUSAL_LM)");
    } else if (key == "bias") {
      want(v == "none", key, v, "wgtrain's adapters have no bias terms (bias must be \"none\")");
    } else if (key == "fan_in_fan_out") {
      want(v == false, key, v, "transposed (Conv1D) weights are not supported");
    } else if (key == "use_dora") {
      want(v == false, key, v, "DoRA is not supported");
    } else if (key == "init_lora_weights") {
      // Methods that also rewrite the base weights (PiSSA, OLoRA, LoftQ, CorDA) need the adapter converted to plain
      // LoRA first (peft's path_initial_model_for_weight_conversion); the others only initialise A and B.
      const bool ok = v.is_boolean() || v == "gaussian" || v == "eva" || v == "orthogonal";
      want(ok, key, v, "this initialisation changes the base weights; save the adapter converted to plain LoRA");
    } else if (inert.count(key)) {
      continue;
    } else {
      want(default_like(v), key, v, "not supported by wgtrain");
    }
  }
  if (!saw_type) fail("no peft_type: not a peft adapter config");
  try {
    c.validate();
  } catch (const ArgumentError& e) {
    fail(e.what());
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const st::Array& need_float(const st::Contents& c, const std::string& file, const std::string& name,
                            const Shape& shape) {
  auto it = c.tensors.find(name);
  if (it == c.tensors.end()) throw Error(file + " has no tensor '" + name + "'");
  const std::string& d = it->second.dtype;
  if (d != "F32" && d != "F16" && d != "BF16" && d != "F64")
    throw Error(file + ": tensor '" + name + "' is " + d + ", expected a float type (F32, F16, BF16, F64)");
  if (it->second.shape != shape)
    throw Error(file + ": tensor '" + name + "' is " + shape_str(it->second.shape) + ", the model needs " +
                shape_str(shape));
  return it->second;
}

}  // namespace

std::unique_ptr<LoraAdapters> load_peft(Llama& model, const std::string& dir) {
  const std::string config_path = (fs::path(dir) / kConfig).string();
  const std::string weights_path = (fs::path(dir) / kWeights).string();
  if (!fs::exists(config_path)) throw Error("'" + dir + "' is not a peft adapter directory: it has no " + kConfig);
  if (!fs::exists(weights_path)) {
    if (fs::exists(fs::path(dir) / "adapter_model.bin"))
      throw Error("'" + dir + "' holds adapter_model.bin (a pickle), which wgtrain does not read: save it as "
                  "safetensors (save_pretrained(..., safe_serialization=True))");
    throw Error("'" + dir + "' has no " + kWeights);
  }
  const PeftFile f = parse_peft_config(read_text(config_path), config_path);

  std::unique_ptr<LoraAdapters> lora;
  try {
    lora = std::make_unique<LoraAdapters>(model, f.config, LoraAdapters::NoInit{});
  } catch (const ArgumentError& e) {
    throw Error(config_path + ": " + e.what());
  }

  // The norm modules modules_to_save names, as peft matches them: (^|.*\.)NAME($|\..*) against module names.
  std::vector<size_t> norms;
  for (const std::string& m : f.modules_to_save) {
    std::regex re;
    try {
      re = std::regex("(^|.*\\.)" + m + "($|\\..*)", std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      throw Error(config_path + ": modules_to_save entry '" + m + "' is not a valid pattern");
    }
    bool any = false;
    for (size_t i = 0; i < model.params().size(); ++i) {
      const Llama::Param& p = model.params()[i];
      if (!std::regex_match(module_of(p.name), re)) continue;
      if (p.kind != Llama::Kind::Norm)
        throw Error(config_path + ": modules_to_save '" + m + "' covers '" + module_of(p.name) +
                    "': wgtrain loads only norm modules (" + "input_layernorm, post_attention_layernorm, norm, "
                    "q_norm, k_norm) there");
      any = true;
      if (std::find(norms.begin(), norms.end(), i) == norms.end()) norms.push_back(i);
    }
    if (!any) throw Error(config_path + ": modules_to_save '" + m + "' matches no module of the model");
  }

  st::Contents c;
  try {
    c = st::load(weights_path);
  } catch (const Error& e) {
    throw Error("cannot read '" + weights_path + "': " + e.what());
  }
  std::set<std::string> known;
  std::vector<std::pair<Tensor, const st::Array*>> writes;  // destination, source; checked before any is written
  for (size_t i = 0; i < lora->adapters().size(); ++i) {
    const LoraAdapters::Adapter& a = lora->adapters()[i];
    writes.emplace_back(lora->a(i), &need_float(c, weights_path, lora->name_a(i), {a.rank, a.in}));
    writes.emplace_back(lora->b(i), &need_float(c, weights_path, lora->name_b(i), {a.out, a.rank}));
    known.insert({lora->name_a(i), lora->name_b(i)});
  }
  for (size_t i : norms) {
    const Llama::Param& p = model.params()[i];
    writes.emplace_back(model.value(i), &need_float(c, weights_path, kPrefix + p.name, p.shape));
    known.insert(kPrefix + p.name);
  }
  for (const auto& [name, a] : c.tensors)
    if (!known.count(name))
      throw Error(weights_path + " holds a tensor the adapter config does not account for: '" + name + "'");
  for (const auto& [dst, src] : writes) ops::copy_(dst, st::to_tensor(model.device(), *src, "adapter tensor"));
  return lora;
}

}  // namespace wgtrain
