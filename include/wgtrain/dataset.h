// Fine-tuning data in the formats people already have (MLX-LM's): JSONL files whose lines are
//   {"text": ...}                                  plain text
//   {"prompt": ..., "completion": ...}             a prompt and its completion
//   {"messages": [{"role": ..., "content": ...}]}  a conversation, formatted with the model's chat template
// in a directory with train.jsonl and valid.jsonl (test.jsonl ignored), or one .jsonl file split by the dataset;
// tokenised into examples with a per-token loss mask, and drawn as fixed-shape batches.
//
// Tokenisation, per format:
//   text        encode(text) with the tokenizer's special tokens (BOS where it adds one), then EOS if the ids do not
//               already end with an end-of-sequence id (as MLX-LM).
//   completion  with a chat template: the conversation [user: prompt, assistant: completion], as "messages". Without
//               one: encode(prompt + completion) as text (BOS, EOS added the same way); the prompt is the longest
//               common prefix of those ids and encode(prompt), so a token straddling the boundary is a target.
//   messages    the template's text encoded without adding special tokens (the template writes BOS itself, as
//               `apply_chat_template(tokenize=True)`); EOS is appended only when the last assistant turn holds no
//               special token (a template that closes no turn), else the template's end-of-turn token ends it.
// Masks (mask_prompt): the completion's tokens, or each assistant turn's: from the end of messages[:i] rendered
// with the generation prompt to the end of messages[:i+1]. When those renderings are not token prefixes of the whole
// conversation (templates that rewrite earlier turns once the conversation goes on, e.g. Qwen3's thinking blocks),
// only the last assistant turn is a target for that conversation (counted in DatasetReport::mask_fallbacks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wgtrain/chat_template.h"

namespace wgtrain {
class Tokenizer;
}  // namespace wgtrain

namespace wgtrain::data {

struct Example {
  std::vector<int32_t> tokens;  // the whole sequence, with the BOS / EOS tokens its format adds
  std::vector<uint8_t> loss;    // per token: 1 where predicting this token (from the ones before it) counts
};

struct DatasetOptions {
  // Loss only on the completion (prompt/completion) or the assistant turns (messages); else on every token but
  // the first. An Error for "text" data, which has no prompt.
  bool mask_prompt = false;
  // Examples longer than this are truncated (and counted in the report). A batch row of seq_len inputs predicts up
  // to seq_len + 1 tokens of an example, so seq_len + 1 loses nothing to the batcher.
  int64_t max_seq_len = 2048;
  // A single file is split: this fraction of its examples (at least one) goes to validation, chosen by `seed`.
  double valid_fraction = 0.05;
  uint64_t seed = 1;
  // A file with more than this fraction of malformed lines is refused (each malformed line is reported).
  double max_invalid_fraction = 0.1;
};

struct DatasetReport {
  std::string format;  // "text", "completion", "chat"
  int64_t train_examples = 0, valid_examples = 0;
  int64_t train_tokens = 0, valid_tokens = 0, loss_tokens = 0;  // loss_tokens: targets in the training examples
  int64_t truncated = 0;                                        // examples cut to max_seq_len (both splits)
  // Conversations whose turns the template renders differently once the conversation goes on: only their last
  // assistant turn is a target (mask_prompt only).
  int64_t mask_fallbacks = 0;
  // "train.jsonl:17: ..." for each malformed line (skipped).
  std::vector<std::string> problems;
};

struct Dataset {
  std::vector<Example> train, valid;
  DatasetReport report;
};

// Reads `path` (a directory with train.jsonl and valid.jsonl, or one .jsonl file). The chat template is needed
// only for "messages" lines (an Error otherwise). Throws Error naming the file and line for an unusable dataset.
Dataset load_dataset(const std::string& path, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
                     const DatasetOptions& options);

// ---- the steps of load_dataset ---------------------------------------------------------------------------------

enum class RecordFormat { text, completion, chat };
const char* format_name(RecordFormat f);  // "text", "completion", "chat"

// One usable line of a JSONL file, not yet tokenised.
struct Record {
  int64_t line = 0;  // 1-based
  RecordFormat format = RecordFormat::text;
  std::string text;                   // text
  std::string prompt, completion;     // completion
  std::vector<ChatMessage> messages;  // chat: role and content of each message
  // chat: each message as JSON text (fields beyond role and content kept, e.g. tool_calls), and {"tools": ...}
  // when the line has tools; "" when there is nothing beyond role and content.
  std::vector<std::string> message_json;
  std::string extra_json;
};

struct JsonlFile {
  std::string name;  // as problems name it
  RecordFormat format = RecordFormat::text;
  int64_t lines = 0;  // non-blank lines, usable or not
  std::vector<Record> records;
  std::vector<std::string> problems;  // "name:line: what is wrong", one per malformed line
};

// The lines of a JSONL text: the format from the first usable line; a usable line of another format is an Error
// naming it; malformed lines (not JSON, not an object, fields missing or not strings, no messages, an unknown
// role) are listed in problems and skipped; blank lines are ignored. Throws Error for a text with no usable line.
JsonlFile parse_jsonl(std::string_view text, const std::string& name);
// Throws Error, quoting the first problems, when more than max_invalid_fraction of the file's lines are malformed.
void check_malformed(const JsonlFile& file, double max_invalid_fraction);

// One record tokenised as the header comment says. Throws ArgumentError where the chat template refuses the
// messages (its raise_exception). *mask_fallback (if given) is set when the record's masks fell back to the last
// assistant turn. Does not truncate.
Example tokenize_record(const Record& record, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
                        bool mask_prompt, bool* mask_fallback = nullptr);

// ---- batches ---------------------------------------------------------------------------------------------------

// Fixed-shape batches [batch, seq_len] from examples, in epochs shuffled by (seed, epoch): batch `step` depends on
// (seed, step) alone, so a resumed run draws the batches an uninterrupted one would. Padded: each row one example,
// padded with pad_id and ignored targets. Packed: examples concatenated into rows (attention then crosses
// example boundaries inside a row, as with packing elsewhere), targets ignored where the mask says.
//
// A row's target at position i is the example's token i + 1 where its loss mask is 1, else -1; so a row of seq_len
// holds an example's first seq_len + 1 tokens (longer ones are cut: load with max_seq_len <= seq_len + 1 to have
// them counted). Packed rows are made once, best fit decreasing by length: an example that does not fit the room
// left in any row starts a new one (examples are never split); a row's examples follow each other, each taking as
// many positions as it has tokens, its last token's target -1 (the next example's first token is never a target).
// Rows are the units an epoch shuffles; a batch may take its rows from the end of one epoch and the start of the
// next.
class ExampleBatcher {
 public:
  ExampleBatcher(std::vector<Example> examples, int64_t batch, int64_t seq_len, uint64_t seed, bool pack,
                 int32_t pad_id);
  // inputs [batch * seq_len] token ids; targets [batch * seq_len]: the next token where it counts, else -1.
  void batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const;
  // Steps that show every row at least once: ceil(rows / batch).
  int64_t batches_per_epoch() const;
  // Rows an epoch shuffles: the examples (padded), or the packed rows.
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }

 private:
  std::vector<Example> examples_;
  int64_t batch_, seq_;
  uint64_t seed_;
  bool pack_;
  int32_t pad_;
  std::vector<std::vector<int64_t>> rows_;  // example indices of each row
  // The row order of one epoch, kept for the epoch in use.
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> order_;
  void prepare(int64_t epoch) const;
  void fill_row(int64_t row, int32_t* inputs, int32_t* targets) const;
};

}  // namespace wgtrain::data
