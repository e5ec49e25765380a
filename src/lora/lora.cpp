// LoRA adapters: the config, which linears it selects, the arenas, initialisation, the hook's forward and the step.
#include "wgtrain/lora.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>

#include "lora/lora_internal.h"
#include "wgtrain/device.h"
#include "wgtrain/dropout.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/random.h"

namespace wgtrain {

namespace ag = autograd;

// ---- configuration --------------------------------------------------------------------------------------------------

const std::vector<std::string>& LoraConfig::module_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

std::regex compile(const std::string& pattern, const std::string& what) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ArgumentError("LoRA config: " + what + " '" + pattern + "' is not a valid regular expression (" + e.what() +
                        ")");
  }
}

}  // namespace

void LoraConfig::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ArgumentError("LoRA config: " + what);
  };
  need(rank >= 1, "rank must be >= 1, got " + std::to_string(rank));
  need(std::isfinite(alpha) && alpha > 0, "alpha must be > 0, got " + std::to_string(alpha));
  need(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout));
  if (target_regex.empty()) {
    need(!targets.empty(), "no target modules (give some of " + joined(module_names()) + ")");
    for (const auto& t : targets) {
      // A name, or the end of a module name ("self_attn.q_proj"), as PEFT matches a list.
      const std::string last = t.substr(t.rfind('.') == std::string::npos ? 0 : t.rfind('.') + 1);
      need(last != "lm_head" && last != "embed_tokens",
           "target '" + t + "': LoRA on the embedding or the LM head is not supported (targets: " +
               joined(module_names()) + ")");
      need(std::find(module_names().begin(), module_names().end(), last) != module_names().end(),
           "unknown target module '" + t + "' (targets: " + joined(module_names()) + ")");
    }
  } else if (target_regex != "all-linear") {
    compile(target_regex, "target regex");
    need(layers == -1 && layer_indices.empty(),
         "a regex target selects layers itself: layers / layers_to_transform cannot be used with it (as in PEFT)");
  }
  need(layers == -1 || layers >= 1, "layers must be -1 (all) or >= 1 (the last N), got " + std::to_string(layers));
  need(layers == -1 || layer_indices.empty(), "give either layers (the last N) or layer indices, not both");
  for (int64_t l : layer_indices) need(l >= 0, "layer index " + std::to_string(l) + " is negative");
  for (const auto& [key, r] : rank_pattern) {
    compile(key, "rank_pattern key");
    need(r >= 1, "rank_pattern '" + key + "': rank must be >= 1, got " + std::to_string(r));
  }
  for (const auto& [key, a] : alpha_pattern) {
    compile(key, "alpha_pattern key");
    need(std::isfinite(a) && a > 0, "alpha_pattern '" + key + "': alpha must be > 0");
  }
}

std::string LoraConfig::to_json() const {
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["alpha"] = alpha;
  j["dropout"] = dropout;
  j["targets"] = targets;
  j["target_regex"] = target_regex;
  j["layers"] = layers;
  j["layer_indices"] = layer_indices;
  j["rslora"] = rslora;
  j["rank_pattern"] = nlohmann::ordered_json::array();
  for (const auto& [k, v] : rank_pattern) j["rank_pattern"].push_back({k, v});
  j["alpha_pattern"] = nlohmann::ordered_json::array();
  for (const auto& [k, v] : alpha_pattern) j["alpha_pattern"].push_back({k, v});
  j["seed"] = seed;
  j["base_model"] = base_model;
  return j.dump(2);
}

LoraConfig LoraConfig::from_json(const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ArgumentError(std::string("LoRA config: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ArgumentError("LoRA config: expected a JSON object");
  LoraConfig c;
  try {
    for (const auto& [key, v] : j.items()) {
      if (key == "rank") c.rank = v.get<int64_t>();
      else if (key == "alpha") c.alpha = v.get<double>();
      else if (key == "dropout") c.dropout = v.get<double>();
      else if (key == "targets") c.targets = v.get<std::vector<std::string>>();
      else if (key == "target_regex") c.target_regex = v.get<std::string>();
      else if (key == "layers") c.layers = v.get<int64_t>();
      else if (key == "layer_indices") c.layer_indices = v.get<std::vector<int64_t>>();
      else if (key == "rslora") c.rslora = v.get<bool>();
      else if (key == "rank_pattern") {
        for (const auto& e : v) c.rank_pattern.emplace_back(e.at(0).get<std::string>(), e.at(1).get<int64_t>());
      } else if (key == "alpha_pattern") {
        for (const auto& e : v) c.alpha_pattern.emplace_back(e.at(0).get<std::string>(), e.at(1).get<double>());
      } else if (key == "seed") c.seed = v.get<uint64_t>();
      else if (key == "base_model") c.base_model = v.get<std::string>();
      else throw ArgumentError("LoRA config: unknown field '" + key + "'");
    }
  } catch (const nlohmann::json::exception& e) {
    throw ArgumentError(std::string("LoRA config: a field has the wrong type: ") + e.what());
  }
  c.validate();
  return c;
}

// ---- selection ------------------------------------------------------------------------------------------------------

namespace lora_detail {

std::string module_name(int64_t layer, const std::string& linear) {
  const bool attn = linear == "q_proj" || linear == "k_proj" || linear == "v_proj" || linear == "o_proj";
  return "model.layers." + std::to_string(layer) + (attn ? ".self_attn." : ".mlp.") + linear;
}

std::vector<Selection> select(const Llama& model, const LoraConfig& c) {
  c.validate();
  const int64_t n_layers = model.config().n_layers;
  std::vector<bool> layer_on(static_cast<size_t>(n_layers), c.layer_indices.empty());
  if (c.layers > n_layers)
    throw ArgumentError("LoRA config: layers " + std::to_string(c.layers) + " exceeds the model's " +
                        std::to_string(n_layers) + " layers");
  if (c.layers > 0)
    for (int64_t l = 0; l < n_layers; ++l) layer_on[l] = l >= n_layers - c.layers;
  for (int64_t l : c.layer_indices) {
    if (l >= n_layers)
      throw ArgumentError("LoRA config: layer " + std::to_string(l) + " does not exist (the model has " +
                          std::to_string(n_layers) + ")");
    layer_on[l] = true;
  }
  const bool all_linear = c.target_regex == "all-linear";
  const bool regex = !c.target_regex.empty() && !all_linear;
  std::regex re;
  if (regex) {
    re = compile(c.target_regex, "target regex");
    // PEFT would put an adapter on the head too; wgtrain does not train the head.
    if (std::regex_match("lm_head", re))
      throw ArgumentError("LoRA config: the target regex '" + c.target_regex +
                          "' matches lm_head: LoRA on the LM head is not supported");
  }
  const std::vector<std::string>& targets = all_linear ? LoraConfig::module_names() : c.targets;
  auto listed = [&](const std::string& module, const std::string& t) {
    return module == t || (module.size() > t.size() && module.compare(module.size() - t.size(), t.size(), t) == 0 &&
                           module[module.size() - t.size() - 1] == '.');
  };
  std::vector<Selection> out;
  std::vector<bool> target_used(targets.size(), false);
  for (int64_t l = 0; l < n_layers; ++l)
    for (const std::string& linear : LoraConfig::module_names()) {
      const std::string module = module_name(l, linear);
      bool on = false;
      if (regex) {
        on = std::regex_match(module, re);
      } else {
        for (size_t t = 0; t < targets.size(); ++t)
          if (listed(module, targets[t])) on = true, target_used[t] = true;
        on = on && layer_on[l];
      }
      if (on) out.push_back({model.index_of(module + ".weight"), module, l});
    }
  if (!regex)
    for (size_t t = 0; t < targets.size(); ++t)
      if (!target_used[t])
        throw ArgumentError("LoRA config: target '" + targets[t] + "' matches no linear of the model (targets: " +
                            joined(LoraConfig::module_names()) + ")");
  if (out.empty())
    throw ArgumentError(regex ? "LoRA config: the target regex '" + c.target_regex + "' matches no linear of the model"
                              : std::string("LoRA config: the targets and layers select no linear of the model"));
  std::sort(out.begin(), out.end(), [](const Selection& a, const Selection& b) { return a.param < b.param; });
  return out;
}

// PEFT's get_pattern_key: the first key k (in order) for which re.match(rf"(.*\.)?({k})$", module) matches.
template <class V>
std::optional<V> pattern_value(const std::vector<std::pair<std::string, V>>& pattern, const std::string& module) {
  for (const auto& [key, value] : pattern)
    if (std::regex_match(module, std::regex("(.*\\.)?(" + key + ")", std::regex::ECMAScript))) return value;
  return std::nullopt;
}

}  // namespace lora_detail

// ---- adapters -------------------------------------------------------------------------------------------------------

LoraAdapters::LoraAdapters(const Llama& model, const LoraConfig& config, NoInit) : model_(&model), config_(config) {
  build();
}

LoraAdapters::LoraAdapters(const Llama& model, const LoraConfig& config) : model_(&model), config_(config) {
  build();
  // A as PEFT draws it: kaiming_uniform_(a = sqrt(5)) gives bound gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + 5)),
  // that is 1 / sqrt(in). Drawn on the host in adapter order from the seed, so every platform gets the same values.
  std::vector<float> host(static_cast<size_t>(arena_size_), 0.0f);
  SplitMix64 rng(config_.seed);
  for (const Adapter& a : adapters_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.in));
    for (int64_t e = 0; e < a.rank * a.in; ++e)
      host[static_cast<size_t>(a.a_offset + e)] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  }
  values_.write(host);
}

void LoraAdapters::build() {
  const std::vector<lora_detail::Selection> selected = lora_detail::select(*model_, config_);
  by_param_.assign(model_->params().size(), -1);
  for (const auto& s : selected) {
    const Llama::Param& p = model_->params()[s.param];
    Adapter a;
    a.param = s.param;
    a.module = s.module;
    a.layer = s.layer;
    a.out = p.shape[0];
    a.in = p.shape[1];
    a.rank = lora_detail::pattern_value(config_.rank_pattern, s.module).value_or(config_.rank);
    a.alpha = lora_detail::pattern_value(config_.alpha_pattern, s.module).value_or(config_.alpha);
    a.scale = config_.rslora ? a.alpha / std::sqrt(static_cast<double>(a.rank)) : a.alpha / static_cast<double>(a.rank);
    a.a_offset = arena_size_;
    arena_size_ += (a.rank * a.in + 3) / 4 * 4;  // 16-byte aligned: AdamW moves vec4s
    a.b_offset = arena_size_;
    arena_size_ += (a.out * a.rank + 3) / 4 * 4;
    by_param_[s.param] = static_cast<int>(adapters_.size());
    adapters_.push_back(std::move(a));
  }
  Device& device = model_->device();
  {
    const MemoryScope scope(device, MemoryCategory::Weights);
    values_ = ops::full(device, {arena_size_}, 0.0);
  }
  {
    const MemoryScope scope(device, MemoryCategory::Gradients);
    grads_ = ops::full(device, {arena_size_}, 0.0);
  }
  const auto key = ops::dropout_key(config_.seed, 0);
  dropout_key_ = Tensor::from_host(device, {4}, std::span<const int32_t>(key.data(), key.size()));
}

std::optional<size_t> LoraAdapters::adapter_of(size_t param) const {
  if (param >= by_param_.size() || by_param_[param] < 0) return std::nullopt;
  return static_cast<size_t>(by_param_[param]);
}

Tensor LoraAdapters::a(size_t i) const {
  const Adapter& a = adapters_.at(i);
  return values_.slice(0, a.a_offset, a.a_offset + a.rank * a.in).reshape({a.rank, a.in});
}
Tensor LoraAdapters::b(size_t i) const {
  const Adapter& a = adapters_.at(i);
  return values_.slice(0, a.b_offset, a.b_offset + a.out * a.rank).reshape({a.out, a.rank});
}
Tensor LoraAdapters::grad_a(size_t i) const {
  const Adapter& a = adapters_.at(i);
  return grads_.slice(0, a.a_offset, a.a_offset + a.rank * a.in).reshape({a.rank, a.in});
}
Tensor LoraAdapters::grad_b(size_t i) const {
  const Adapter& a = adapters_.at(i);
  return grads_.slice(0, a.b_offset, a.b_offset + a.out * a.rank).reshape({a.out, a.rank});
}

std::string LoraAdapters::name_a(size_t i) const { return "base_model.model." + adapters_.at(i).module + ".lora_A.weight"; }
std::string LoraAdapters::name_b(size_t i) const { return "base_model.model." + adapters_.at(i).module + ".lora_B.weight"; }

ag::Var LoraAdapters::apply(const Llama& model, size_t param, const ag::Var& x, const ag::Var& y) const {
  if (&model != model_) throw ArgumentError("LoraAdapters: hooked into a model they were not made for");
  const std::optional<size_t> k = adapter_of(param);
  if (!k) return y;
  const Adapter& ad = adapters_[*k];
  ag::Var in = x;
  if (training_ && config_.dropout > 0) {
    // One stream per adapter: each linear draws its own mask, as each PEFT LoRA layer has its own nn.Dropout.
    const Tensor mask = ops::dropout_mask(x.shape(), dropout_key_, config_.dropout, static_cast<uint32_t>(*k));
    in = ag::mul(x, ag::Var::constant(mask));
  }
  const ag::Var A = ag::Var::parameter(a(*k), grad_a(*k)), B = ag::Var::parameter(b(*k), grad_b(*k));
  // The scale on the rank-r intermediate: r elements a row rather than `out`.
  return ag::add(y, ag::linear(ag::mul(ag::linear(in, A), ad.scale), B));
}

void LoraAdapters::zero_grads() { ops::fill_(grads_, 0.0); }

std::vector<ops::AdamWParam> LoraAdapters::adamw_params(const Tensor& m, const Tensor& v) const {
  if (m.shape() != Shape{arena_size_} || v.shape() != Shape{arena_size_})
    throw ArgumentError("LoraAdapters::adamw_params: the moments must be arenas of " + std::to_string(arena_size_) +
                        " floats, got " + shape_str(m.shape()) + " and " + shape_str(v.shape()));
  auto view = [](const Tensor& arena, int64_t offset, const Shape& shape) {
    return arena.slice(0, offset, offset + numel(shape)).reshape(shape);
  };
  std::vector<ops::AdamWParam> out;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const Adapter& ad = adapters_[i];
    const Shape sa = {ad.rank, ad.in}, sb = {ad.out, ad.rank};
    out.push_back({a(i), grad_a(i), view(m, ad.a_offset, sa), view(v, ad.a_offset, sa), -1.0});
    out.push_back({b(i), grad_b(i), view(m, ad.b_offset, sb), view(v, ad.b_offset, sb), -1.0});
  }
  return out;
}

void LoraAdapters::set_step(uint64_t counter) {
  const auto key = ops::dropout_key(config_.seed, counter);
  dropout_key_.write(std::span<const int32_t>(key.data(), key.size()));
}

Tensor LoraAdapters::train_step(Llama& model, const Tensor& tokens, const Tensor& targets,
                                const ops::AdamW& optimizer) {
  if (&model != model_ || model.linear_hook() != this)
    throw ArgumentError("LoraAdapters::train_step: the model's linear hook must be these adapters "
                        "(model.set_linear_hook(&adapters))");
  zero_grads();
  const bool was = training_;
  training_ = true;
  try {
    Tensor loss = model.train_step(tokens, targets, optimizer);
    training_ = was;
    return loss;
  } catch (...) {
    training_ = was;
    throw;
  }
}

}  // namespace wgtrain
