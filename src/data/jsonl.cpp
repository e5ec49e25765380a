// JSONL fine-tuning data, step 1: lines parsed into records (format, fields, line numbers), with the malformed
// ones reported; no tokenizer involved.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "wgtrain/dataset.h"
#include "wgtrain/error.h"

namespace wgtrain::data {

namespace {

using json = nlohmann::json;

// Roles chat templates know; anything else is most likely a typo that would silently drop a turn from the loss.
const std::set<std::string, std::less<>> kRoles = {"system", "developer", "user", "assistant", "tool", "ipython",
                                                    "function"};

// Raised while reading one line; becomes "name:line: message" in the problems.
struct LineProblem {
  std::string message;
};

std::string type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

const std::string& string_field(const json& obj, const char* key, const std::string& where = "") {
  const auto it = obj.find(key);
  if (it == obj.end()) throw LineProblem{where + "no \"" + key + "\" field"};
  if (!it->is_string()) throw LineProblem{where + "\"" + key + "\" is " + type_name(*it) + ", not a string"};
  return it->get_ref<const std::string&>();
}

Record parse_line(std::string_view line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    throw LineProblem{"not valid JSON (" + what + ")"};
  }
  if (!j.is_object()) throw LineProblem{"a JSON " + std::string(j.is_array() ? "array" : "value") +
                                        ", not an object with \"text\", \"prompt\"/\"completion\" or \"messages\""};
  Record r;
  // The precedence of MLX-LM: prompt/completion, then messages, then text.
  if (j.contains("prompt") || j.contains("completion")) {
    r.format = RecordFormat::completion;
    r.prompt = string_field(j, "prompt");
    r.completion = string_field(j, "completion");
  } else if (j.contains("messages")) {
    r.format = RecordFormat::chat;
    const json& m = j.at("messages");
    if (!m.is_array()) throw LineProblem{"\"messages\" is " + type_name(m) + ", not an array"};
    if (m.empty()) throw LineProblem{"\"messages\" is empty"};
    bool extra = false;
    for (size_t i = 0; i < m.size(); ++i) {
      const std::string where = "message " + std::to_string(i + 1) + ": ";
      if (!m[i].is_object()) throw LineProblem{where + type_name(m[i]) + ", not an object"};
      ChatMessage msg{string_field(m[i], "role", where), string_field(m[i], "content", where)};
      if (!kRoles.contains(msg.role))
        throw LineProblem{where + "unknown role \"" + msg.role + "\" (system, user, assistant or tool)"};
      extra = extra || m[i].size() > 2;
      r.messages.push_back(std::move(msg));
      r.message_json.push_back(m[i].dump());
    }
    if (const auto t = j.find("tools"); t != j.end() && !t->is_null()) {
      r.extra_json = json{{"tools", *t}}.dump();
      extra = true;
    }
    if (!extra) r.message_json.clear();  // role and content only: the plain form renders them
  } else if (j.contains("text")) {
    r.format = RecordFormat::text;
    r.text = string_field(j, "text");
  } else {
    std::string keys;
    for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + json(k).dump();
    throw LineProblem{"no \"text\", \"prompt\"/\"completion\" or \"messages\" field" +
                      (keys.empty() ? std::string(" (an empty object)") : " (has " + keys + ")")};
  }
  return r;
}

// The first few problems of a file, quoted on one line.
std::string first_problems(const JsonlFile& file) {
  const size_t shown = std::min<size_t>(3, file.problems.size());
  std::string out;
  for (size_t i = 0; i < shown; ++i) out += (i ? "; " : "") + file.problems[i];
  if (file.problems.size() > shown) out += "; and " + std::to_string(file.problems.size() - shown) + " more";
  return out;
}

}  // namespace

const char* format_name(RecordFormat f) {
  switch (f) {
    case RecordFormat::text:
      return "text";
    case RecordFormat::completion:
      return "completion";
    case RecordFormat::chat:
      return "chat";
  }
  return "?";
}

JsonlFile parse_jsonl(std::string_view text, const std::string& name) {
  JsonlFile out;
  out.name = name;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  bool have_format = false;
  int64_t format_line = 0;
  int64_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    ++out.lines;
    Record r;
    try {
      r = parse_line(line);
    } catch (const LineProblem& p) {
      out.problems.push_back(name + ":" + std::to_string(number) + ": " + p.message);
      continue;
    }
    r.line = number;
    if (!have_format) {
      out.format = r.format;
      format_line = number;
      have_format = true;
    } else if (r.format != out.format) {
      throw Error(name + ":" + std::to_string(number) + ": a \"" + format_name(r.format) + "\" line in a file of \"" +
                  format_name(out.format) + "\" lines (from line " + std::to_string(format_line) +
                  "): use one format per file");
    }
    out.records.push_back(std::move(r));
  }
  if (out.lines == 0) throw Error(name + " is empty: it needs one JSON object per line");
  if (out.records.empty())
    throw Error(name + ": none of its " + std::to_string(out.lines) + " lines is usable: " + first_problems(out));
  return out;
}

void check_malformed(const JsonlFile& file, double max_invalid_fraction) {
  const auto bad = static_cast<double>(file.problems.size());
  if (bad == 0 || bad <= max_invalid_fraction * static_cast<double>(file.lines)) return;
  throw Error(file.name + ": " + std::to_string(file.problems.size()) + " of " + std::to_string(file.lines) +
              " lines are malformed, more than the " + std::to_string(std::lround(max_invalid_fraction * 100)) +
              "% allowed: " + first_problems(file));
}

}  // namespace wgtrain::data
