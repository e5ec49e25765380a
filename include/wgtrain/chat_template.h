// Chat templates: the Jinja templates of Hugging Face's tokenizer_config.json ("chat_template"), rendered as
// `transformers`' apply_chat_template(messages, tokenize=False, add_generation_prompt=...) renders them. A small
// interpreter of the Jinja subset these templates use (Llama 2 [INST], Llama 3 headers, Qwen's ChatML with tools
// and thinking); a template that needs more is an Error naming the construct and its line.
//
// Checked against apply_chat_template's output on the real tokenizer configs (tests/fixtures/chat/).
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wgtrain {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
};

class ChatTemplate {
 public:
  // Parses the template now: a syntax error is an Error with its line and column, and so is a tag, filter or test
  // the interpreter lacks. The template sees bos_token and eos_token as transformers passes its special tokens; an
  // empty one is not passed at all (undefined in the template, as for a tokenizer without that token).
  ChatTemplate(const std::string& source, std::string bos_token = "", std::string eos_token = "");
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&);
  ChatTemplate& operator=(const ChatTemplate&);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // The messages as text, as apply_chat_template gives it. A template's raise_exception(...) becomes an
  // ArgumentError with the template's message; any other failure is an Error naming the template line. Safe to
  // call from several threads at once.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // The same with the messages (and any extra variables, e.g. {"enable_thinking": false}) as JSON text: messages
  // is a JSON array of objects, extra a JSON object (or empty). As in apply_chat_template, `tools` and `documents`
  // are none unless extra gives them, and extra may override bos_token / eos_token. Malformed JSON is an
  // ArgumentError.
  std::string apply_json(const std::string& messages_json, bool add_generation_prompt,
                         const std::string& extra_json = "") const;

  // The local time the template's strftime_now(format) formats (transformers: datetime.now()); by default the
  // system clock's. Tests fix it.
  void set_clock(std::function<std::tm()> now);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wgtrain
