// Elementwise ops: binary arithmetic (tensor-tensor with broadcasting, and tensor-scalar), unary math, and the
// backward maps the training graph needs. Each op is one row of a table: its WGSL expression per dtype; all run
// through elementwise/map.wgsl.
#include <cmath>
#include <map>

#include "ops/elementwise/map.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct BinaryRow {
  const char* tensor_f32;  // x0 op x1, alpha in p.fscalar.x
  const char* tensor_i32;  // nullptr: not defined for int32
  const char* scalar_f32;  // x0 op s, s in p.fscalar.y
  const char* scalar_i32;
  bool vectorizable = true;  // the expressions are valid over vec4s too
};

const std::map<std::string, BinaryRow>& binary_table() {
  static const std::map<std::string, BinaryRow> t = {
      {"add", {"x0 + p.fscalar.x * x1", "x0 + p.iscalar.x * x1", "x0 + p.fscalar.y", "x0 + p.iscalar.y"}},
      {"sub", {"x0 - p.fscalar.x * x1", "x0 - p.iscalar.x * x1", "x0 - p.fscalar.y", "x0 - p.iscalar.y"}},
      {"mul", {"x0 * x1", "x0 * x1", "x0 * p.fscalar.y", "x0 * p.iscalar.y"}},
      {"div", {"x0 / x1", nullptr, "x0 / p.fscalar.y", nullptr}},
      {"maximum", {"max(x0, x1)", "max(x0, x1)", nullptr, nullptr}},
      {"minimum", {"min(x0, x1)", "min(x0, x1)", nullptr, nullptr}},
      // Backward maps: x0 is the incoming gradient, x1 the forward input (silu) or output (sigmoid, tanh).
      {"silu_backward", {"x0 * (sigmoid(x1) * (1.0 + x1 * (1.0 - sigmoid(x1))))", nullptr, nullptr, nullptr, false}},
      {"sigmoid_backward", {"x0 * x1 * (1.0 - x1)", nullptr, nullptr, nullptr}},
      {"tanh_backward", {"x0 * (1.0 - x1 * x1)", nullptr, nullptr, nullptr}},
  };
  return t;
}

struct UnaryRow {
  const char* f32;
  const char* i32;  // nullptr: float only
  bool vectorizable = true;
};

const std::map<std::string, UnaryRow>& unary_table() {
  static const std::map<std::string, UnaryRow> t = {
      {"neg", {"-x0", "-x0"}},
      {"abs", {"abs(x0)", "abs(x0)"}},
      {"sign", {"sign(x0)", "sign(x0)"}},
      {"exp", {"exp(x0)", nullptr}},
      {"log", {"log(x0)", nullptr}},
      {"sqrt", {"sqrt(x0)", nullptr}},
      {"rsqrt", {"inverseSqrt(x0)", nullptr}},
      {"reciprocal", {"1.0 / x0", nullptr}},
      {"sigmoid", {"sigmoid(x0)", nullptr, false}},
      {"silu", {"x0 * sigmoid(x0)", nullptr, false}},
      {"tanh", {"tanh(x0)", nullptr}},
      {"sin", {"sin(x0)", nullptr}},
      {"cos", {"cos(x0)", nullptr}},
      {"pow.Scalar", {"pow_scalar(x0, p.fscalar.y)", nullptr, false}},
  };
  return t;
}

// What each op computes, in its own terms (self, other, alpha, the scalar): `wgtrain ops` shows these rather than the
// WGSL expressions above.
const std::map<std::string, const char*>& summaries() {
  static const std::map<std::string, const char*> t = {
      {"add", "self + alpha * other"},
      {"sub", "self - alpha * other"},
      {"mul", "self * other"},
      {"div", "self / other"},
      {"maximum", "the larger of self and other, element by element"},
      {"minimum", "the smaller of self and other, element by element"},
      {"silu_backward", "gradient of silu: grad_output * s * (1 + self * (1 - s)), s = sigmoid(self)"},
      {"sigmoid_backward", "gradient of sigmoid from its output: grad_output * output * (1 - output)"},
      {"tanh_backward", "gradient of tanh from its output: grad_output * (1 - output^2)"},
      {"add.Scalar", "self + other"},
      {"sub.Scalar", "self - other"},
      {"mul.Scalar", "self * other"},
      {"div.Scalar", "self / other"},
      {"neg", "-self"},
      {"abs", "|self|"},
      {"sign", "the sign of self: -1, 0 or 1"},
      {"exp", "e^self"},
      {"log", "natural logarithm of self"},
      {"sqrt", "square root of self"},
      {"rsqrt", "1 / sqrt(self)"},
      {"reciprocal", "1 / self"},
      {"sigmoid", "1 / (1 + e^-self)"},
      {"silu", "self * sigmoid(self)"},
      {"tanh", "hyperbolic tangent of self"},
      {"sin", "sine of self (radians)"},
      {"cos", "cosine of self (radians)"},
      {"pow.Scalar", "self ^ exponent"},
  };
  return t;
}

const char* summary_of(const std::string& op) {
  const auto it = summaries().find(op);
  return it == summaries().end() ? "" : it->second;
}

const char* pick(const char* f32, const char* i32, DType t, const std::string& op) {
  const char* e = t == DType::F32 ? f32 : (t == DType::I32 ? i32 : nullptr);
  if (!e) throw ArgumentError(op + ": not defined for " + dtype_name(t) + " tensors");
  return e;
}

}  // namespace

Tensor binary(const std::string& op, const Tensor& a, const Tensor& b, float alpha) {
  auto it = binary_table().find(op);
  if (it == binary_table().end()) throw ArgumentError("unknown binary op '" + op + "'");
  check_defined(op.c_str(), a, "self");
  check_defined(op.c_str(), b, "other");
  check_same_device(op.c_str(), a, b);
  if (a.dtype() != b.dtype())
    throw ArgumentError(op + ": self is " + dtype_name(a.dtype()) + " and other " + dtype_name(b.dtype()) +
                        " (no implicit type promotion: convert one first)");
  const char* expr = pick(it->second.tensor_f32, it->second.tensor_i32, a.dtype(), op);
  if (a.dtype() == DType::I32 && alpha != std::nearbyint(alpha))
    throw ArgumentError(op + ": alpha must be an integer for int32 tensors");
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  return run_map(op.c_str(), {expr, a.dtype(), it->second.vectorizable}, {a.expand(shape), b.expand(shape)}, shape,
                 {alpha, 0, 0, 0},
                 {static_cast<int32_t>(alpha), 0, 0, 0});
}

Tensor binary_scalar(const std::string& op, const Tensor& a, double s) {
  auto it = binary_table().find(op);
  if (it == binary_table().end() || !it->second.scalar_f32)
    throw ArgumentError("unknown tensor-scalar op '" + op + "'");
  check_defined(op.c_str(), a, "self");
  const char* expr = pick(it->second.scalar_f32, it->second.scalar_i32, a.dtype(), op);
  if (a.dtype() == DType::I32 && s != std::nearbyint(s))
    throw ArgumentError(op + ": the scalar must be an integer for int32 tensors");
  return run_map((op + ".Scalar").c_str(), {expr, a.dtype(), it->second.vectorizable}, {a}, a.shape(),
                 {0, static_cast<float>(s), 0, 0},
                 {0, static_cast<int32_t>(s), 0, 0});
}

Tensor unary(const std::string& op, const Tensor& x, double scalar) {
  auto it = unary_table().find(op);
  if (it == unary_table().end()) throw ArgumentError("unknown unary op '" + op + "'");
  check_defined(op.c_str(), x, "self");
  const char* expr = pick(it->second.f32, it->second.i32, x.dtype(), op);
  return run_map(op.c_str(), {expr, x.dtype(), it->second.vectorizable}, {x}, x.shape(),
                 {0, static_cast<float>(scalar), 0, 0});
}

std::vector<std::string> binary_op_names() {
  std::vector<std::string> v;
  for (const auto& [k, row] : binary_table()) v.push_back(k);
  return v;
}
std::vector<std::string> unary_op_names() {
  std::vector<std::string> v;
  for (const auto& [k, row] : unary_table()) v.push_back(k);
  return v;
}

Tensor add(const Tensor& a, const Tensor& b, float alpha) { return binary("add", a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, float alpha) { return binary("sub", a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary("div", a, b); }
Tensor add(const Tensor& a, float s) { return binary_scalar("add", a, s); }
Tensor sub(const Tensor& a, float s) { return binary_scalar("sub", a, s); }
Tensor mul(const Tensor& a, float s) { return binary_scalar("mul", a, s); }
Tensor div(const Tensor& a, float s) { return binary_scalar("div", a, s); }

namespace detail {

void register_elementwise_ops(Registry& r) {
  for (const auto& [name, row] : binary_table()) {
    const bool has_alpha = name == "add" || name == "sub";
    const bool backward = name.find("_backward") != std::string::npos;
    OpSchema s;
    s.name = name;
    s.family = "elementwise";
    s.summary = summary_of(name);
    s.inputs = backward ? std::vector<std::string>{"grad_output", name == "silu_backward" ? "self" : "output"}
                        : std::vector<std::string>{"self", "other"};
    if (has_alpha) s.args = {{"alpha", "float", "1", "scale of other"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    if (row.tensor_i32) s.dtypes.push_back(DType::I32);
    s.constraints = {"inputs broadcast (NumPy rules)", "both inputs of one dtype"};
    s.training_only = backward;
    const std::string n0 = s.inputs[0], n1 = s.inputs[1], op = name;
    s.run = [op, n0, n1](Device&, const OpTensors& in, const OpArgs& args) {
      return OpTensors{
          {"out", binary(op, input(in, n0), input(in, n1), static_cast<float>(args.get_float("alpha", 1.0)))}};
    };
    r.add(std::move(s));

    if (!row.scalar_f32) continue;
    OpSchema sc;
    sc.name = name + ".Scalar";
    sc.family = "elementwise";
    sc.summary = summary_of(name + ".Scalar");
    sc.inputs = {"self"};
    sc.args = {{"other", "float", "", "the scalar (required)"}};
    sc.outputs = {"out"};
    sc.dtypes = {DType::F32};
    if (row.scalar_i32) sc.dtypes.push_back(DType::I32);
    sc.run = [op](Device&, const OpTensors& in, const OpArgs& args) {
      if (!args.has("other")) throw ArgumentError(op + ".Scalar: missing argument other=<number>");
      return OpTensors{{"out", binary_scalar(op, input(in, "self"), args.get_float("other", 0.0))}};
    };
    r.add(std::move(sc));
  }
  for (const auto& [name, row] : unary_table()) {
    OpSchema s;
    s.name = name;
    s.family = "elementwise";
    s.summary = summary_of(name);
    s.inputs = {"self"};
    const bool scalar = name == "pow.Scalar";
    if (scalar) s.args = {{"exponent", "float", "", "the exponent (required)"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    if (row.i32) s.dtypes.push_back(DType::I32);
    const std::string op = name;
    s.run = [op, scalar](Device&, const OpTensors& in, const OpArgs& args) {
      if (scalar && !args.has("exponent")) throw ArgumentError(op + ": missing argument exponent=<number>");
      return OpTensors{{"out", unary(op, input(in, "self"), args.get_float("exponent", 0.0))}};
    };
    r.add(std::move(s));
  }
}

}  // namespace detail
}  // namespace wgtrain::ops
