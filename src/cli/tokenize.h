// wgtrain tokenize: the ids a tokenizer gives a text, as llama.cpp's llama-tokenize prints them.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace wgtrain::cli {

struct TokenizeCliOptions {
  std::string model_dir;       // --model: a model directory (tokenizer.json, tokenizer_config.json, ...)
  std::string tokenizer_file;  // --tokenizer: a tokenizer.json
  std::string text;            // --text
  std::string file;            // --file: the text is this file's contents
  bool pieces = false;         // --pieces: one line per token, its id and its text
  bool no_special = false;     // --no-special: no BOS/EOS or other post-processor tokens
  bool chat = false;           // --chat: the text as a user turn, formatted with the model's chat template
                               // (with the generation prompt), encoded as apply_chat_template(tokenize=True) does
};

// Registers the subcommand and its options on `app`.
CLI::App* add_tokenize_command(CLI::App& app, TokenizeCliOptions& options);
int run_tokenize(const TokenizeCliOptions& options);

}  // namespace wgtrain::cli
