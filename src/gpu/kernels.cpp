#include "gpu/kernels.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "wgtrain/error.h"

namespace wgtrain::detail {

namespace {

// WGTRAIN_KERNEL_OVERRIDES=DIR: a file DIR/<name with '/' as '.'>.wgsl (matmul.gemm_sm.wgsl) replaces the embedded
// kernel of that name, for timing a changed kernel on a GPU machine without rebuilding there. Each replacement is
// said on stderr once; the texts are kept for the process (kernel_source hands out views).
std::optional<std::string_view> kernel_override(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, std::optional<std::string>, std::less<>> texts;
  const char* dir = std::getenv(kKernelOverridesEnv);
  if (!dir || !*dir) return std::nullopt;
  std::lock_guard lock(mu);
  auto it = texts.find(name);
  if (it == texts.end()) {
    std::string file = std::string(dir) + "/" + std::string(name) + ".wgsl";
    std::replace(file.begin() + static_cast<std::ptrdiff_t>(std::strlen(dir)) + 1, file.end() - 5, '/', '.');
    std::optional<std::string> text;
    if (std::ifstream in(file, std::ios::binary); in) {
      text = std::string(std::istreambuf_iterator<char>(in), {});
      std::fprintf(stderr, "wgtrain: kernel %s from %s (%s)\n", std::string(name).c_str(), file.c_str(),
                   kKernelOverridesEnv);
    }
    it = texts.emplace(std::string(name), std::move(text)).first;
  }
  if (!it->second) return std::nullopt;
  return std::string_view(*it->second);
}

}  // namespace

std::string_view kernel_source(std::string_view name) {
  for (const auto& k : embedded_kernels())
    if (name == k.name) {
      if (auto text = kernel_override(name)) return *text;
      return k.source;
    }
  throw Error("no embedded WGSL kernel named '" + std::string(name) + "'");
}

namespace {

Error kernel_error(std::string_view name, const std::string& what) {
  return Error("kernel '" + std::string(name) + "': " + what);
}

// Replaces each {{>other}} by the embedded kernel `other` (itself expanded), so kernels can share WGSL helpers.
std::string expand_includes(std::string_view name, std::string_view source, int depth) {
  if (depth > 8) throw kernel_error(name, "includes nest too deeply");
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = source.find("{{>", pos);
    if (open == std::string_view::npos) {
      out.append(source.substr(pos));
      return out;
    }
    const size_t close = source.find("}}", open + 3);
    if (close == std::string_view::npos) throw kernel_error(name, "unterminated {{> include");
    out.append(source.substr(pos, open - pos));
    const std::string inc(source.substr(open + 3, close - open - 3));
    out.append(expand_includes(inc, kernel_source(inc), depth + 1));
    pos = close + 2;
  }
}

// One {{...}} tag: its kind ('=' a value, '#' or '^' a section's start, '/' its end) and key, at [open, end).
struct Tag {
  char kind;
  std::string key;
  size_t open, end;
};

std::optional<Tag> next_tag(std::string_view name, std::string_view s, size_t from, size_t to) {
  const size_t open = s.substr(0, to).find("{{", from);
  if (open == std::string_view::npos) return std::nullopt;
  const size_t close = s.substr(0, to).find("}}", open + 2);
  if (close == std::string_view::npos) throw kernel_error(name, "unterminated {{ placeholder");
  std::string_view body = s.substr(open + 2, close - open - 2);
  char kind = '=';
  if (!body.empty() && (body[0] == '#' || body[0] == '^' || body[0] == '/')) {
    kind = body[0];
    body.remove_prefix(1);
  }
  if (body.empty()) throw kernel_error(name, "empty {{ }} placeholder");
  return Tag{kind, std::string(body), open, close + 2};
}

// The lines "@variant KEY {v1|v2} meaning" of a kernel's comments.
std::vector<KernelField> declared_fields(std::string_view name, std::string_view s) {
  std::vector<KernelField> out;
  constexpr std::string_view kTag = "@variant ";
  for (size_t pos = s.find(kTag); pos != std::string_view::npos; pos = s.find(kTag, pos + 1)) {
    const size_t eol = std::min(s.find('\n', pos), s.size());
    std::string_view line = s.substr(pos + kTag.size(), eol - pos - kTag.size());
    auto skip_blanks = [&] {
      while (!line.empty() && (line[0] == ' ' || line[0] == '\t')) line.remove_prefix(1);
    };
    skip_blanks();
    KernelField f;
    f.declared = true;
    while (!line.empty() && line[0] != ' ' && line[0] != '\t') {
      f.key += line[0];
      line.remove_prefix(1);
    }
    if (f.key.empty()) throw kernel_error(name, "an @variant line names no key");
    skip_blanks();
    if (!line.empty() && line[0] == '{') {
      const size_t close = line.find('}');
      if (close == std::string_view::npos) throw kernel_error(name, "@variant " + f.key + ": unterminated {values}");
      std::string_view values = line.substr(1, close - 1);
      line.remove_prefix(close + 1);
      while (true) {
        const size_t bar = values.find('|');
        std::string_view v = values.substr(0, bar);
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
        if (v.empty()) throw kernel_error(name, "@variant " + f.key + ": an empty value in {values}");
        if (v != "*") f.values.emplace_back(v);
        if (bar == std::string_view::npos) break;
        values.remove_prefix(bar + 1);
      }
      skip_blanks();
    }
    f.meaning = std::string(line);
    for (const auto& g : out)
      if (g.key == f.key) throw kernel_error(name, "@variant " + f.key + " is declared twice");
    out.push_back(std::move(f));
  }
  return out;
}

// Every key the template names, in order of first appearance.
std::vector<std::string> template_keys(std::string_view name, std::string_view s) {
  std::vector<std::string> keys;
  for (auto t = next_tag(name, s, 0, s.size()); t; t = next_tag(name, s, t->end, s.size()))
    if (std::find(keys.begin(), keys.end(), t->key) == keys.end()) keys.push_back(t->key);
  return keys;
}

const std::string& value_of(const KernelDefs& defs, const std::string& key) {
  for (const auto& d : defs)
    if (d.first == key) return d.second;
  throw Error("unreachable: no value for " + key);  // render_kernel checked every key first
}

// If the tag [open, end) stands alone on its line (blanks around it), the extent of that line, newline included.
std::optional<std::pair<size_t, size_t>> standalone(std::string_view s, size_t from, size_t open, size_t end) {
  size_t b = open;
  while (b > from && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  if (b > 0 && s[b - 1] != '\n') return std::nullopt;
  size_t e = end;
  while (e < s.size() && (s[e] == ' ' || s[e] == '\t')) ++e;
  if (e < s.size() && s[e] != '\n') return std::nullopt;
  return std::pair{b, e < s.size() ? e + 1 : e};
}

// Renders s[from, to) into out: values substituted, sections kept or dropped.
void render_range(std::string_view name, std::string_view s, size_t from, size_t to, const KernelDefs& defs,
                  std::string& out) {
  size_t pos = from;
  while (true) {
    const auto tag = next_tag(name, s, pos, to);
    if (!tag) {
      out.append(s.substr(pos, to - pos));
      return;
    }
    if (tag->kind == '=') {
      out.append(s.substr(pos, tag->open - pos));
      out.append(value_of(defs, tag->key));
      pos = tag->end;
      continue;
    }
    if (tag->kind == '/') throw kernel_error(name, "{{/" + tag->key + "}} closes no section");
    const std::string& value = value_of(defs, tag->key);
    if (value != "true" && value != "false")
      throw kernel_error(name, "section {{" + std::string(1, tag->kind) + tag->key + "}} needs true or false, got '" +
                                   value + "'");
    // The matching {{/KEY}}: the next one, with no other section of KEY opening before it.
    const std::string close_text = "{{/" + tag->key + "}}";
    const size_t close = s.substr(0, to).find(close_text, tag->end);
    if (close == std::string_view::npos) throw kernel_error(name, "section " + tag->key + " is not closed");
    for (const char* k : {"{{#", "{{^"}) {
      const size_t again = s.substr(0, close).find(k + tag->key + "}}", tag->end);
      if (again != std::string_view::npos) throw kernel_error(name, "sections of " + tag->key + " nest");
    }
    const size_t close_end = close + close_text.size();
    const auto open_line = standalone(s, pos, tag->open, tag->end);
    const auto close_line = standalone(s, tag->end, close, close_end);
    out.append(s.substr(pos, (open_line ? open_line->first : tag->open) - pos));
    const size_t inner_from = open_line ? open_line->second : tag->end;
    const size_t inner_to = close_line ? close_line->first : close;
    if ((value == "true") == (tag->kind == '#')) render_range(name, s, inner_from, inner_to, defs, out);
    pos = close_line ? close_line->second : close_end;
  }
}

}  // namespace

std::string render_kernel(std::string_view name, std::string_view raw_source, const KernelDefs& defs) {
  const std::string expanded = expand_includes(name, raw_source, 0);
  const std::string_view source = expanded;
  const std::vector<std::string> keys = template_keys(name, source);
  for (const auto& key : keys) {
    bool found = false;
    for (const auto& d : defs) found = found || d.first == key;
    if (!found) throw kernel_error(name, "no value for placeholder {{" + key + "}}");
  }
  for (const auto& d : defs)
    if (std::find(keys.begin(), keys.end(), d.first) == keys.end())
      throw kernel_error(name, "value given for {{" + d.first + "}}, which it does not use");
  for (const auto& f : declared_fields(name, source)) {
    if (f.values.empty()) continue;
    for (const auto& d : defs)
      if (d.first == f.key && std::find(f.values.begin(), f.values.end(), d.second) == f.values.end()) {
        std::string allowed;
        for (const auto& v : f.values) allowed += (allowed.empty() ? "" : "|") + v;
        throw kernel_error(name, f.key + "=" + d.second + " is not one of its declared values {" + allowed + "}");
      }
  }
  std::string out;
  out.reserve(source.size() + 256);
  render_range(name, source, 0, source.size(), defs, out);
  return out;
}

std::vector<KernelField> kernel_fields(std::string_view name) {
  const std::string expanded = expand_includes(name, kernel_source(name), 0);
  std::vector<KernelField> fields = declared_fields(name, expanded);
  for (const auto& key : template_keys(name, expanded)) {
    auto it = std::find_if(fields.begin(), fields.end(), [&](const KernelField& f) { return f.key == key; });
    if (it == fields.end()) {
      KernelField f;
      f.key = key;
      fields.push_back(std::move(f));
      it = fields.end() - 1;
    }
    it->used = true;
  }
  return fields;
}

bool kernel_is_include(std::string_view name) {
  return kernel_source(name).find("@compute") == std::string_view::npos;
}

// ---- the kernel dump ------------------------------------------------------------------------------------------

namespace {

struct DumpState {
  std::mutex mu;
  bool initialised = false;  // the directory was set, or the environment read
  std::string dir;
  std::set<std::string> written;  // files written by this process
};

DumpState& dump_state() {
  static DumpState s;
  return s;
}

// Creates `dir` if needed and proves it writable with a probe file. Throws Error, one line.
void prepare_dump_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error("kernel dump directory '" + dir + "' is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the kernel dump directory '" + dir + "': " + ec.message());
  const std::string probe = dir + "/.wgtrain-probe-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) throw Error("cannot write to the kernel dump directory '" + dir + "': " + std::strerror(errno));
  std::fclose(f);
  std::remove(probe.c_str());
}

void set_locked(DumpState& s, const std::string& dir) {
  if (!dir.empty()) prepare_dump_dir(dir);
  s.dir = dir;
  s.initialised = true;
  s.written.clear();
}

void init_locked(DumpState& s) {
  if (s.initialised) return;
  const char* env = std::getenv(kDumpKernelsEnv);
  const std::string dir = env ? env : "";
  try {
    set_locked(s, dir);
  } catch (const Error& e) {
    throw Error(std::string(kDumpKernelsEnv) + "=" + dir + ": " + e.what());
  }
}

}  // namespace

void set_kernel_dump_dir(const std::string& dir) {
  DumpState& s = dump_state();
  std::lock_guard lock(s.mu);
  set_locked(s, dir);
}

void init_kernel_dump_from_env() {
  DumpState& s = dump_state();
  std::lock_guard lock(s.mu);
  init_locked(s);
}

std::string kernel_dump_dir() {
  DumpState& s = dump_state();
  std::lock_guard lock(s.mu);
  init_locked(s);
  return s.dir;
}

std::vector<std::string> dumped_kernel_files() {
  DumpState& s = dump_state();
  std::lock_guard lock(s.mu);
  return {s.written.begin(), s.written.end()};
}

std::string kernel_dump_file_name(std::string_view kernel, const KernelDefs& defs) {
  std::string name;
  bool lossy = false;
  // Characters safe in file names stay; a type's brackets go (vec4<f32>: vec4_f32); an expression's operators
  // become words (x0 < x1: x0ltx1), which loses the distinction between some texts: a hash then tells them apart.
  auto put = [&](std::string_view text, bool type_like, bool path = false) {
    for (char ch : text) {
      if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '-' || ch == '.') {
        name += ch;
        continue;
      }
      if (path && ch == '/') {
        name += '.';
        continue;
      }
      if (type_like) {
        if (ch == '<' || ch == ',') name += '_';
        continue;
      }
      lossy = true;
      switch (ch) {
        case '<': name += "lt"; break;
        case '>': name += "gt"; break;
        case '=': name += "eq"; break;
        case '!': name += "not"; break;
        case '+': name += "plus"; break;
        case '*': name += "times"; break;
        case '/': name += "over"; break;
        case '&': name += "and"; break;
        case '|': name += "or"; break;
        case '(': case ',': name += '_'; break;
        default: break;  // blanks, ')' and the rest
      }
    }
  };
  // A type name: letters, digits and _ with <, > and ", " (vec4<f32>, array<u32, 4>).
  auto is_type = [](std::string_view v) {
    return !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_<>, ") ==
                             std::string_view::npos && v.find('<') != std::string_view::npos;
  };
  put(kernel, false, true);
  for (const auto& [k, v] : defs) {
    name += '.';
    put(k, false);
    name += '-';
    put(v, is_type(v));
  }
  if (lossy || name.size() > 200) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the whole variant
    auto mix = [&](std::string_view text) {
      for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
      h = (h ^ 0xffu) * 1099511628211ull;  // a separator no text holds
    };
    mix(kernel);
    for (const auto& [k, v] : defs) {
      mix(k);
      mix(v);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(h ^ (h >> 32)));
    if (name.size() > 150) name.resize(150);
    name += ".h";
    name += hex;
  }
  return name + ".wgsl";
}

void note_compiled_kernel(std::string_view kernel, const KernelDefs& defs, std::string_view source) {
  DumpState& s = dump_state();
  std::lock_guard lock(s.mu);
  init_locked(s);
  if (s.dir.empty()) return;
  const std::string file = kernel_dump_file_name(kernel, defs);
  if (s.written.count(file)) return;
  // Through a temporary and a rename, so that a reader (or a second process dumping the same variant) never sees a
  // half-written file.
  const std::string path = s.dir + "/" + file;
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(source.data(), static_cast<std::streamsize>(source.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write the kernel dump file '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error("cannot write the kernel dump file '" + path + "': " + why);
  }
  s.written.insert(file);
}

}  // namespace wgtrain::detail
