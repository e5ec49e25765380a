// Tokenizers exactly as Hugging Face's `tokenizers` library runs them, read from (and written to) its
// tokenizer.json: a normalizer, a pre-tokenizer, a BPE model, a post-processor and a decoder, plus added and special
// tokens. Covers the byte-level BPE of GPT-2, Llama 3 and Qwen2/3 (Split with their Unicode regexes, then
// ByteLevel) and the SentencePiece-style BPE with byte fallback of Llama 2, TinyLlama and Mistral (Metaspace, or
// Replace + Prepend normalizers; ByteFallback decoder). Anything else in a tokenizer.json is an Error naming it.
//
// Parity with the real library is checked token for token on real vocabularies (tests/tokenizer_test.cpp, against
// ids made by `tokenizers` itself: tests/fixtures/tokenizers/).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wgtrain {

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // A tokenizer.json file (or its text). Throws Error naming the file and the field it cannot use.
  static Tokenizer load(const std::string& path);
  static Tokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");
  // A model directory: tokenizer.json, with tokenizer_config.json (bos/eos/pad tokens, add_bos_token,
  // add_eos_token, chat_template) and generation_config.json (eos_token_id, possibly a list) where present.
  // add_bos_token / add_eos_token, where the config sets them, decide whether encode() puts BOS / EOS around the
  // text (as transformers' Llama tokenizers do), in place of what tokenizer.json's post-processor adds on that side.
  // A chat_template.jinja file beside them is the template when the config has none.
  static Tokenizer load_dir(const std::string& dir);

  // The tokenizer.json text (written by save(), atomically) that Hugging Face's library loads.
  std::string to_json() const;
  void save(const std::string& path) const;

  // Ids of `text` as `tokenizer(text)` gives them: added/special tokens matched first, then normalizer,
  // pre-tokenizer and model; with add_special_tokens, the post-processor's tokens (e.g. BOS) around them.
  // Bytes that are not valid UTF-8 are read as U+FFFD first (as Python would have to). Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Text of ids as `tokenizer.decode(ids, skip_special_tokens=...)` gives it. Throws ArgumentError on an id out of
  // range. Bytes that do not form valid UTF-8 become U+FFFD, as Hugging Face's decoding does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The vocabulary: the number of ids (the largest id + 1, added tokens included), an id's token string as the
  // vocabulary spells it ("Ġthe", "▁the", "<0x0A>", "<|eot_id|>"), and the id of a token string.
  int64_t vocab_size() const;
  std::string id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  // From tokenizer_config.json / generation_config.json where loaded with load_dir (else from the post-processor
  // and added tokens where they say). eos_ids: every id that ends generation.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::vector<int32_t> eos_ids() const;
  std::string bos_token() const;  // "" when none
  std::string eos_token() const;
  // The Jinja chat template of tokenizer_config.json ("" when it has none).
  const std::string& chat_template() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Decodes a growing sequence of ids piece by piece (generation): each call returns the new text, holding back the
// bytes of a UTF-8 character that is not complete yet, so the pieces never split a character and their
// concatenation equals decode() of all the ids.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true);
  std::string push(int32_t id);
  std::string finish();  // what is held back, with U+FFFD for an incomplete character

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  // A window of the ids: the last returned chunk's (context for decoders that treat the first token apart) and
  // those after it, so each push decodes a few ids rather than all of them.
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;      // bytes of decode(ids_) already returned
  size_t chunk_begin_ = 0;  // where in ids_ the ids not yet returned in full begin
};

// wgtrain's own byte-level BPE, trained on a corpus for models trained from scratch: learns merges until the
// vocabulary holds vocab_size ids (>= 256) or no pair occurs twice, and returns it as a Tokenizer whose
// tokenizer.json Hugging Face's library loads and encodes identically.
// special_tokens (e.g. "<|endoftext|>", "<|im_start|>", "<|im_end|>") become special added tokens with the ids
// after the learned ones; vocab_size counts them.
Tokenizer train_bpe(std::string_view text, int vocab_size, const std::vector<std::string>& special_tokens = {});

}  // namespace wgtrain
