// The Llama-style model: configuration, parameter arenas and initialisation, and the forward pass on the autograd
// tape (its backward comes from the ops' rules).
#include "wgtrain/llama.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <numbers>

#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {

namespace ag = autograd;

// ---- random numbers -------------------------------------------------------------------------------------------------

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SplitMix64::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// ---- configuration --------------------------------------------------------------------------------------------------

void LlamaConfig::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ArgumentError("model config: " + what);
  };
  need(vocab_size >= 2, "vocab_size must be at least 2");
  need(dim > 0 && n_layers > 0 && n_heads > 0 && n_kv_heads > 0, "dim, n_layers, n_heads, n_kv_heads must be > 0");
  need(dim % n_heads == 0, "dim (" + std::to_string(dim) + ") must be a multiple of n_heads (" +
                               std::to_string(n_heads) + ")");
  need(head_dim() % 2 == 0, "the head dim (dim / n_heads = " + std::to_string(head_dim()) +
                                ") must be even for rotary embeddings");
  need(n_heads % n_kv_heads == 0, "n_heads (" + std::to_string(n_heads) + ") must be a multiple of n_kv_heads (" +
                                      std::to_string(n_kv_heads) + ")");
  need(ffn_dim >= 0, "ffn_dim must be >= 0 (0: 8/3 dim)");
  need(max_seq_len > 0, "max_seq_len must be > 0");
  need(norm_eps > 0 && rope_theta > 0, "norm_eps and rope_theta must be > 0");
  need(group_size > 0 && group_size % 8 == 0, "group_size must be a positive multiple of 8 (32, 64, 128)");
  need(!(quantize_head && tie_embeddings), "quantize_head needs an untied head (tie_embeddings false)");
}

int64_t LlamaConfig::parameter_count() const {
  const int64_t hd = head_dim(), kv = n_kv_heads * hd;
  const int64_t block = dim * dim * 2 + kv * dim * 2 + 3 * dim * hidden_dim() + 2 * dim;
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + n_layers * block + dim;
}

std::string LlamaConfig::to_json() const {
  nlohmann::ordered_json j;
  j["vocab_size"] = vocab_size;
  j["dim"] = dim;
  j["n_layers"] = n_layers;
  j["n_heads"] = n_heads;
  j["n_kv_heads"] = n_kv_heads;
  j["ffn_dim"] = hidden_dim();
  j["max_seq_len"] = max_seq_len;
  j["norm_eps"] = norm_eps;
  j["rope_theta"] = rope_theta;
  j["tie_embeddings"] = tie_embeddings;
  j["quantize_blocks"] = quantize_blocks;
  j["quantize_head"] = quantize_head;
  j["group_size"] = group_size;
  j["recompute_scales"] = recompute_scales;
  return j.dump(2);
}

LlamaConfig LlamaConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ArgumentError(std::string("model config: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ArgumentError("model config: expected a JSON object");
  LlamaConfig c;
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "vocab_size") c.vocab_size = value.get<int64_t>();
      else if (key == "dim") c.dim = value.get<int64_t>();
      else if (key == "n_layers") c.n_layers = value.get<int64_t>();
      else if (key == "n_heads") c.n_heads = value.get<int64_t>();
      else if (key == "n_kv_heads") c.n_kv_heads = value.get<int64_t>();
      else if (key == "ffn_dim") c.ffn_dim = value.get<int64_t>();
      else if (key == "max_seq_len") c.max_seq_len = value.get<int64_t>();
      else if (key == "norm_eps") c.norm_eps = value.get<double>();
      else if (key == "rope_theta") c.rope_theta = value.get<double>();
      else if (key == "tie_embeddings") c.tie_embeddings = value.get<bool>();
      else if (key == "quantize_blocks") c.quantize_blocks = value.get<bool>();
      else if (key == "quantize_head") c.quantize_head = value.get<bool>();
      else if (key == "group_size") c.group_size = value.get<int64_t>();
      else if (key == "recompute_scales") c.recompute_scales = value.get<bool>();
      else throw ArgumentError("model config: unknown field '" + key + "'");
    } catch (const nlohmann::json::exception&) {
      throw ArgumentError("model config: field '" + key + "' has the wrong type (" + value.dump() + ")");
    }
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

// ---- the model ------------------------------------------------------------------------------------------------------

namespace {

// The order of one block's parameters; the model's are "tok_embeddings.weight", blocks, "norm.weight", "output.weight".
struct LinearSpec {
  const char* name;
  int64_t out, in;
  bool residual;  // writes into the residual stream: its init is scaled by 1 / sqrt(2 n_layers)
};

}  // namespace

Llama::Llama(Device& device, const LlamaConfig& config, uint64_t seed) : device_(&device), config_(config) {
  config_.validate();
  const LlamaConfig& c = config_;
  const int64_t kv = c.n_kv_heads * c.head_dim(), hidden = c.hidden_dim();
  int64_t total = 0;
  auto add = [&](const std::string& name, Shape shape, bool decay, bool q4) {
    Param p;
    p.name = name;
    p.shape = std::move(shape);
    p.offset = total;
    p.decay = decay;
    if (q4) p.q4 = static_cast<int>(q4_.size()), q4_.emplace_back();
    total += (numel(p.shape) + 3) / 4 * 4;  // 16-byte aligned: AdamW moves vec4s
    params_.push_back(std::move(p));
  };
  add("tok_embeddings.weight", {c.vocab_size, c.dim}, true, false);
  const std::vector<LinearSpec> linears = {{"attention.wq", c.dim, c.dim, false},
                                           {"attention.wk", kv, c.dim, false},
                                           {"attention.wv", kv, c.dim, false},
                                           {"attention.wo", c.dim, c.dim, true},
                                           {"feed_forward.w1", hidden, c.dim, false},
                                           {"feed_forward.w2", c.dim, hidden, true},
                                           {"feed_forward.w3", hidden, c.dim, false}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    add(pre + "attention_norm.weight", {c.dim}, false, false);
    for (const auto& lin : linears) add(pre + lin.name + ".weight", {lin.out, lin.in}, true, c.quantize_blocks);
    add(pre + "ffn_norm.weight", {c.dim}, false, false);
  }
  add("norm.weight", {c.dim}, false, false);
  if (!c.tie_embeddings) add("output.weight", {c.vocab_size, c.dim}, true, c.quantize_head);

  // Initial values, drawn on the host in parameter order so that a seed gives the same model everywhere.
  std::vector<float> host(static_cast<size_t>(total), 0.0f);
  SplitMix64 rng(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers));
  for (const Param& p : params_) {
    float* dst = host.data() + p.offset;
    if (p.shape.size() == 1) {
      std::fill(dst, dst + numel(p.shape), 1.0f);
      continue;
    }
    const bool residual = p.name.find("attention.wo") != std::string::npos ||
                          p.name.find("feed_forward.w2") != std::string::npos;
    const double std = residual ? residual_std : 0.02;
    for (int64_t i = 0; i < numel(p.shape); ++i) dst[i] = static_cast<float>(std * rng.normal());
  }
  values_ = Tensor::from_host(device, {total}, host);
  grads_ = ops::full(device, {total}, 0.0);

  for (const Param& p : params_) {
    if (p.q4 < 0) continue;
    Q4Weight& w = q4_[p.q4];
    const int64_t n = p.shape[0], k = p.shape[1];
    w.in_features = k;
    w.group_size = c.group_size;
    w.codes = Tensor::empty(device, {n, q4gsw::words_per_row(k)}, DType::I32);
    w.scales = Tensor::empty(device, {q4gsw::groups(k, c.group_size), n}, DType::F32);
    // The first scales come from the initial latents, whichever way later steps treat them.
    ops::q4gsw_requant(value(&p - params_.data()), w, /*recompute_scales=*/true);
  }

  // Rotary tables: angle t * theta^(-2i / head_dim), in double, then rounded to float32.
  const int64_t half = c.head_dim() / 2;
  std::vector<float> cs(static_cast<size_t>(c.max_seq_len * half)), sn(cs.size());
  for (int64_t t = 0; t < c.max_seq_len; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim()));
      cs[t * half + i] = static_cast<float>(std::cos(static_cast<double>(t) * freq));
      sn[t * half + i] = static_cast<float>(std::sin(static_cast<double>(t) * freq));
    }
  rope_cos_ = Tensor::from_host(device, {c.max_seq_len, half}, cs);
  rope_sin_ = Tensor::from_host(device, {c.max_seq_len, half}, sn);
}

Tensor Llama::value(size_t i) const {
  const Param& p = params_.at(i);
  return values_.slice(0, p.offset, p.offset + numel(p.shape)).reshape(p.shape);
}

Tensor Llama::grad(size_t i) const {
  const Param& p = params_.at(i);
  return grads_.slice(0, p.offset, p.offset + numel(p.shape)).reshape(p.shape);
}

size_t Llama::index_of(const std::string& name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return i;
  throw ArgumentError("the model has no parameter '" + name + "'");
}

ag::Var Llama::param(size_t i) const { return ag::Var::parameter(value(i), grad(i)); }

ag::Var Llama::linear(const ag::Var& x, size_t i) const {
  const Param& p = params_[i];
  if (p.q4 >= 0) return ag::linear_q4gsw(x, q4_[p.q4], param(i));
  return ag::linear(x, param(i));
}

ag::Var Llama::rms_norm(const ag::Var& x, size_t gain) const {
  return ag::rms_norm(x, param(gain), config_.norm_eps);
}

ag::Var Llama::rope(const ag::Var& x, double scale) const {
  // x [B, T, H, hd]: pairs (i, i + hd/2) rotated by position, as Hugging Face's rotate_half.
  return ag::rope(x, rope_cos_, rope_sin_, scale);
}

ag::Var Llama::logits(const Tensor& tokens) const {
  if (tokens.dtype() != DType::I32 || tokens.rank() != 2)
    throw ArgumentError("Llama: tokens must be int32 [batch, time], got " + std::string(dtype_name(tokens.dtype())) +
                        " " + shape_str(tokens.shape()));
  const LlamaConfig& c = config_;
  const int64_t B = tokens.size(0), T = tokens.size(1), H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim();
  if (T < 1 || T > c.max_seq_len)
    throw ArgumentError("Llama: sequence length " + std::to_string(T) + " is outside 1.." +
                        std::to_string(c.max_seq_len) + " (max_seq_len)");
  const int64_t rep = H / KV;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(hd));

  size_t at = 0;
  const ag::Var emb = param(at++);
  ag::Var x = ag::embedding(emb, tokens);  // [B, T, dim]
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const size_t attn_norm = at++, wq = at++, wk = at++, wv = at++, wo = at++, w1 = at++, w2 = at++, w3 = at++,
                 ffn_norm = at++;
    const ag::Var h = rms_norm(x, attn_norm);
    // Queries take the attention's 1 / sqrt(hd) with their rotation.
    ag::Var q = rope(ag::reshape(linear(h, wq), {B, T, H, hd}), q_scale);
    ag::Var k = rope(ag::reshape(linear(h, wk), {B, T, KV, hd}), 1.0);
    ag::Var v = ag::reshape(linear(h, wv), {B, T, KV, hd});
    // To [B * H, T, hd]; each KV head serves `rep` consecutive query heads.
    q = ag::reshape(ag::permute(q, {0, 2, 1, 3}), {B * H, T, hd});
    auto heads = [&](const ag::Var& kv) {
      const ag::Var p = ag::permute(kv, {0, 2, 1, 3});  // [B, KV, T, hd]
      if (rep == 1) return ag::reshape(p, {B * H, T, hd});
      const ag::Var e = ag::expand(ag::reshape(p, {B, KV, 1, T, hd}), {B, KV, rep, T, hd});
      return ag::reshape(e, {B * H, T, hd});
    };
    k = heads(k);
    v = heads(v);
    // Causal attention: the softmax counts each query's keys up to its own position.
    const ag::Var attn = ag::bmm(ag::softmax(ag::bmm(q, ag::transpose(k, 1, 2)), -1, /*causal=*/true), v);
    const ag::Var merged = ag::reshape(ag::permute(ag::reshape(attn, {B, H, T, hd}), {0, 2, 1, 3}), {B, T, H * hd});
    x = ag::add(x, linear(merged, wo));
    const ag::Var h2 = rms_norm(x, ffn_norm);
    x = ag::add(x, linear(ag::mul(ag::silu(linear(h2, w1)), linear(h2, w3)), w2));
  }
  x = rms_norm(x, at++);
  if (c.tie_embeddings) return ag::linear(x, emb);
  return linear(x, at);
}

ag::Var Llama::loss(const Tensor& tokens, const Tensor& targets, bool overwrite_logits) const {
  const ag::Var lg = logits(tokens);
  const int64_t rows = tokens.numel();
  if (targets.dtype() != DType::I32 || targets.shape() != Shape{rows})
    throw ArgumentError("Llama: targets must be int32 [" + std::to_string(rows) + "], got " +
                        shape_str(targets.shape()));
  return ag::cross_entropy(ag::reshape(lg, {rows, config_.vocab_size}), targets, overwrite_logits);
}

void Llama::zero_grads() { ops::fill_(grads_, 0.0); }

std::vector<ops::AdamWParam> Llama::adamw_params(const Tensor& m, const Tensor& v) const {
  if (m.shape() != Shape{arena_size()} || v.shape() != Shape{arena_size()})
    throw ArgumentError("Llama::adamw_params: the moments must be arenas of " + std::to_string(arena_size()) +
                        " floats");
  std::vector<ops::AdamWParam> out;
  for (const Param& p : params_) {
    const int64_t n = numel(p.shape);
    out.push_back({value(&p - params_.data()), grad(&p - params_.data()),
                   m.slice(0, p.offset, p.offset + n).reshape(p.shape), v.slice(0, p.offset, p.offset + n).reshape(p.shape),
                   p.decay ? -1.0 : 0.0});
  }
  return out;
}

Tensor Llama::train_step(const Tensor& tokens, const Tensor& targets, const ops::AdamW& optimizer) {
  zero_grads();
  const ag::Var l = loss(tokens, targets, /*overwrite_logits=*/true);
  ag::backward(l);
  optimizer.update();
  requantize();
  return l.value();
}

void Llama::requantize() {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].q4 >= 0) ops::q4gsw_requant(value(i), q4_[params_[i].q4], config_.recompute_scales);
}

}  // namespace wgtrain
