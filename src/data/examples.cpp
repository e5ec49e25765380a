// JSONL fine-tuning data, step 2: records tokenised into examples with loss masks (text, completion, chat through
// the chat template), and load_dataset: files read, checked, tokenised, truncated and split.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "wgtrain/dataset.h"
#include "wgtrain/error.h"
#include "wgtrain/random.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain::data {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// ---- tokenising ----------------------------------------------------------------------------------------------

bool is_eos(const Tokenizer& tok, int32_t id) {
  const auto ids = tok.eos_ids();
  return std::find(ids.begin(), ids.end(), id) != ids.end() || tok.eos_id() == id;
}

void append_eos_if_missing(const Tokenizer& tok, std::vector<int32_t>& ids) {
  if (const auto eos = tok.eos_id(); eos && (ids.empty() || !is_eos(tok, ids.back()))) ids.push_back(*eos);
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// Whether `prefix` is a token prefix of `full`.
bool lines_up(const std::vector<int32_t>& prefix, const std::vector<int32_t>& full) {
  return prefix.size() <= full.size() && common_prefix(prefix, full) == prefix.size();
}

// The first n messages through the chat template.
std::string render(const Record& r, const ChatTemplate& tmpl, size_t n, bool generation_prompt) {
  if (r.message_json.empty()) {
    const std::vector<ChatMessage> head(r.messages.begin(), r.messages.begin() + static_cast<ptrdiff_t>(n));
    return tmpl.apply(head, generation_prompt);
  }
  std::string arr = "[";
  for (size_t i = 0; i < n; ++i) arr += (i ? "," : "") + r.message_json[i];
  return tmpl.apply_json(arr + "]", generation_prompt, r.extra_json);
}

Example tokenize_chat(const Record& r, const Tokenizer& tok, const ChatTemplate& tmpl, bool mask_prompt,
                      bool* fallback) {
  // As apply_chat_template(tokenize=True): the template writes BOS itself, the tokenizer adds nothing.
  auto encode = [&](size_t n, bool gen) { return tok.encode(render(r, tmpl, n, gen), false); };
  Example ex;
  ex.tokens = encode(r.messages.size(), false);
  const size_t n = ex.tokens.size();
  ex.loss.assign(n, mask_prompt ? 0 : 1);

  std::vector<size_t> turns;  // the assistant messages (the last only without masking: for the EOS check)
  for (size_t i = 0; i < r.messages.size(); ++i)
    if (r.messages[i].role == "assistant") turns.push_back(i);
  if (!mask_prompt && turns.size() > 1) turns.erase(turns.begin(), turns.end() - 1);

  // Each turn as a token span [begin, end): from the end of the generation prompt to the end of the turn.
  std::vector<std::pair<size_t, size_t>> spans;
  bool aligned = true;
  for (size_t i : turns) {
    try {
      const auto before = encode(i, true), through = encode(i + 1, false);
      aligned = aligned && lines_up(before, ex.tokens) && lines_up(through, ex.tokens) &&
                before.size() <= through.size();
      spans.emplace_back(before.size(), through.size());
    } catch (const ArgumentError&) {
      aligned = false;  // the template refuses a prefix (e.g. one that does not end with a user turn)
    }
  }
  if (!aligned) {
    // Only the last assistant turn: from where its prompt stops lining up with the conversation, to the end of its
    // own rendering if that lines up, else to the end.
    const size_t last = turns.back();
    size_t begin = 0, end = n;
    try {
      begin = common_prefix(encode(last, true), ex.tokens);
    } catch (const ArgumentError&) {
    }
    try {
      if (const auto through = encode(last + 1, false); lines_up(through, ex.tokens) && through.size() >= begin)
        end = through.size();
    } catch (const ArgumentError&) {
    }
    spans = {{begin, end}};
    if (fallback) *fallback = mask_prompt;
  }
  if (mask_prompt)
    for (const auto& [b, e] : spans)
      std::fill(ex.loss.begin() + static_cast<ptrdiff_t>(b), ex.loss.begin() + static_cast<ptrdiff_t>(e), 1);

  // A template that closes the last turn with no special token (end-of-turn or EOS) would never teach the model to
  // stop: EOS then ends the sequence, a target where the turn is.
  if (!spans.empty() && spans.back().second == n && n > 0) {
    const bool closed = std::any_of(ex.tokens.begin() + static_cast<ptrdiff_t>(spans.back().first), ex.tokens.end(),
                                    [&](int32_t id) { return tok.is_special(id) || is_eos(tok, id); });
    if (const auto eos = tok.eos_id(); !closed && eos) {
      ex.tokens.push_back(*eos);
      ex.loss.push_back(ex.loss.back() || !mask_prompt);
    }
  }
  if (!ex.loss.empty()) ex.loss[0] = 0;
  return ex;
}

}  // namespace

Example tokenize_record(const Record& r, const Tokenizer& tok, const ChatTemplate* chat_template, bool mask_prompt,
                        bool* mask_fallback) {
  if (mask_fallback) *mask_fallback = false;
  if (r.format == RecordFormat::chat || (r.format == RecordFormat::completion && chat_template)) {
    if (!chat_template)
      throw Error("\"messages\" data needs the model's chat template, and this tokenizer has none");
    if (r.format == RecordFormat::chat) return tokenize_chat(r, tok, *chat_template, mask_prompt, mask_fallback);
    Record conv;
    conv.format = RecordFormat::chat;
    conv.messages = {{"user", r.prompt}, {"assistant", r.completion}};
    return tokenize_chat(conv, tok, *chat_template, mask_prompt, mask_fallback);
  }
  Example ex;
  if (r.format == RecordFormat::text) {
    ex.tokens = tok.encode(r.text, true);
    append_eos_if_missing(tok, ex.tokens);
    ex.loss.assign(ex.tokens.size(), 1);
  } else {
    ex.tokens = tok.encode(r.prompt + r.completion, true);
    append_eos_if_missing(tok, ex.tokens);
    ex.loss.assign(ex.tokens.size(), 1);
    if (mask_prompt) {
      const size_t prompt = common_prefix(tok.encode(r.prompt, true), ex.tokens);
      std::fill(ex.loss.begin(), ex.loss.begin() + static_cast<ptrdiff_t>(prompt), 0);
    }
  }
  if (!ex.loss.empty()) ex.loss[0] = 0;
  return ex;
}

namespace {

// Tokenises a file's records (a record the template refuses becomes a problem), truncates, and refuses the file
// if too many of its lines are unusable.
std::vector<Example> tokenize_file(JsonlFile& file, const Tokenizer& tok, const ChatTemplate* tmpl,
                                   const DatasetOptions& o, DatasetReport& report,
                                   std::vector<int64_t>* lines = nullptr) {
  if (o.mask_prompt && file.format == RecordFormat::text)
    throw Error(file.name + " has \"text\" lines, which have no prompt to mask: use prompt/completion or messages "
                "lines, or train without prompt masking");
  if (file.format == RecordFormat::chat && !tmpl)
    throw Error(file.name + " has \"messages\" lines, which need a chat template, and the tokenizer has none "
                "(tokenizer_config.json has no chat_template)");
  std::vector<Example> out;
  out.reserve(file.records.size());
  for (const Record& r : file.records) {
    bool fallback = false;
    Example ex;
    try {
      ex = tokenize_record(r, tok, tmpl, o.mask_prompt, &fallback);
    } catch (const ArgumentError& e) {
      file.problems.push_back(file.name + ":" + std::to_string(r.line) + ": the chat template refuses it: " +
                              e.what());
      continue;
    }
    if (ex.tokens.empty()) {
      file.problems.push_back(file.name + ":" + std::to_string(r.line) + ": no tokens");
      continue;
    }
    report.mask_fallbacks += fallback && o.mask_prompt;
    if (static_cast<int64_t>(ex.tokens.size()) > o.max_seq_len) {
      ex.tokens.resize(static_cast<size_t>(o.max_seq_len));
      ex.loss.resize(ex.tokens.size());
      ++report.truncated;
    }
    out.push_back(std::move(ex));
    if (lines) lines->push_back(r.line);
  }
  // Problems in line order: the template's refusals were found after the parser's.
  std::stable_sort(file.problems.begin(), file.problems.end(), [&](const std::string& a, const std::string& b) {
    return std::stoll(a.substr(file.name.size() + 1)) < std::stoll(b.substr(file.name.size() + 1));
  });
  check_malformed(file, o.max_invalid_fraction);
  report.problems.insert(report.problems.end(), file.problems.begin(), file.problems.end());
  return out;
}

void count(const std::vector<Example>& examples, int64_t& n, int64_t& tokens, int64_t* loss) {
  n = static_cast<int64_t>(examples.size());
  for (const Example& e : examples) {
    tokens += static_cast<int64_t>(e.tokens.size());
    if (loss)
      for (uint8_t l : e.loss) *loss += l;
  }
}

}  // namespace

Dataset load_dataset(const std::string& path, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
                     const DatasetOptions& o) {
  namespace fs = std::filesystem;
  if (o.max_seq_len < 2) throw ArgumentError("load_dataset: max_seq_len must be at least 2");
  if (!(o.valid_fraction >= 0 && o.valid_fraction < 1))
    throw ArgumentError("load_dataset: valid_fraction must be in [0, 1)");
  if (!(o.max_invalid_fraction >= 0 && o.max_invalid_fraction <= 1))
    throw ArgumentError("load_dataset: max_invalid_fraction must be in [0, 1]");
  Dataset d;
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    const fs::path train = p / "train.jsonl", valid = p / "valid.jsonl";
    if (!fs::is_regular_file(train))
      throw Error(path + " has no train.jsonl (a data directory needs train.jsonl and valid.jsonl; or give one "
                  ".jsonl file to split)");
    if (!fs::is_regular_file(valid))
      throw Error(path + " has no valid.jsonl: add one, or give train.jsonl itself to hold out " +
                  std::to_string(std::lround(o.valid_fraction * 100)) + "% of it for validation");
    JsonlFile tf = parse_jsonl(read_file(train), train.string());
    JsonlFile vf = parse_jsonl(read_file(valid), valid.string());
    if (tf.format != vf.format)
      throw Error(valid.string() + " has \"" + format_name(vf.format) + "\" lines, " + train.string() + " \"" +
                  format_name(tf.format) + "\" lines: use one format for both");
    d.report.format = format_name(tf.format);
    d.train = tokenize_file(tf, tokenizer, chat_template, o, d.report);
    d.valid = tokenize_file(vf, tokenizer, chat_template, o, d.report);
  } else if (fs::is_regular_file(p, ec)) {
    if (p.extension() != ".jsonl")
      throw Error(path + " is not a .jsonl file (fine-tuning data is JSONL: a directory with train.jsonl and "
                  "valid.jsonl, or one .jsonl file)");
    JsonlFile f = parse_jsonl(read_file(p), p.string());
    d.report.format = format_name(f.format);
    const auto n = static_cast<int64_t>(f.records.size());
    if (n < 2)
      throw Error(path + " has " + std::to_string(n) + " usable example" + (n == 1 ? "" : "s") +
                  ": at least 2 are needed to hold one out for validation (or give a directory with train.jsonl "
                  "and valid.jsonl)");
    // The validation lines: a seeded shuffle of the usable lines, so the split depends on the file and the seed
    // alone (not on the tokenizer). Both splits keep the file's order.
    const int64_t nv = std::clamp<int64_t>(std::llround(o.valid_fraction * static_cast<double>(n)), 1, n - 1);
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[i] = i;
    SplitMix64 rng(o.seed * 0x9e3779b97f4a7c15ull + 0x5eed);
    for (int64_t i = n - 1; i > 0; --i) std::swap(idx[i], idx[rng.next() % static_cast<uint64_t>(i + 1)]);
    std::set<int64_t> valid_lines;
    for (int64_t i = 0; i < nv; ++i) valid_lines.insert(f.records[idx[i]].line);
    std::vector<int64_t> lines;
    std::vector<Example> all = tokenize_file(f, tokenizer, chat_template, o, d.report, &lines);
    for (size_t i = 0; i < all.size(); ++i)
      (valid_lines.contains(lines[i]) ? d.valid : d.train).push_back(std::move(all[i]));
  } else {
    throw Error("no such file or directory: " + path);
  }
  if (d.train.empty()) throw Error(path + ": no usable training example");
  if (d.valid.empty()) throw Error(path + ": no usable validation example");
  count(d.train, d.report.train_examples, d.report.train_tokens, &d.report.loss_tokens);
  count(d.valid, d.report.valid_examples, d.report.valid_tokens, nullptr);
  return d;
}

}  // namespace wgtrain::data
