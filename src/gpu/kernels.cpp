#include "gpu/kernels.h"

#include <set>

#include "wgtrain/error.h"

namespace wgtrain::detail {

std::string_view kernel_source(std::string_view name) {
  for (const auto& k : embedded_kernels())
    if (name == k.name) return k.source;
  throw Error("no embedded WGSL kernel named '" + std::string(name) + "'");
}

namespace {

// Replaces each {{>other}} by the embedded kernel `other` (itself expanded), so kernels can share WGSL helpers.
std::string expand_includes(std::string_view name, std::string_view source, int depth) {
  if (depth > 8) throw Error("kernel '" + std::string(name) + "': includes nest too deeply");
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = source.find("{{>", pos);
    if (open == std::string_view::npos) {
      out.append(source.substr(pos));
      return out;
    }
    const size_t close = source.find("}}", open + 3);
    if (close == std::string_view::npos)
      throw Error("kernel '" + std::string(name) + "': unterminated {{> include");
    out.append(source.substr(pos, open - pos));
    const std::string inc(source.substr(open + 3, close - open - 3));
    out.append(expand_includes(inc, kernel_source(inc), depth + 1));
    pos = close + 2;
  }
}

}  // namespace

std::string render_kernel(std::string_view name, std::string_view raw_source, const KernelDefs& defs) {
  const std::string expanded = expand_includes(name, raw_source, 0);
  const std::string_view source = expanded;
  std::string out;
  out.reserve(source.size() + 256);
  std::set<std::string> used;
  size_t pos = 0;
  while (true) {
    const size_t open = source.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(source.substr(pos));
      break;
    }
    const size_t close = source.find("}}", open + 2);
    if (close == std::string_view::npos)
      throw Error("kernel '" + std::string(name) + "': unterminated {{ placeholder");
    out.append(source.substr(pos, open - pos));
    const std::string key(source.substr(open + 2, close - open - 2));
    const std::pair<std::string, std::string>* found = nullptr;
    for (const auto& d : defs)
      if (d.first == key) found = &d;
    if (!found) throw Error("kernel '" + std::string(name) + "': no value for placeholder {{" + key + "}}");
    out.append(found->second);
    used.insert(key);
    pos = close + 2;
  }
  for (const auto& d : defs)
    if (!used.count(d.first))
      throw Error("kernel '" + std::string(name) + "': value given for {{" + d.first + "}}, which it does not use");
  return out;
}

}  // namespace wgtrain::detail
