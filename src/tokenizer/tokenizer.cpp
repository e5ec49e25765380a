// Tokenizer: tokenizer.json read into the pipeline of src/tokenizer/, encode and decode as `tokenizers` runs them,
// the model directory's tokenizer_config.json and generation_config.json, and streaming decoding.
#include "wgtrain/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"
#include "wgtrain/atomic_file.h"
#include "wgtrain/error.h"

namespace wgtrain {

using nlohmann::json;

struct Tokenizer::Impl {
  // What to_json() gives back: the file as read (or as train_bpe wrote it). Shared: copies of a tokenizer are cheap.
  std::shared_ptr<const std::string> json_text = std::make_shared<const std::string>();
  std::shared_ptr<const tok::Normalizer> normalizer;
  std::shared_ptr<const tok::PreTokenizer> pre_tokenizer;
  std::shared_ptr<const tok::PostProcessor> post_processor;
  std::shared_ptr<const tok::Decoder> decoder;
  std::shared_ptr<const tok::BpeModel> model;
  std::shared_ptr<const tok::AddedVocabulary> added;

  std::optional<int32_t> bos, eos, pad;
  std::vector<int32_t> eos_ids;
  std::string chat_template;

  const std::string* token_of(int32_t id) const {
    if (const std::string* s = added->id_to_token(id)) return s;
    return model->id_to_token(id);
  }
};

namespace {

// The whole file in one read of its size: a stream copy goes through the buffer in small pieces, which in the
// browser (Emscripten's file system) costs a call each.
std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw Error(std::string("cannot open ") + what + " '" + path + "'");
  const std::streamoff size = f.tellg();
  if (size < 0) throw Error(std::string("cannot read ") + what + " '" + path + "'");
  std::string text(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(text.data(), size)) throw Error(std::string("cannot read ") + what + " '" + path + "'");
  return text;
}

json parse_json(std::string_view text, const std::string& origin) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
}

// The id of a conventionally named special token, for tokenizers that do not say which is BOS or EOS.
std::optional<int32_t> conventional(const tok::AddedVocabulary& added, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const auto id = added.token_to_id(n))
      if (added.token(*id) && added.token(*id)->special) return id;
  return std::nullopt;
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {
  impl_->model = std::make_shared<tok::BpeModel>(tok::TokenMap{},
                                                 std::vector<std::pair<std::string, std::string>>{},
                                                 tok::BpeModel::Options{}, tok::JsonPath("", ""));
  impl_->added = std::make_shared<tok::AddedVocabulary>();
}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(const Tokenizer& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Tokenizer& Tokenizer::operator=(const Tokenizer& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::load(const std::string& path) { return from_json(read_file(path, "tokenizer"), path); }

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  tok::ModelTables tables;
  const json j = tok::parse_tokenizer_json(json_text, origin, tables);
  const tok::JsonPath root(origin, "");
  tok::check_fields(j, root,
                    {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                     "post_processor", "decoder", "model"});
  if (j.contains("version") && !(j["version"].is_string() && j["version"] == "1.0"))
    (root / "version").fail("unknown tokenizer.json version " + j["version"].dump() + " (wgtrain reads \"1.0\")");
  for (const char* k : {"truncation", "padding"})
    if (j.contains(k) && !j[k].is_null())
      (root / k).fail(std::string("is set; wgtrain does not ") + (k[0] == 't' ? "truncate" : "pad") +
                      " inside the tokenizer (remove it, or set it to null)");
  if (!j.contains("model")) root.fail("missing \"model\"");

  static const json null_json;
  auto part = [&](const char* k) -> const json& { return j.contains(k) ? j[k] : null_json; };
  Tokenizer t;
  Impl& im = *t.impl_;
  im.json_text = std::make_shared<const std::string>(json_text);
  im.normalizer = tok::make_normalizer(part("normalizer"), root / "normalizer");
  im.pre_tokenizer = tok::make_pre_tokenizer(part("pre_tokenizer"), root / "pre_tokenizer");
  im.post_processor = tok::make_post_processor(part("post_processor"), root / "post_processor");
  im.decoder = tok::make_decoder(part("decoder"), root / "decoder");
  im.model = tok::BpeModel::from_json(j["model"], root / "model", &tables);
  im.added = std::make_shared<tok::AddedVocabulary>(part("added_tokens"), root / "added_tokens", *im.model,
                                                    im.normalizer.get());

  // BOS and EOS as the post-processor places them, else by their conventional names.
  std::vector<int32_t> before, after;
  if (im.post_processor) im.post_processor->single_specials(before, after);
  im.bos = !before.empty() ? std::optional(before.front())
                           : conventional(*im.added, {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"});
  im.eos = !after.empty() ? std::optional(after.back())
                          : conventional(*im.added, {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"});
  if (im.eos) im.eos_ids = {*im.eos};
  return t;
}

Tokenizer Tokenizer::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw Error("model directory '" + dir + "' does not exist");
  const fs::path tj = d / "tokenizer.json";
  if (!fs::exists(tj)) throw Error("'" + dir + "' has no tokenizer.json (wgtrain reads Hugging Face tokenizer.json)");
  Tokenizer t = load(tj.string());
  Impl& im = *t.impl_;

  const fs::path cfg_path = d / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const std::string origin = cfg_path.string();
    const json cfg = parse_json(read_file(origin, "tokenizer config"), origin);
    if (!cfg.is_object()) throw Error(origin + ": expected a JSON object");
    // A special token as a string or an AddedToken object; nullopt when null; its id must exist.
    auto token_id = [&](const char* key) -> std::optional<int32_t> {
      const json& v = cfg[key];
      if (v.is_null()) return std::nullopt;
      std::string content;
      if (v.is_string())
        content = v.get<std::string>();
      else if (v.is_object() && v.contains("content") && v["content"].is_string())
        content = v["content"].get<std::string>();
      else
        throw Error(origin + ": " + key + " should be a string or a token object, got " + v.dump().substr(0, 80));
      const auto id = t.token_to_id(content);
      if (!id) throw Error(origin + ": " + key + " \"" + content + "\" is not in the vocabulary of " + tj.string());
      return id;
    };
    // transformers adds the tokens of added_tokens_decoder that tokenizer.json lacks; wgtrain reads tokenizer.json
    // only, so such a token would be a silent difference: an error instead.
    if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object()) {
      for (const auto& [key, v] : cfg["added_tokens_decoder"].items()) {
        const std::string content = v.is_object() && v.contains("content") && v["content"].is_string()
                                        ? v["content"].get<std::string>()
                                        : std::string();
        const auto id = t.token_to_id(content);
        if (content.empty() || !id || std::to_string(*id) != key)
          throw Error(origin + ": added_tokens_decoder has token " + key + " " + v.dump().substr(0, 80) +
                      ", which " + tj.string() + " does not have with that id (wgtrain takes added tokens from "
                      "tokenizer.json only)");
      }
    }
    if (cfg.contains("bos_token")) im.bos = token_id("bos_token");
    if (cfg.contains("eos_token")) im.eos = token_id("eos_token");
    if (cfg.contains("pad_token")) im.pad = token_id("pad_token");
    im.eos_ids.clear();
    if (im.eos) im.eos_ids.push_back(*im.eos);

    // add_bos_token / add_eos_token decide what encode() adds, as transformers' Llama tokenizers make them do;
    // a side the config does not mention keeps what the post-processor does.
    const bool has_add_bos = cfg.contains("add_bos_token") && !cfg["add_bos_token"].is_null();
    const bool has_add_eos = cfg.contains("add_eos_token") && !cfg["add_eos_token"].is_null();
    if (has_add_bos || has_add_eos) {
      auto flag = [&](const char* key) {
        if (!cfg[key].is_boolean()) throw Error(origin + ": " + key + " should be true or false");
        return cfg[key].get<bool>();
      };
      std::vector<int32_t> before, after;
      if (im.post_processor) im.post_processor->single_specials(before, after);
      std::optional<int32_t> add_bos = before.empty() ? std::nullopt : std::optional(before.front());
      std::optional<int32_t> add_eos = after.empty() ? std::nullopt : std::optional(after.back());
      if (has_add_bos) {
        if (flag("add_bos_token") && !im.bos) throw Error(origin + ": add_bos_token is true but there is no bos_token");
        add_bos = flag("add_bos_token") ? im.bos : std::nullopt;
      }
      if (has_add_eos) {
        if (flag("add_eos_token") && !im.eos) throw Error(origin + ": add_eos_token is true but there is no eos_token");
        add_eos = flag("add_eos_token") ? im.eos : std::nullopt;
      }
      im.post_processor = tok::make_bos_eos_processor(add_bos, add_eos);
    }

    if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        im.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        bool found = false;
        for (const auto& e : ct) {
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) {
            im.chat_template = e["template"].get<std::string>();
            found = true;
          }
        }
        if (!found) throw Error(origin + ": chat_template is a list without a \"default\" template");
      } else {
        throw Error(origin + ": chat_template should be a string or a list of {name, template}");
      }
    }
  }
  // Newer model directories keep the template in a file of its own.
  const fs::path jinja = d / "chat_template.jinja";
  if (im.chat_template.empty() && fs::exists(jinja)) im.chat_template = read_file(jinja.string(), "chat template");

  const fs::path gen_path = d / "generation_config.json";
  if (fs::exists(gen_path)) {
    const std::string origin = gen_path.string();
    const json gen = parse_json(read_file(origin, "generation config"), origin);
    if (gen.is_object() && gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
      const json& e = gen["eos_token_id"];
      std::vector<int32_t> ids;
      if (e.is_number_integer()) {
        ids.push_back(e.get<int32_t>());
      } else if (e.is_array()) {
        for (const auto& x : e) {
          if (!x.is_number_integer()) throw Error(origin + ": eos_token_id should be an id or a list of ids");
          ids.push_back(x.get<int32_t>());
        }
      } else {
        throw Error(origin + ": eos_token_id should be an id or a list of ids");
      }
      for (int32_t id : ids) {
        if (id < 0 || id >= t.vocab_size())
          throw Error(origin + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary");
        if (std::find(im.eos_ids.begin(), im.eos_ids.end(), id) == im.eos_ids.end()) im.eos_ids.push_back(id);
      }
      if (!im.eos && !ids.empty()) im.eos = ids.front();
    }
  }
  return t;
}

std::string Tokenizer::to_json() const { return *impl_->json_text; }

void Tokenizer::save(const std::string& path) const { write_file_atomic(path, *impl_->json_text); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  // Text that is not valid UTF-8 is read as from_utf8_lossy reads it (`tokenizers` only takes valid strings).
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Piece> pieces;
  for (const auto& seg : im.added->split(text, false)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    const auto [b, e] = seg.span;
    if (b == e) continue;
    std::string normalized(text.substr(b, e - b));
    if (im.normalizer) im.normalizer->normalize(normalized);
    for (const auto& seg2 : im.added->split(normalized, true)) {
      if (seg2.id >= 0) {
        ids.push_back(seg2.id);
        continue;
      }
      const auto [b2, e2] = seg2.span;
      if (b2 == e2) continue;
      pieces.clear();
      pieces.push_back(tok::Piece{normalized.substr(b2, e2 - b2), b == 0 && b2 == 0});
      if (im.pre_tokenizer) im.pre_tokenizer->pre_tokenize(pieces);
      for (const auto& p : pieces) im.model->tokenize(p.text, ids);
    }
  }
  if (im.post_processor) im.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* s = im.token_of(id);
    if (!s)
      throw ArgumentError("token id " + std::to_string(id) + " is not in the vocabulary (" +
                          std::to_string(vocab_size()) + " ids)");
    if (skip_special_tokens && im.added->is_special_token(*s)) continue;
    tokens.push_back(*s);
  }
  if (!im.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  im.decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

int64_t Tokenizer::vocab_size() const { return std::max(impl_->model->max_id(), impl_->added->max_id()) + 1; }

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* s = impl_->token_of(id);
  if (!s) throw ArgumentError("token id " + std::to_string(id) + " is not in the vocabulary");
  return *s;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added->token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

bool Tokenizer::is_special(int32_t id) const {
  const tok::AddedToken* t = impl_->added->token(id);
  return t && t->special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->eos_ids; }
std::string Tokenizer::bos_token() const { return impl_->bos ? id_to_token(*impl_->bos) : ""; }
std::string Tokenizer::eos_token() const { return impl_->eos ? id_to_token(*impl_->eos) : ""; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tok_(&tokenizer), skip_special_(skip_special_tokens) {}

namespace {

// Where a run of U+FFFD at the end of s begins: they may be a character whose bytes have not all arrived.
size_t trailing_replacement_start(const std::string& s) {
  static constexpr std::string_view kFffd = "\xEF\xBF\xBD";
  size_t end = s.size();
  while (end >= kFffd.size() && std::string_view(s).substr(end - kFffd.size(), kFffd.size()) == kFffd)
    end -= kFffd.size();
  return end;
}

}  // namespace

std::string StreamingDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string text = tok_->decode(ids_, skip_special_);
  const size_t ready = trailing_replacement_start(text);
  if (ready <= emitted_) return "";
  std::string out = text.substr(emitted_, ready - emitted_);
  if (ready == text.size()) {
    // Everything is out: this chunk's ids become the context of the next decodes, the older ones go.
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(chunk_begin_));
    emitted_ = tok_->decode(ids_, skip_special_).size();
    chunk_begin_ = ids_.size();
  } else {
    emitted_ = ready;
  }
  return out;
}

std::string StreamingDecoder::finish() {
  const std::string text = tok_->decode(ids_, skip_special_);
  std::string out = emitted_ < text.size() ? text.substr(emitted_) : "";
  ids_.clear();
  emitted_ = chunk_begin_ = 0;
  return out;
}

}  // namespace wgtrain
