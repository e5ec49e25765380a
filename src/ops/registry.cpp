#include "wgtrain/registry.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "ops/common.h"
#include "wgtrain/device.h"

namespace wgtrain {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

[[noreturn]] void bad_arg(const std::string& key, const std::string& value, const char* type) {
  throw ArgumentError("argument " + key + "=" + value + " is not a valid " + type);
}

int64_t parse_int(const std::string& key, const std::string& value) {
  const std::string v = trim(value);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) bad_arg(key, value, "integer");
  return x;
}

}  // namespace

double OpArgs::get_float(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string v = trim(it->second);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') bad_arg(key, it->second, "number");
  return x;
}

int64_t OpArgs::get_int(const std::string& key, int64_t fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : parse_int(key, it->second);
}

bool OpArgs::get_bool(const std::string& key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string v = trim(it->second);
  if (v == "true" || v == "1" || v == "True") return true;
  if (v == "false" || v == "0" || v == "False") return false;
  bad_arg(key, it->second, "boolean (true/false)");
}

std::vector<int64_t> OpArgs::get_int_list(const std::string& key, const std::vector<int64_t>& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::string v = trim(it->second);
  if (!v.empty() && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
  std::vector<int64_t> out;
  size_t pos = 0;
  while (!trim(v).empty() && pos <= v.size()) {
    const size_t comma = v.find(',', pos);
    out.push_back(parse_int(key, v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

const Registry& Registry::global() {
  static const Registry reg = [] {
    Registry r;
    ops::detail::register_shape_ops(r);
    ops::detail::register_elementwise_ops(r);
    ops::detail::register_matmul_ops(r);
    ops::detail::register_select_ops(r);
    ops::detail::register_gather_ops(r);
    ops::detail::register_softmax_ops(r);
    ops::detail::register_reduce_ops(r);
    ops::detail::register_q4gsw_ops(r);
    ops::detail::register_fused_ce_ops(r);
    ops::detail::register_adamw_ops(r);
    ops::detail::register_norm_ops(r);
    ops::detail::register_rope_ops(r);
    ops::detail::register_swiglu_ops(r);
    ops::detail::register_dropout_ops(r);
    ops::detail::register_attention_ops(r);
    return r;
  }();
  return reg;
}

void Registry::add(OpSchema schema) {
  if (find(schema.name)) throw Error("op '" + schema.name + "' registered twice");
  ops_.push_back(std::move(schema));
}

const OpSchema* Registry::find(const std::string& name) const {
  for (const auto& s : ops_)
    if (s.name == name) return &s;
  return nullptr;
}

const OpSchema& Registry::get(const std::string& name) const {
  if (const OpSchema* s = find(name)) return *s;
  std::string close;
  for (const auto& s : ops_)
    if (s.name.find(name) != std::string::npos || name.find(s.name) != std::string::npos)
      close += (close.empty() ? "" : ", ") + s.name;
  throw ArgumentError("unknown op '" + name + "'" + (close.empty() ? "" : " (did you mean: " + close + "?)") +
                      "; `wgtrain ops` lists them");
}

const char* runtime_of(Backend backend) { return backend == Backend::NativeVulkan ? "native-vulkan" : "webgpu"; }

bool supports(Backend backend, const OpSchema& op) {
  return std::find(op.backends.begin(), op.backends.end(), runtime_of(backend)) != op.backends.end();
}

bool supports(const Device& device, const OpSchema& op) { return supports(device.info().backend, op); }

void require_ops(Backend backend, const std::vector<std::string>& ops, const std::string& what) {
  std::string missing;
  size_t n = 0;
  for (const auto& name : ops)
    if (!supports(backend, Registry::global().get(name))) {
      missing += (missing.empty() ? "" : ", ") + name;
      ++n;
    }
  if (n == 0) return;
  throw UnsupportedError(what + " needs " + std::to_string(n) + " op" + (n == 1 ? "" : "s") + " that the " +
                         backend_name(backend) + " backend lacks (" + missing +
                         "); `wgtrain ops` lists each op's backends. Use --backend webgpu.");
}

const std::vector<std::string>& model_ops() {
  static const std::vector<std::string> ops = {"embedding", "rms_norm",  "linear_q4gsw", "rope",
                                               "attention", "mul",       "add",          "swiglu",
                                               "fused_ce",  "adamw_step"};
  return ops;
}

OpTensors run_op(Device& device, const std::string& name, const OpTensors& inputs, const OpArgs& args) {
  const OpSchema& s = Registry::global().get(name);
  if (!supports(device, s))
    throw UnsupportedError(name + ": the " + std::string(backend_name(device.info().backend)) +
                           " backend has no kernel for this op (it runs on: " +
                           [&] {
                             std::string b;
                             for (const auto& x : s.backends) b += (b.empty() ? "" : ", ") + x;
                             return b;
                           }() +
                           ")");
  std::set<std::string> known;
  for (std::string in : s.inputs) {
    const bool optional = !in.empty() && in.back() == '?';
    if (optional) in.pop_back();
    known.insert(in);
    if (!optional && !inputs.count(in)) throw ArgumentError(name + ": missing input tensor '" + in + "'");
  }
  for (const auto& [k, t] : inputs) {
    if (!known.count(k)) throw ArgumentError(name + ": unexpected input tensor '" + k + "'");
    if (&t.device_impl() != &device.impl())
      throw ArgumentError(name + ": input '" + k + "' lives on another device");
    if (t.rank() < s.min_rank || t.rank() > s.max_rank)
      throw ArgumentError(name + ": input '" + k + "' has rank " + std::to_string(t.rank()) + ", the op takes " +
                          std::to_string(s.min_rank) + ".." + std::to_string(s.max_rank));
  }
  for (const auto& kv : args.values()) {
    const std::string& key = kv.first;
    const bool ok = std::any_of(s.args.begin(), s.args.end(), [&](const ArgSpec& a) { return a.name == key; });
    if (!ok) throw ArgumentError(name + ": unknown argument '" + key + "'");
  }
  return s.run(device, inputs, args);
}

}  // namespace wgtrain
