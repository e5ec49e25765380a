// Post-processors: TemplateProcessing, ByteLevel, Sequence, BertProcessing, RobertaProcessing. Only single sequences
// are encoded (no pairs), so only their "single" templates matter.
#include <nlohmann/json.hpp>

#include "tokenizer/pipeline.h"

namespace wgtrain::tok {

using nlohmann::json;

namespace {

// Fixed ids before and after the sequence, added only with add_special_tokens.
class AroundProcessor final : public PostProcessor {
 public:
  AroundProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }
  void single_specials(std::vector<int32_t>& before, std::vector<int32_t>& after) const override {
    before.insert(before.end(), before_.begin(), before_.end());
    after.insert(after.begin(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class TemplateProcessor final : public PostProcessor {
 public:
  // The single template: special-token ids and the sequence ($A, possibly more than once) in order.
  explicit TemplateProcessor(std::vector<std::optional<std::vector<int32_t>>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    std::vector<int32_t> out;
    for (const auto& p : parts_) {
      if (!p)
        out.insert(out.end(), ids.begin(), ids.end());
      else if (add_special_tokens)
        out.insert(out.end(), p->begin(), p->end());
    }
    ids = std::move(out);
  }
  void single_specials(std::vector<int32_t>& before, std::vector<int32_t>& after) const override {
    bool seen_sequence = false;
    for (const auto& p : parts_) {
      if (!p)
        seen_sequence = true;
      else
        (seen_sequence ? after : before).insert((seen_sequence ? after : before).end(), p->begin(), p->end());
    }
  }

 private:
  std::vector<std::optional<std::vector<int32_t>>> parts_;  // nullopt: the sequence
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::shared_ptr<const PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(ids, add_special_tokens);
  }
  void single_specials(std::vector<int32_t>& before, std::vector<int32_t>& after) const override {
    for (const auto& p : parts_) p->single_specials(before, after);
  }

 private:
  std::vector<std::shared_ptr<const PostProcessor>> parts_;
};

class NoProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

// A ["token", id] pair of BertProcessing / RobertaProcessing.
int32_t token_pair_id(const json& j, const JsonPath& at, const char* key) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer())
    (at / key).fail("expected [\"token\", id]");
  return j[key][1].get<int32_t>();
}

// A piece of a template: {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", ...}}, or the
// string forms "<s>", "$A", "$0", "$B:1".
struct TemplatePiece {
  bool sequence_a = false, sequence_b = false;
  std::string special;
};

TemplatePiece parse_template_piece(const json& p, const JsonPath& at) {
  TemplatePiece out;
  if (p.is_string()) {
    std::string s = p.get<std::string>();
    if (const auto colon = s.rfind(':'); colon != std::string::npos) s = s.substr(0, colon);
    if (!s.empty() && s[0] == '$') {
      const std::string id = s.substr(1);
      if (id.empty() || id == "A" || id == "a" || id == "0") out.sequence_a = true;
      else if (id == "B" || id == "b" || id == "1") out.sequence_b = true;
      else at.fail("unknown sequence \"" + s + "\"");
    } else {
      out.special = s;
    }
    return out;
  }
  if (p.is_object() && p.contains("Sequence")) {
    const std::string id = get_string(p["Sequence"], at / "Sequence", "id");
    if (id == "A") out.sequence_a = true;
    else if (id == "B") out.sequence_b = true;
    else (at / "Sequence").fail("unknown sequence id \"" + id + "\"");
    return out;
  }
  if (p.is_object() && p.contains("SpecialToken")) {
    out.special = get_string(p["SpecialToken"], at / "SpecialToken", "id");
    return out;
  }
  at.fail("expected a template piece, got " + p.dump().substr(0, 80));
}

}  // namespace

std::shared_ptr<const PostProcessor> make_post_processor(const json& j, const JsonPath& at) {
  if (j.is_null()) return nullptr;
  const std::string type = get_string(j, at, "type");
  if (type == "TemplateProcessing") {
    check_fields(j, at, {"type", "single", "pair", "special_tokens"});
    if (!j.contains("single")) at.fail("TemplateProcessing needs a \"single\" template");
    json single = j["single"];
    if (single.is_string()) {  // "<s> $A" form
      json list = json::array();
      const std::string s = single.get<std::string>();
      size_t b = 0;
      while (b <= s.size()) {
        const size_t e = std::min(s.find(' ', b), s.size());
        list.push_back(s.substr(b, e - b));
        b = e + 1;
      }
      single = std::move(list);
    }
    if (!single.is_array()) (at / "single").fail("expected a list of template pieces");
    const json specials = j.contains("special_tokens") ? j["special_tokens"] : json::object();
    std::vector<std::optional<std::vector<int32_t>>> parts;
    for (size_t i = 0; i < single.size(); ++i) {
      const JsonPath here = (at / "single")[i];
      const TemplatePiece p = parse_template_piece(single[i], here);
      if (p.sequence_b) here.fail("the single template refers to sequence B");
      if (p.sequence_a) {
        parts.emplace_back(std::nullopt);
        continue;
      }
      if (!specials.is_object() || !specials.contains(p.special))
        here.fail("special token \"" + p.special + "\" is missing from special_tokens");
      const json& st = specials[p.special];
      const JsonPath st_at = at / "special_tokens" / p.special;
      if (!st.contains("ids") || !st["ids"].is_array()) st_at.fail("expected \"ids\"");
      std::vector<int32_t> ids;
      for (const auto& id : st["ids"]) {
        if (!id.is_number_integer()) (st_at / "ids").fail("expected integer ids");
        ids.push_back(id.get<int32_t>());
      }
      parts.emplace_back(std::move(ids));
    }
    return std::make_shared<TemplateProcessor>(std::move(parts));
  }
  if (type == "ByteLevel") {
    check_fields(j, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_shared<NoProcessor>();  // it only trims offsets
  }
  if (type == "Sequence") {
    check_fields(j, at, {"type", "processors"});
    if (!j.contains("processors") || !j["processors"].is_array()) at.fail("Sequence needs a \"processors\" list");
    std::vector<std::shared_ptr<const PostProcessor>> parts;
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      auto p = make_post_processor(j["processors"][i], (at / "processors")[i]);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_shared<SequenceProcessor>(std::move(parts));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (type == "BertProcessing")
      check_fields(j, at, {"type", "sep", "cls"});
    else
      check_fields(j, at, {"type", "sep", "cls", "trim_offsets", "add_prefix_space"});
    return std::make_shared<AroundProcessor>(std::vector<int32_t>{token_pair_id(j, at, "cls")},
                                             std::vector<int32_t>{token_pair_id(j, at, "sep")});
  }
  at.fail("post-processor type \"" + type +
          "\" is not supported (wgtrain reads TemplateProcessing, ByteLevel, Sequence, BertProcessing, "
          "RobertaProcessing)");
}

std::shared_ptr<const PostProcessor> make_bos_eos_processor(std::optional<int32_t> bos, std::optional<int32_t> eos) {
  std::vector<int32_t> before, after;
  if (bos) before.push_back(*bos);
  if (eos) after.push_back(*eos);
  return std::make_shared<AroundProcessor>(std::move(before), std::move(after));
}

}  // namespace wgtrain::tok
