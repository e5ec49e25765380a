// Text generation: prompt formatting, prefill and decode through the KV cache, greedy and top-k sampling, EOS,
// streaming text that never splits a UTF-8 character.
#include "wgtrain/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "wgtrain/chat_template.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/random.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

namespace fs = std::filesystem;

std::unique_ptr<Llama> load_run_model(Device& device, const std::string& run_dir, Trainable trainable) {
  const fs::path ckpt = fs::path(run_dir) / "checkpoint.safetensors";
  if (!fs::exists(ckpt))
    throw Error("'" + run_dir + "' is neither a wgtrain run (no checkpoint.safetensors) nor a Hugging Face model "
                "directory (no config.json with model.safetensors)");
  const CheckpointInfo info = read_checkpoint_info(ckpt.string());
  check_run_files(run_dir, info);
  auto model = std::make_unique<Llama>(device, info.config, Llama::NoInit{}, trainable);
  load_checkpoint(ckpt.string(), *model, nullptr, nullptr);
  return model;
}

Generator::Generator(Device& device, const std::string& dir, const hf::ImportOptions& import,
                     const std::string& adapter_dir) {
  if (hf::is_model_dir(dir)) {
    owned_model_ = hf::load_model(device, dir, import, &report_);
    owned_tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load_dir(dir));
  } else {
    owned_model_ = load_run_model(device, dir, Trainable::None);
    owned_tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load_dir(dir));
    if (owned_tokenizer_->vocab_size() > owned_model_->config().vocab_size)
      throw Error("the tokenizer in '" + dir + "' has " + std::to_string(owned_tokenizer_->vocab_size()) +
                  " tokens and the model only " + std::to_string(owned_model_->config().vocab_size) +
                  ": they come from different runs");
  }
  if (!adapter_dir.empty()) {
    adapters_ = load_peft(*owned_model_, adapter_dir);
    owned_model_->set_linear_hook(adapters_.get());
  }
  model_ = owned_model_.get();
  tokenizer_ = owned_tokenizer_.get();
}

Generator::Generator(const Llama& model, const Tokenizer& tokenizer) : model_(&model), tokenizer_(&tokenizer) {}

Generator::~Generator() {
  if (owned_model_) owned_model_->set_linear_hook(nullptr);
}

std::vector<int32_t> Generator::prompt_ids(const GenerateOptions& o) const {
  if (o.chat) {
    if (tokenizer_->chat_template().empty())
      throw ArgumentError("--chat: this model's tokenizer_config.json has no chat_template");
    const ChatTemplate tmpl(tokenizer_->chat_template(), tokenizer_->bos_token(), tokenizer_->eos_token());
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", o.prompt});
    // The template writes its own BOS where the model wants one, as apply_chat_template(tokenize=True) leaves it.
    return tokenizer_->encode(tmpl.apply(messages, /*add_generation_prompt=*/true), /*add_special_tokens=*/false);
  }
  if (!o.system.empty()) throw ArgumentError("a system message needs --chat");
  std::vector<int32_t> ids = tokenizer_->encode(o.prompt, /*add_special_tokens=*/true);
  if (ids.empty()) {  // nothing to condition on: start from BOS, or from a line break
    if (auto bos = tokenizer_->bos_id()) ids.push_back(*bos);
    else ids = tokenizer_->encode("\n", false);
  }
  return ids;
}

std::vector<int32_t> Generator::generate_ids(const std::vector<int32_t>& prompt_in, const GenerateOptions& o,
                                             const std::function<void(int32_t)>& on_token) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    throw ArgumentError("temperature must be a number >= 0, got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw ArgumentError("top-k must be >= 0 (0: the whole vocabulary)");
  if (o.max_tokens < 0) throw ArgumentError("max-tokens must be >= 0");
  const LlamaConfig& c = model_->config();
  const int64_t V = c.vocab_size;
  if (prompt_in.empty()) throw ArgumentError("generate: an empty prompt");
  for (int32_t id : prompt_in)
    if (id < 0 || id >= V)
      throw ArgumentError("generate: prompt token " + std::to_string(id) + " is outside the model's vocabulary of " +
                          std::to_string(V));
  // The context holds prompt and new tokens; a prompt too long for it keeps its end.
  const int64_t room = std::max<int64_t>(1, c.max_seq_len - o.max_tokens);
  const std::vector<int32_t> prompt(
      prompt_in.end() - std::min<int64_t>(static_cast<int64_t>(prompt_in.size()), room), prompt_in.end());
  const int64_t steps = std::min<int64_t>(o.max_tokens, c.max_seq_len - static_cast<int64_t>(prompt.size()));
  stats_ = {};
  stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> out;
  if (steps <= 0) return out;
  const std::vector<int32_t> eos = o.stop_at_eos ? tokenizer_->eos_ids() : std::vector<int32_t>{};
  Device& device = model_->device();
  KVCache cache = model_->make_cache(1, static_cast<int64_t>(prompt.size()) + steps);
  SplitMix64 rng(o.seed);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Tensor logits = model_->next_logits(Tensor::from_host(device, {1, static_cast<int64_t>(prompt.size())}, prompt), cache);
  std::vector<std::pair<float, int32_t>> cand(static_cast<size_t>(V));
  for (int64_t n = 0; n < steps; ++n) {
    const std::vector<float> l = logits.to_host_f32();
    if (n == 0) stats_.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count(), t0 = clock::now();
    int32_t next = 0;
    if (o.temperature == 0) {
      // Greedy: the first of the largest logits, as torch.argmax picks.
      next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    } else {
      for (int64_t v = 0; v < V; ++v) cand[v] = {l[v], static_cast<int32_t>(v)};
      const int64_t k = o.top_k > 0 ? std::min<int64_t>(o.top_k, V) : V;
      std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                        [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      double z = 0;
      std::vector<double> w(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) z += w[i] = std::exp((cand[i].first - cand[0].first) / o.temperature);
      double u = rng.uniform() * z;
      next = cand[k - 1].second;
      for (int64_t i = 0; i < k; ++i)
        if ((u -= w[i]) <= 0) {
          next = cand[i].second;
          break;
        }
    }
    out.push_back(next);
    if (on_token) on_token(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
      stats_.stopped_at_eos = true;
      break;
    }
    if (n + 1 < steps) logits = model_->next_logits(Tensor::from_host(device, {1, 1}, std::vector<int32_t>{next}), cache);
  }
  stats_.new_tokens = static_cast<int64_t>(out.size());
  stats_.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return out;
}

std::string Generator::generate(const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  StreamingDecoder decoder(*tokenizer_, /*skip_special_tokens=*/true);
  std::string text;
  const int64_t known = tokenizer_->vocab_size();
  generate_ids(prompt_ids(o), o, [&](int32_t id) {
    if (id >= known) return;  // a model row the tokenizer has no token for: no text
    const std::string piece = decoder.push(id);
    text += piece;
    if (on_text && !piece.empty()) on_text(piece);
  });
  const std::string rest = decoder.finish();
  text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  return text;
}

}  // namespace wgtrain
