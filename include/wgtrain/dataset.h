// Fine-tuning data in the formats people already have (MLX-LM's): JSONL files whose lines are
//   {"text": ...}                                  plain text
//   {"prompt": ..., "completion": ...}             a prompt and its completion
//   {"messages": [{"role": ..., "content": ...}]}  a conversation, formatted with the model's chat template
// in a directory with train.jsonl and valid.jsonl (test.jsonl ignored), or one .jsonl file split by the dataset;
// tokenised into examples with a per-token loss mask, and drawn as fixed-shape batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wgtrain {
class Tokenizer;
class ChatTemplate;
}  // namespace wgtrain

namespace wgtrain::data {

struct Example {
  std::vector<int32_t> tokens;  // the whole sequence, with the BOS / EOS tokens its format adds
  std::vector<uint8_t> loss;    // per token: 1 where predicting this token (from the ones before it) counts
};

struct DatasetOptions {
  // Loss only on the completion (prompt/completion) or the assistant turns (messages); else on every token but
  // the first.
  bool mask_prompt = false;
  // Examples longer than this are truncated (and counted in the report).
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
  int64_t train_tokens = 0, valid_tokens = 0, loss_tokens = 0;
  int64_t truncated = 0;
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

// Fixed-shape batches [batch, seq_len] from examples, in epochs shuffled by (seed, epoch): batch `step` depends on
// (seed, step) alone, so a resumed run draws the batches an uninterrupted one would. Padded: each row one example,
// padded with pad_id and ignored targets. Packed: examples concatenated into rows (attention then crosses
// example boundaries inside a row, as with packing elsewhere), targets ignored where the mask says.
class ExampleBatcher {
 public:
  ExampleBatcher(std::vector<Example> examples, int64_t batch, int64_t seq_len, uint64_t seed, bool pack,
                 int32_t pad_id);
  // inputs [batch * seq_len] token ids; targets [batch * seq_len]: the next token where it counts, else -1.
  void batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const;
  int64_t batches_per_epoch() const;

 private:
  std::vector<Example> examples_;
  int64_t batch_, seq_;
  uint64_t seed_;
  bool pack_;
  int32_t pad_;
};

}  // namespace wgtrain::data
