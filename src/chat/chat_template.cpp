#include "wgtrain/chat_template.h"

#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_render.h"
#include "wgtrain/error.h"

namespace wgtrain {

struct ChatTemplate::Impl {
  std::shared_ptr<const jinja::Program> program;  // immutable once parsed: copies share it
  std::string bos_token, eos_token;
  jinja::Environment env;

  std::string render(jinja::Value messages, bool add_generation_prompt, const jinja::DictData* extra) const {
    // What apply_chat_template passes: messages, tools, documents, add_generation_prompt, the special tokens
    // the tokenizer has, then the caller's keyword arguments over those.
    jinja::DictData context;
    context.set("messages", std::move(messages));
    context.set("tools", jinja::Value::none());
    context.set("documents", jinja::Value::none());
    context.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
    if (!bos_token.empty()) context.set("bos_token", jinja::Value::string(bos_token));
    if (!eos_token.empty()) context.set("eos_token", jinja::Value::string(eos_token));
    if (extra)
      for (const auto& [k, v] : extra->entries) {
        if (k == "messages" || k == "add_generation_prompt")
          throw ArgumentError("chat template: extra variables cannot set '" + k + "'");
        context.set(k, v);
      }
    jinja::Renderer renderer(env);
    return renderer.render(*program, context);
  }
};

namespace {

nlohmann::ordered_json parse_json(const std::string& text, const char* what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    for (auto& c : msg)
      if (c == '\n') c = ' ';
    throw ArgumentError(std::string("chat template: ") + what + " is not valid JSON: " + msg);
  }
}

jinja::Value to_value(const nlohmann::ordered_json& j, const char* what) {
  try {
    return jinja::from_json(j);
  } catch (const jinja::RenderError& e) {
    throw ArgumentError(std::string("chat template: ") + what + ": " + e.what());
  }
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : impl_(std::make_unique<Impl>(Impl{jinja::parse(source), std::move(bos_token), std::move(eos_token), {}})) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
ChatTemplate& ChatTemplate::operator=(const ChatTemplate& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

void ChatTemplate::set_clock(std::function<std::tm()> now) { impl_->env.now = std::move(now); }

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  jinja::List list;
  list.reserve(messages.size());
  for (const auto& m : messages) {
    jinja::DictData d;
    d.entries.emplace_back("role", jinja::Value::string(m.role));
    d.entries.emplace_back("content", jinja::Value::string(m.content));
    list.push_back(jinja::Value::dict(std::move(d)));
  }
  return impl_->render(jinja::Value::list(std::move(list)), add_generation_prompt, nullptr);
}

std::string ChatTemplate::apply_json(const std::string& messages_json, bool add_generation_prompt,
                                     const std::string& extra_json) const {
  const auto messages = parse_json(messages_json, "messages");
  if (!messages.is_array()) throw ArgumentError("chat template: messages must be a JSON array");
  for (const auto& m : messages)
    if (!m.is_object()) throw ArgumentError("chat template: every message must be a JSON object");
  jinja::DictData extra;
  const bool has_extra = extra_json.find_first_not_of(" \t\r\n") != std::string::npos;
  if (has_extra) {
    const auto e = parse_json(extra_json, "extra variables");
    if (!e.is_object()) throw ArgumentError("chat template: extra variables must be a JSON object");
    extra = to_value(e, "extra variables").dict();
  }
  return impl_->render(to_value(messages, "messages"), add_generation_prompt, has_extra ? &extra : nullptr);
}

}  // namespace wgtrain
