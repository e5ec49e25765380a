// The Llama-style model: configuration, parameter arenas and initialisation, and the forward pass on the autograd
// tape (its backward comes from the ops' rules).
#include "wgtrain/llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/random.h"

namespace wgtrain {

namespace ag = autograd;

// ---- configuration --------------------------------------------------------------------------------------------------

void LlamaConfig::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ArgumentError("model config: " + what);
  };
  need(vocab_size >= 2, "vocab_size must be at least 2");
  need(dim > 0 && n_layers > 0 && n_heads > 0 && n_kv_heads > 0, "dim, n_layers, n_heads, n_kv_heads must be > 0");
  need(head_dim_override >= 0, "head_dim must be >= 0 (0: dim / n_heads)");
  need(head_dim_override > 0 || dim % n_heads == 0,
       "dim (" + std::to_string(dim) + ") must be a multiple of n_heads (" + std::to_string(n_heads) +
           ") unless head_dim is given");
  need(head_dim() % 2 == 0, "the head dim (" + std::to_string(head_dim()) + ") must be even for rotary embeddings");
  need(n_heads % n_kv_heads == 0, "n_heads (" + std::to_string(n_heads) + ") must be a multiple of n_kv_heads (" +
                                      std::to_string(n_kv_heads) + ")");
  need(ffn_dim >= 0, "ffn_dim must be >= 0 (0: 8/3 dim)");
  need(max_seq_len > 0, "max_seq_len must be > 0");
  need(norm_eps > 0 && rope_theta > 0, "norm_eps and rope_theta must be > 0");
  need(rope_scaling.type == "none" || rope_scaling.type == "llama3",
       "rope_scaling.type '" + rope_scaling.type + "' is not supported (none, llama3)");
  if (rope_scaling.type == "llama3")
    need(rope_scaling.factor > 0 && rope_scaling.low_freq_factor > 0 &&
             rope_scaling.high_freq_factor > rope_scaling.low_freq_factor && rope_scaling.original_max_position > 0,
         "rope_scaling (llama3) needs factor > 0, 0 < low_freq_factor < high_freq_factor, original_max_position > 0");
  need(group_size > 0 && group_size % 8 == 0, "group_size must be a positive multiple of 8 (32, 64, 128)");
  need(!(quantize_head && tie_embeddings), "quantize_head needs an untied head (tie_embeddings false)");
  const std::vector<std::string> archs = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                          "MistralForCausalLM"};
  need(std::find(archs.begin(), archs.end(), architecture) != archs.end(),
       "architecture '" + architecture + "' is not one of LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
       "MistralForCausalLM");
}

int64_t LlamaConfig::parameter_count() const {
  const int64_t hd = head_dim(), q = n_heads * hd, kv = n_kv_heads * hd;
  int64_t block = dim * q * 2 + kv * dim * 2 + 3 * dim * hidden_dim() + 2 * dim;
  if (qkv_bias) block += q + 2 * kv;
  if (o_bias) block += dim;
  if (qk_norm) block += 2 * hd;
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + n_layers * block + dim;
}

std::string LlamaConfig::to_json() const {
  nlohmann::ordered_json j;
  j["architecture"] = architecture;
  j["vocab_size"] = vocab_size;
  j["dim"] = dim;
  j["n_layers"] = n_layers;
  j["n_heads"] = n_heads;
  j["n_kv_heads"] = n_kv_heads;
  j["head_dim"] = head_dim();
  j["ffn_dim"] = hidden_dim();
  j["max_seq_len"] = max_seq_len;
  j["norm_eps"] = norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.type == "none") {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {{"type", rope_scaling.type},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position", rope_scaling.original_max_position}};
  }
  j["tie_embeddings"] = tie_embeddings;
  j["qkv_bias"] = qkv_bias;
  j["o_bias"] = o_bias;
  j["qk_norm"] = qk_norm;
  j["quantize_blocks"] = quantize_blocks;
  j["quantize_head"] = quantize_head;
  j["group_size"] = group_size;
  j["recompute_scales"] = recompute_scales;
  return j.dump(2);
}

namespace {

int64_t json_int(const nlohmann::json& v, const std::string& key) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
    throw ArgumentError("model config: field '" + key + "' must be an integer, got " + v.dump());
  }
  throw ArgumentError("model config: field '" + key + "' must be an integer, got " + v.dump());
}

double json_number(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number()) throw ArgumentError("model config: field '" + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}

bool json_bool(const nlohmann::json& v, const std::string& key) {
  if (!v.is_boolean()) throw ArgumentError("model config: field '" + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

}  // namespace

LlamaConfig LlamaConfig::from_json(const std::string& text, std::vector<std::string>* defaulted) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ArgumentError(std::string("model config: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ArgumentError("model config: expected a JSON object");
  LlamaConfig c;
  // "head_dim" equal to dim / n_heads is the default spelled out (to_json writes it); resolved after the loop.
  std::optional<int64_t> head_dim;
  for (const auto& [key, value] : j.items()) {
    if (key == "vocab_size") c.vocab_size = json_int(value, key);
    else if (key == "dim") c.dim = json_int(value, key);
    else if (key == "n_layers") c.n_layers = json_int(value, key);
    else if (key == "n_heads") c.n_heads = json_int(value, key);
    else if (key == "n_kv_heads") c.n_kv_heads = json_int(value, key);
    else if (key == "head_dim") head_dim = json_int(value, key);
    else if (key == "ffn_dim") c.ffn_dim = json_int(value, key);
    else if (key == "max_seq_len") c.max_seq_len = json_int(value, key);
    else if (key == "norm_eps") c.norm_eps = json_number(value, key);
    else if (key == "rope_theta") c.rope_theta = json_number(value, key);
    else if (key == "tie_embeddings") c.tie_embeddings = json_bool(value, key);
    else if (key == "qkv_bias") c.qkv_bias = json_bool(value, key);
    else if (key == "o_bias") c.o_bias = json_bool(value, key);
    else if (key == "qk_norm") c.qk_norm = json_bool(value, key);
    else if (key == "quantize_blocks") c.quantize_blocks = json_bool(value, key);
    else if (key == "quantize_head") c.quantize_head = json_bool(value, key);
    else if (key == "group_size") c.group_size = json_int(value, key);
    else if (key == "recompute_scales") c.recompute_scales = json_bool(value, key);
    else if (key == "architecture") {
      if (!value.is_string()) throw ArgumentError("model config: field 'architecture' must be a string");
      c.architecture = value.get<std::string>();
    } else if (key == "rope_scaling") {
      if (value.is_null()) continue;
      if (!value.is_object()) throw ArgumentError("model config: 'rope_scaling' must be null or an object");
      for (const auto& [k, v] : value.items()) {
        const std::string name = "rope_scaling." + k;
        if (k == "type") {
          if (!v.is_string()) throw ArgumentError("model config: '" + name + "' must be a string");
          c.rope_scaling.type = v.get<std::string>();
        } else if (k == "factor") c.rope_scaling.factor = json_number(v, name);
        else if (k == "low_freq_factor") c.rope_scaling.low_freq_factor = json_number(v, name);
        else if (k == "high_freq_factor") c.rope_scaling.high_freq_factor = json_number(v, name);
        else if (k == "original_max_position") c.rope_scaling.original_max_position = json_int(v, name);
        else throw ArgumentError("model config: unknown field '" + name + "'");
      }
    } else {
      throw ArgumentError("model config: unknown field '" + key + "'");
    }
  }
  if (head_dim && (c.dim % c.n_heads != 0 || *head_dim != c.dim / c.n_heads)) c.head_dim_override = *head_dim;
  if (defaulted) {
    defaulted->clear();
    for (const char* key : {"architecture", "vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                            "ffn_dim", "max_seq_len", "norm_eps", "rope_theta", "rope_scaling", "tie_embeddings",
                            "qkv_bias", "o_bias", "qk_norm", "quantize_blocks", "quantize_head", "group_size",
                            "recompute_scales"})
      if (!j.contains(key)) defaulted->push_back(key);
  }
  c.validate();
  return c;
}

LlamaConfig LlamaConfig::preset(const std::string& name) {
  LlamaConfig c;
  if (name == "tiny") {
    c.vocab_size = 2048, c.dim = 128, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.max_seq_len = 128;
  } else if (name == "small") {
    c.vocab_size = 4096, c.dim = 384, c.n_layers = 6, c.n_heads = 6, c.n_kv_heads = 2, c.ffn_dim = 1024;
    c.max_seq_len = 256;
  } else if (name == "base") {
    c.vocab_size = 8192, c.dim = 640, c.n_layers = 10, c.n_heads = 10, c.n_kv_heads = 5, c.max_seq_len = 512;
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw ArgumentError("unknown model preset '" + name + "' (presets: " + names + ")");
  }
  c.validate();
  return c;
}

std::vector<std::string> LlamaConfig::preset_names() { return {"tiny", "small", "base"}; }

void rope_tables(const LlamaConfig& c, std::vector<float>& cos, std::vector<float>& sin) {
  const int64_t hd = c.head_dim(), half = hd / 2;
  // Hugging Face: inv_freq = 1 / theta^(2i / hd) in float32, then (llama3) rescaled by wavelength band.
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(hd);
    inv[i] = 1.0f / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  if (c.rope_scaling.type == "llama3") {
    // In float32 throughout, operation for operation as Hugging Face's _compute_llama3_parameters.
    const RopeScaling& r = c.rope_scaling;
    const float old_len = static_cast<float>(r.original_max_position), factor = static_cast<float>(r.factor);
    const float lo = static_cast<float>(r.low_freq_factor), hi = static_cast<float>(r.high_freq_factor);
    const float low_wavelen = static_cast<float>(r.original_max_position / r.low_freq_factor);
    const float high_wavelen = static_cast<float>(r.original_max_position / r.high_freq_factor);
    for (auto& f : inv) {
      const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {  // the band between: interpolated
        const float smooth = (old_len / wavelen - lo) / (hi - lo);
        f = (1.0f - smooth) * scaled / factor + smooth * scaled;
      } else {
        f = scaled;
      }
    }
  }
  cos.assign(static_cast<size_t>(c.max_seq_len * half), 0.0f);
  sin.assign(cos.size(), 0.0f);
  for (int64_t t = 0; t < c.max_seq_len; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inv[i];  // float32, as the product Hugging Face takes
      cos[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
}

// ---- the model ------------------------------------------------------------------------------------------------------

Llama::Llama(Device& device, const LlamaConfig& config, NoInit, Trainable trainable)
    : device_(&device), config_(config), trainable_(trainable) {
  build();
  const MemoryScope scope(device, MemoryCategory::Weights);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].trainable && params_[i].q4 < 0) frozen_[i] = Tensor::empty(device, params_[i].shape);
}

Llama::Llama(Device& device, const LlamaConfig& config, uint64_t seed, Trainable trainable)
    : device_(&device), config_(config), trainable_(trainable) {
  build();
  // Initial values, drawn on the host in parameter order so that a seed gives the same model everywhere.
  SplitMix64 rng(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
  load_weights([&](const Param& p) {
    std::vector<float> v(static_cast<size_t>(numel(p.shape)), p.kind == Kind::Norm ? 1.0f : 0.0f);
    if (p.kind == Kind::Norm || p.kind == Kind::Bias) return v;
    const bool residual = p.name.find("o_proj") != std::string::npos || p.name.find("down_proj") != std::string::npos;
    const double std = residual ? residual_std : 0.02;
    for (auto& e : v) e = static_cast<float>(std * rng.normal());
    return v;
  });
}

void Llama::build() {
  config_.validate();
  Device& device = *device_;
  const LlamaConfig& c = config_;
  const int64_t hd = c.head_dim(), qd = c.q_dim(), kv = c.kv_dim(), hidden = c.hidden_dim();
  auto add = [&](const std::string& name, Shape shape, Kind kind, bool q4) {
    Param p;
    p.name = name;
    p.shape = std::move(shape);
    p.kind = kind;
    p.trainable = trainable_ == Trainable::All || (trainable_ == Trainable::Norms && kind == Kind::Norm);
    p.decay = kind != Kind::Norm && kind != Kind::Bias;
    if (q4) p.q4 = static_cast<int>(q4_.size()), q4_.emplace_back();
    if (p.trainable) {
      p.offset = arena_size_;
      arena_size_ += (numel(p.shape) + 3) / 4 * 4;  // 16-byte aligned: AdamW moves vec4s
    }
    params_.push_back(std::move(p));
    return params_.size() - 1;
  };
  const bool q4 = c.quantize_blocks;
  embedding_ = add("model.embed_tokens.weight", {c.vocab_size, c.dim}, Kind::Embedding, false);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    Layer L{};
    L.attn_norm = add(pre + "input_layernorm.weight", {c.dim}, Kind::Norm, false);
    L.q = add(pre + "self_attn.q_proj.weight", {qd, c.dim}, Kind::Linear, q4);
    if (c.qkv_bias) L.q_bias = add(pre + "self_attn.q_proj.bias", {qd}, Kind::Bias, false);
    L.k = add(pre + "self_attn.k_proj.weight", {kv, c.dim}, Kind::Linear, q4);
    if (c.qkv_bias) L.k_bias = add(pre + "self_attn.k_proj.bias", {kv}, Kind::Bias, false);
    L.v = add(pre + "self_attn.v_proj.weight", {kv, c.dim}, Kind::Linear, q4);
    if (c.qkv_bias) L.v_bias = add(pre + "self_attn.v_proj.bias", {kv}, Kind::Bias, false);
    L.o = add(pre + "self_attn.o_proj.weight", {c.dim, qd}, Kind::Linear, q4);
    if (c.o_bias) L.o_bias = add(pre + "self_attn.o_proj.bias", {c.dim}, Kind::Bias, false);
    if (c.qk_norm) {
      L.q_norm = add(pre + "self_attn.q_norm.weight", {hd}, Kind::Norm, false);
      L.k_norm = add(pre + "self_attn.k_norm.weight", {hd}, Kind::Norm, false);
    }
    L.mlp_norm = add(pre + "post_attention_layernorm.weight", {c.dim}, Kind::Norm, false);
    L.gate = add(pre + "mlp.gate_proj.weight", {hidden, c.dim}, Kind::Linear, q4);
    L.up = add(pre + "mlp.up_proj.weight", {hidden, c.dim}, Kind::Linear, q4);
    L.down = add(pre + "mlp.down_proj.weight", {c.dim, hidden}, Kind::Linear, q4);
    layers_.push_back(L);
  }
  final_norm_ = add("model.norm.weight", {c.dim}, Kind::Norm, false);
  if (!c.tie_embeddings) head_ = add("lm_head.weight", {c.vocab_size, c.dim}, Kind::Head, c.quantize_head);

  if (arena_size_ > 0) {
    {
      const MemoryScope scope(device, MemoryCategory::Weights);
      values_ = ops::full(device, {arena_size_}, 0.0);
    }
    const MemoryScope scope(device, MemoryCategory::Gradients);
    grads_ = ops::full(device, {arena_size_}, 0.0);
  }
  const MemoryScope scope(device, MemoryCategory::Weights);
  frozen_.resize(params_.size());
  for (Param& p : params_) {
    if (p.q4 < 0) continue;
    Q4Weight& w = q4_[p.q4];
    const int64_t n = p.shape[0], k = p.shape[1];
    w.in_features = k;
    w.group_size = c.group_size;
    w.codes = Tensor::empty(device, {n, q4gsw::words_per_row(k)}, DType::I32);
    w.scales = Tensor::empty(device, {q4gsw::groups(k, c.group_size), n}, DType::F32);
  }

  std::vector<float> cs, sn;
  rope_tables(c, cs, sn);
  const MemoryScope constants(device, MemoryCategory::Other);  // not parameters
  rope_cos_ = Tensor::from_host(device, {c.max_seq_len, hd / 2}, cs);
  rope_sin_ = Tensor::from_host(device, {c.max_seq_len, hd / 2}, sn);
}

namespace {

// ||W - Q(W)|| / ||W|| for the codes the kernel chose, from the host copy of W and the device's codes and scales.
double quantisation_error(const std::vector<float>& w, const Q4Weight& q) {
  const int64_t n = q.out_features(), k = q.in_features, g = q.group_size;
  const std::vector<uint8_t> bytes = q4gsw::download_bytes(q);
  const std::vector<float> scales = q.scales.to_host_f32();
  double num = 0, den = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t byte = bytes[static_cast<size_t>(r * q4gsw::bytes_per_row(k) + j / 2)];
      const int code = (j % 2 == 0 ? byte & 0xf : byte >> 4) - 8;
      const double deq = code * static_cast<double>(scales[static_cast<size_t>((j / g) * n + r)]);
      const double x = w[static_cast<size_t>(r * k + j)];
      num += (x - deq) * (x - deq);
      den += x * x;
    }
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

}  // namespace

void Llama::load_weights(const std::function<std::vector<float>(const Param&)>& fetch,
                         const std::function<void(const Param&, double)>& on_quantised) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    const std::vector<float> host = fetch(p);
    if (static_cast<int64_t>(host.size()) != numel(p.shape))
      throw ArgumentError("Llama::load_weights: " + std::to_string(host.size()) + " values for '" + p.name + "' " +
                          shape_str(p.shape));
    Tensor weight;
    if (p.trainable) {
      weight = value(i);
      weight.write(host);
    } else {
      const MemoryScope scope(*device_, MemoryCategory::Weights);
      weight = Tensor::from_host(*device_, p.shape, host);
      if (p.q4 < 0) frozen_[i] = weight;
    }
    if (p.q4 < 0) continue;
    // The first scales come from the weights, whichever way later steps treat them.
    ops::q4gsw_requant(weight, q4_[p.q4], /*recompute_scales=*/true);
    if (on_quantised) on_quantised(p, quantisation_error(host, q4_[p.q4]));
  }
}

Tensor Llama::value(size_t i) const {
  const Param& p = params_.at(i);
  if (p.trainable) return values_.slice(0, p.offset, p.offset + numel(p.shape)).reshape(p.shape);
  if (p.q4 >= 0)
    throw ArgumentError("Llama::value: '" + p.name + "' is a frozen q4 weight with no float32 copy (host_value "
                        "dequantises it)");
  return frozen_.at(i);
}

Tensor Llama::grad(size_t i) const {
  const Param& p = params_.at(i);
  if (!p.trainable) throw ArgumentError("Llama::grad: '" + p.name + "' is frozen: it has no gradient");
  return grads_.slice(0, p.offset, p.offset + numel(p.shape)).reshape(p.shape);
}

std::vector<float> Llama::host_value(size_t i) const {
  const Param& p = params_.at(i);
  if (p.q4 < 0) return value(i).to_host_f32();
  const Q4Weight& w = q4_[p.q4];
  const int64_t n = p.shape[0], k = p.shape[1], g = w.group_size;
  const std::vector<uint8_t> bytes = q4gsw::download_bytes(w);
  const std::vector<float> scales = w.scales.to_host_f32();
  std::vector<float> out(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t byte = bytes[static_cast<size_t>(r * q4gsw::bytes_per_row(k) + j / 2)];
      const int code = (j % 2 == 0 ? byte & 0xf : byte >> 4) - 8;
      out[static_cast<size_t>(r * k + j)] = static_cast<float>(code) * scales[static_cast<size_t>((j / g) * n + r)];
    }
  return out;
}

std::optional<size_t> Llama::find(const std::string& name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return i;
  return std::nullopt;
}

size_t Llama::index_of(const std::string& name) const {
  if (auto i = find(name)) return *i;
  throw ArgumentError("the model has no parameter '" + name + "'");
}

ag::Var Llama::param(size_t i) const {
  const Param& p = params_[i];
  if (p.trainable) return ag::Var::parameter(value(i), grad(i));
  return ag::Var::constant(value(i));
}

ag::Var Llama::linear(const ag::Var& x, size_t i, std::optional<size_t> bias) const {
  const Param& p = params_[i];
  ag::Var y;
  if (p.q4 >= 0)
    y = p.trainable ? ag::linear_q4gsw(x, q4_[p.q4], param(i)) : ag::linear_q4gsw(x, q4_[p.q4]);
  else
    y = ag::linear(x, param(i));
  if (bias) y = ag::add(y, param(*bias));
  if (hook_) y = hook_->apply(*this, i, x, y);
  return y;
}

ag::Var Llama::residual_linear(const ag::Var& residual, const ag::Var& x, size_t i,
                               std::optional<size_t> bias) const {
  const Param& p = params_[i];
  // The residual stream joins the product in the GEMM's finishing pass (mixed precision), where nothing comes
  // between them: a bias or a hook's term (LoRA) is added to the product first, so those take the add.
  if (p.q4 < 0 || bias || hook_) return ag::add(residual, linear(x, i, bias));
  return p.trainable ? ag::linear_q4gsw_residual(residual, x, q4_[p.q4], param(i))
                     : ag::linear_q4gsw_residual(residual, x, q4_[p.q4]);
}

ag::Var Llama::rms_norm(const ag::Var& x, size_t gain) const {
  return ag::rms_norm(x, param(gain), config_.norm_eps);
}

ag::Var Llama::hidden(const Tensor& tokens, KVCache* cache) const {
  if (tokens.dtype() != DType::I32 || tokens.rank() != 2)
    throw ArgumentError("Llama: tokens must be int32 [batch, time], got " + std::string(dtype_name(tokens.dtype())) +
                        " " + shape_str(tokens.shape()));
  const LlamaConfig& c = config_;
  const int64_t B = tokens.size(0), T = tokens.size(1), H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim();
  const int64_t pos = cache ? cache->length : 0;
  if (T < 1 || pos + T > c.max_seq_len)
    throw ArgumentError("Llama: positions " + std::to_string(pos) + ".." + std::to_string(pos + T - 1) +
                        " are outside the model's context of " + std::to_string(c.max_seq_len) +
                        " (max_seq_len)");
  if (cache) {
    if (B != cache->batch) throw ArgumentError("Llama: a batch of " + std::to_string(B) + " for a cache of " +
                                               std::to_string(cache->batch));
    if (pos + T > cache->capacity)
      throw ArgumentError("Llama: the KV cache holds " + std::to_string(cache->capacity) + " positions, " +
                          std::to_string(pos + T) + " are needed");
  }
  const int64_t L = pos + T;  // keys attended
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(hd));
  // The rotary rows of positions pos..pos+T-1.
  const Tensor cos = pos == 0 ? rope_cos_ : rope_cos_.slice(0, pos, pos + T);
  const Tensor sin = pos == 0 ? rope_sin_ : rope_sin_.slice(0, pos, pos + T);

  ag::Var x = ag::embedding(param(embedding_), tokens);  // [B, T, dim]
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& P = layers_[l];
    const ag::Var h = rms_norm(x, P.attn_norm);
    ag::Var q = ag::reshape(linear(h, P.q, P.q_bias), {B, T, H, hd});
    ag::Var k = ag::reshape(linear(h, P.k, P.k_bias), {B, T, KV, hd});
    const ag::Var v = ag::reshape(linear(h, P.v, P.v_bias), {B, T, KV, hd});
    if (P.q_norm) q = rms_norm(q, *P.q_norm);
    if (P.k_norm) k = rms_norm(k, *P.k_norm);
    // Queries take the attention's 1 / sqrt(hd) with their rotation.
    q = ag::rope(q, cos, sin, q_scale);
    k = ag::rope(k, cos, sin, 1.0);
    // Causal attention, fused (ops::attention): q [B, T, H, hd] against keys and values [B, L, KV, hd], read
    // where they lie; each KV head serves H / KV consecutive query heads; the scale is already in q.
    ag::Var keys = k, values = v;
    if (cache) {
      // Generation: no gradients; the new positions join the cache [B, KV, capacity, hd], and attention reads
      // its first L positions through a permuted view.
      ops::copy_(cache->k[l].slice(2, pos, L), k.value().permute({0, 2, 1, 3}));
      ops::copy_(cache->v[l].slice(2, pos, L), v.value().permute({0, 2, 1, 3}));
      keys = ag::Var::constant(cache->k[l].slice(2, 0, L).permute({0, 2, 1, 3}));
      values = ag::Var::constant(cache->v[l].slice(2, 0, L).permute({0, 2, 1, 3}));
    }
    const ag::Var merged = ag::attention(q, keys, values, 1.0);  // [B, T, H * hd]
    x = residual_linear(x, merged, P.o, P.o_bias);
    const ag::Var h2 = rms_norm(x, P.mlp_norm);
    x = residual_linear(x, ag::swiglu(linear(h2, P.gate), linear(h2, P.up)), P.down, std::nullopt);
  }
  if (cache) cache->length = L;
  return x;
}

ag::Var Llama::head(const ag::Var& x) const {
  const ag::Var y = rms_norm(x, final_norm_);
  if (!head_) return ag::linear(y, param(embedding_));
  return linear(y, *head_);
}

ag::Var Llama::logits(const Tensor& tokens) const { return head(hidden(tokens, nullptr)); }

KVCache Llama::make_cache(int64_t batch, int64_t capacity) const {
  if (batch < 1 || capacity < 1 || capacity > config_.max_seq_len)
    throw ArgumentError("Llama::make_cache: batch " + std::to_string(batch) + " and capacity " +
                        std::to_string(capacity) + " must be >= 1, capacity <= max_seq_len (" +
                        std::to_string(config_.max_seq_len) + ")");
  KVCache c;
  c.batch = batch;
  c.capacity = capacity;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    c.k.push_back(Tensor::empty(*device_, {batch, config_.n_kv_heads, capacity, config_.head_dim()}));
    c.v.push_back(Tensor::empty(*device_, {batch, config_.n_kv_heads, capacity, config_.head_dim()}));
  }
  return c;
}

Tensor Llama::next_logits(const Tensor& tokens, KVCache& cache) const {
  const ag::Var x = hidden(tokens, &cache);
  const int64_t T = x.size(1);
  const ag::Var last = T == 1 ? x : ag::slice(x, 1, T - 1, T);  // only the last position's head: [B, 1, V]
  const Tensor lg = head(last).value();
  return lg.reshape({lg.size(0), lg.size(2)});
}

ag::Var Llama::loss(const Tensor& tokens, const Tensor& targets, bool overwrite_logits) const {
  const ag::Var lg = logits(tokens);
  const int64_t rows = tokens.numel();
  if (targets.dtype() != DType::I32 || targets.shape() != Shape{rows})
    throw ArgumentError("Llama: targets must be int32 [" + std::to_string(rows) + "], got " +
                        shape_str(targets.shape()));
  return ag::cross_entropy(ag::reshape(lg, {rows, config_.vocab_size}), targets, overwrite_logits);
}

void Llama::zero_grads() {
  if (grads_.defined()) ops::fill_(grads_, 0.0);
}

std::vector<ops::AdamWParam> Llama::adamw_params(const Tensor& m, const Tensor& v) const {
  if (m.shape() != Shape{arena_size()} || v.shape() != Shape{arena_size()})
    throw ArgumentError("Llama::adamw_params: the moments must be arenas of " + std::to_string(arena_size()) +
                        " floats");
  std::vector<ops::AdamWParam> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    if (!p.trainable) continue;
    const int64_t n = numel(p.shape);
    out.push_back({value(i), grad(i), m.slice(0, p.offset, p.offset + n).reshape(p.shape),
                   v.slice(0, p.offset, p.offset + n).reshape(p.shape), p.decay ? -1.0 : 0.0});
  }
  return out;
}

Tensor Llama::train_step(const Tensor& tokens, const Tensor& targets, const ops::AdamW& optimizer) {
  zero_grads();
  std::optional<MemoryScope> phase;
  phase.emplace(*device_, MemoryCategory::Activations);
  const ag::Var l = loss(tokens, targets, /*overwrite_logits=*/true);
  phase.reset();
  phase.emplace(*device_, MemoryCategory::Temporaries);
  ag::backward(l);
  optimizer.update();
  requantize();
  return l.value();
}

uint64_t Llama::weight_bytes() const {
  uint64_t n = static_cast<uint64_t>(arena_size_) * 4;
  for (const Q4Weight& w : q4_) n += static_cast<uint64_t>(w.codes.numel() + w.scales.numel()) * 4;
  for (const Tensor& t : frozen_)
    if (t.defined()) n += static_cast<uint64_t>(t.numel()) * 4;
  return n;
}

void Llama::requantize() {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].q4 >= 0 && params_[i].trainable)
      ops::q4gsw_requant(value(i), q4_[params_[i].q4], config_.recompute_scales);
}

}  // namespace wgtrain
