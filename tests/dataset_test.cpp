// JSONL fine-tuning data: parsing (formats, malformed lines with their numbers, the refusal threshold) and the
// batcher (shapes, determinism in (seed, step), epochs, padded and packed contents, masks as ignored targets).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "wgtrain/dataset.h"
#include "wgtrain/error.h"

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
    const auto row = [&](const std::vector<int32_t>& v) { return std::vector<int32_t>(v.begin() + r * 8, v.begin() + r * 8 + 8); };
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

}  // namespace
}  // namespace wgtrain
