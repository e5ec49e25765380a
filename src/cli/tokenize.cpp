#include "cli/tokenize.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <span>
#include <sstream>

#include "wgtrain/error.h"
#include "wgtrain/chat_template.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain::cli {

namespace {

// A token's text for a terminal: control characters escaped, so each token stays on its line.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

CLI::App* add_tokenize_command(CLI::App& app, TokenizeCliOptions& o) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text (as llama.cpp's llama-tokenize does)");
  auto* model = cmd->add_option("--model", o.model_dir, "a model directory holding tokenizer.json (and its configs)");
  auto* tok = cmd->add_option("--tokenizer", o.tokenizer_file, "a tokenizer.json");
  model->excludes(tok);
  auto* text = cmd->add_option("--text", o.text, "the text to tokenize");
  auto* file = cmd->add_option("--file", o.file, "tokenize this file's contents");
  text->excludes(file);
  cmd->add_flag("--pieces", o.pieces, "one line per token: its id and its text");
  cmd->add_flag("--no-special", o.no_special, "do not add the tokenizer's special tokens (BOS, EOS)");
  cmd->add_flag("--chat", o.chat, "format the text as a user message with the model's chat template first");
  cmd->callback([model, tok, text, file] {
    if (model->count() + tok->count() != 1) throw CLI::RequiredError("--model or --tokenizer");
    if (text->count() + file->count() != 1) throw CLI::RequiredError("--text or --file");
  });
  return cmd;
}

int run_tokenize(const TokenizeCliOptions& o) {
  const Tokenizer t = o.model_dir.empty() ? Tokenizer::load(o.tokenizer_file) : Tokenizer::load_dir(o.model_dir);
  std::string text = o.text;
  if (!o.file.empty()) {
    std::ifstream f(o.file, std::ios::binary);
    if (!f) throw Error("cannot open '" + o.file + "'");
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  std::vector<int32_t> ids;
  if (o.chat) {
    if (t.chat_template().empty()) throw ArgumentError("--chat: this tokenizer has no chat_template");
    const ChatTemplate tmpl(t.chat_template(), t.bos_token(), t.eos_token());
    // The template writes the special tokens itself, as apply_chat_template(tokenize=True) leaves them.
    ids = t.encode(tmpl.apply({{"user", text}}, /*add_generation_prompt=*/true), /*add_special_tokens=*/false);
  } else {
    ids = t.encode(text, !o.no_special);
  }
  if (o.pieces) {
    for (size_t i = 0; i < ids.size(); ++i) {
      // A token's text is what it adds to the decoded text before it (a few tokens of context suffice): decoding it
      // alone would lose the space a SentencePiece decoder strips from the first token.
      const std::span<const int32_t> all(ids);
      const size_t from = i >= 8 ? i - 8 : 0;
      const std::string before = t.decode(all.subspan(from, i - from));
      const std::string with = t.decode(all.subspan(from, i + 1 - from));
      const std::string piece =
          with.compare(0, before.size(), before) == 0 ? with.substr(before.size()) : t.decode(all.subspan(i, 1));
      std::printf("%6d -> '%s'\n", ids[i], printable(piece).c_str());
    }
  } else {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
  }
  return 0;
}

}  // namespace wgtrain::cli
