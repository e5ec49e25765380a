// The op registry: what each op is, what it takes, and how to run it by name (wgtrain ops, wgtrain run-op).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wgtrain/device.h"
#include "wgtrain/tensor.h"

namespace wgtrain {

class Device;

// Named tensor inputs and string-valued arguments of one call, as `wgtrain run-op` gets them.
using OpTensors = std::map<std::string, Tensor>;

class OpArgs {
 public:
  OpArgs() = default;
  explicit OpArgs(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  void set(const std::string& key, const std::string& value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // Typed getters: throw ArgumentError naming the key when the value does not parse.
  double get_float(const std::string& key, double fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

struct ArgSpec {
  std::string name;
  std::string type;         // "float", "int", "bool", "int[]"
  std::string default_value;
  std::string help;
};

struct OpSchema {
  std::string name;                    // e.g. "mm", "add.Scalar", "_softmax"
  std::string family;                  // folder under src/ops
  std::string summary;
  std::vector<std::string> inputs;     // tensor inputs, in order; a trailing '?' marks an optional one
  std::vector<ArgSpec> args;
  std::vector<std::string> outputs;
  std::vector<DType> dtypes;           // element types the op computes in
  int min_rank = 0, max_rank = kMaxRank;
  std::vector<std::string> constraints;  // in words, each also checked before dispatch
  bool training_only = false;
  // The runtimes that have the op's kernels: "webgpu" (every WebGPU backend) and "native-vulkan".
  std::vector<std::string> backends = {"webgpu"};
  std::function<OpTensors(Device&, const OpTensors&, const OpArgs&)> run;
};

class Registry {
 public:
  // Every op, registered once on first use.
  static const Registry& global();
  const OpSchema* find(const std::string& name) const;
  const OpSchema& get(const std::string& name) const;  // throws ArgumentError listing close names
  const std::vector<OpSchema>& all() const { return ops_; }
  void add(OpSchema schema);

 private:
  std::vector<OpSchema> ops_;
};

// "webgpu" or "native-vulkan": the name OpSchema::backends uses for a backend's runtime.
const char* runtime_of(Backend backend);
// Whether the backend (or the device's) has the op's kernels.
bool supports(Backend backend, const OpSchema& op);
bool supports(const Device& device, const OpSchema& op);
// Throws UnsupportedError naming every op of `ops` the backend lacks, for `what` (a command) to say before any
// work starts.
void require_ops(Backend backend, const std::vector<std::string>& ops, const std::string& what);
// The ops a model's training step or generation runs (embedding, norms, attention, the MLP, the loss, AdamW).
const std::vector<std::string>& model_ops();

// Runs a registered op by name: checks that required inputs are there (and no unknown ones), then calls it.
OpTensors run_op(Device& device, const std::string& name, const OpTensors& inputs, const OpArgs& args = {});

}  // namespace wgtrain
