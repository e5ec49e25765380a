// Comparisons (to bool), where, masked_fill, logical_not: rows of WGSL expressions run by elementwise/map.wgsl.
#include <cmath>
#include <map>

#include "ops/elementwise/map.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

const std::map<std::string, const char*>& compare_table() {
  static const std::map<std::string, const char*> t = {{"eq", "=="}, {"ne", "!="}, {"lt", "<"},
                                                       {"le", "<="}, {"gt", ">"},  {"ge", ">="}};
  return t;
}

const char* compare_symbol(const std::string& op) {
  auto it = compare_table().find(op);
  if (it == compare_table().end()) throw ArgumentError("unknown comparison '" + op + "': eq, ne, lt, le, gt, ge");
  return it->second;
}

}  // namespace

Tensor compare(const std::string& op, const Tensor& a, const Tensor& b) {
  const char* sym = compare_symbol(op);
  check_dtype(op.c_str(), a, "self", {DType::F32, DType::I32, DType::Bool});
  check_defined(op.c_str(), b, "other");
  if (a.dtype() != b.dtype())
    throw ArgumentError(op + ": self is " + dtype_name(a.dtype()) + " and other " + dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  return run_map(op.c_str(), {std::string("bool_word(x0 ") + sym + " x1)", DType::Bool},
                 {a.expand(shape), b.expand(shape)}, shape);
}

Tensor compare_scalar(const std::string& op, const Tensor& a, double s) {
  const char* sym = compare_symbol(op);
  check_dtype(op.c_str(), a, "self", {DType::F32, DType::I32});
  // An int32 tensor against a fractional scalar compares exactly in f32 only for small values: use f32 for both.
  const bool as_int = a.dtype() == DType::I32 && s == std::nearbyint(s) && std::fabs(s) < 2147483648.0;
  const std::string expr = a.dtype() == DType::F32 ? std::string("bool_word(x0 ") + sym + " p.fscalar.y)"
                           : as_int               ? std::string("bool_word(x0 ") + sym + " p.iscalar.y)"
                                                  : std::string("bool_word(f32(x0) ") + sym + " p.fscalar.y)";
  return run_map((op + ".Scalar").c_str(), {expr, DType::Bool}, {a}, a.shape(), {0, static_cast<float>(s), 0, 0},
                 {0, as_int ? static_cast<int32_t>(s) : 0, 0, 0});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_dtype("where", cond, "condition", {DType::Bool});
  check_defined("where", a, "self");
  check_defined("where", b, "other");
  if (a.dtype() != b.dtype())
    throw ArgumentError(std::string("where: self is ") + dtype_name(a.dtype()) + " and other " +
                        dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape()), b.shape());
  return run_map("where", {"select(x2, x1, x0 != 0u)", a.dtype(), true},
                 {cond.expand(shape), a.expand(shape), b.expand(shape)}, shape);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_dtype("masked_fill", x, "self", {DType::F32, DType::I32});
  check_dtype("masked_fill", mask, "mask", {DType::Bool});
  const Shape shape = broadcast_shapes(x.shape(), mask.shape());
  if (shape != x.shape())
    throw ArgumentError("masked_fill: mask " + shape_str(mask.shape()) + " must broadcast to self " +
                        shape_str(x.shape()));
  if (x.dtype() == DType::I32 && value != std::nearbyint(value))
    throw ArgumentError("masked_fill: value must be an integer for int32 tensors");
  const char* expr = x.dtype() == DType::F32 ? "select(x0, p.fscalar.y, x1 != 0u)" : "select(x0, p.iscalar.y, x1 != 0u)";
  return run_map("masked_fill", {expr, x.dtype()}, {x, mask.expand(shape)}, shape,
                 {0, static_cast<float>(value), 0, 0}, {0, static_cast<int32_t>(value), 0, 0});
}

Tensor logical_not(const Tensor& x) {
  check_dtype("logical_not", x, "self", {DType::Bool, DType::I32, DType::F32});
  const char* expr = x.dtype() == DType::F32 ? "bool_word(x0 == 0.0)"
                     : x.dtype() == DType::I32 ? "bool_word(x0 == 0)"
                                              : "bool_word(x0 == 0u)";
  return run_map("logical_not", {expr, DType::Bool}, {x}, x.shape());
}

namespace detail {

void register_select_ops(Registry& r) {
  for (const auto& [name, sym] : compare_table()) {
    OpSchema s;
    s.name = name;
    s.family = "select";
    s.summary = std::string("self ") + sym + " other, as bool";
    s.inputs = {"self", "other"};
    s.outputs = {"out"};
    s.dtypes = {DType::F32, DType::I32, DType::Bool};
    s.constraints = {"inputs broadcast", "both inputs of one dtype"};
    const std::string op = name;
    s.run = [op](Device&, const OpTensors& in, const OpArgs&) {
      return OpTensors{{"out", compare(op, input(in, "self"), input(in, "other"))}};
    };
    r.add(std::move(s));

    OpSchema sc;
    sc.name = name + ".Scalar";
    sc.family = "select";
    sc.summary = std::string("self ") + sym + " other (a number), as bool";
    sc.inputs = {"self"};
    sc.args = {{"other", "float", "", "the scalar (required)"}};
    sc.outputs = {"out"};
    sc.dtypes = {DType::F32, DType::I32};
    sc.run = [op](Device&, const OpTensors& in, const OpArgs& args) {
      if (!args.has("other")) throw ArgumentError(op + ".Scalar: missing argument other=<number>");
      return OpTensors{{"out", compare_scalar(op, input(in, "self"), args.get_float("other", 0))}};
    };
    r.add(std::move(sc));
  }

  OpSchema w;
  w.name = "where";
  w.family = "select";
  w.summary = "condition ? self : other";
  w.inputs = {"condition", "self", "other"};
  w.outputs = {"out"};
  w.dtypes = {DType::F32, DType::I32, DType::Bool};
  w.constraints = {"condition is bool", "self and other of one dtype", "all three broadcast"};
  w.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", where(input(in, "condition"), input(in, "self"), input(in, "other"))}};
  };
  r.add(std::move(w));

  OpSchema m;
  m.name = "masked_fill.Scalar";
  m.family = "select";
  m.summary = "value where mask, else self";
  m.inputs = {"self", "mask"};
  m.args = {{"value", "float", "", "the fill value (required)"}};
  m.outputs = {"out"};
  m.dtypes = {DType::F32, DType::I32};
  m.constraints = {"mask is bool and broadcasts to self"};
  m.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("value")) throw ArgumentError("masked_fill.Scalar: missing argument value=<number>");
    return OpTensors{{"out", masked_fill(input(in, "self"), input(in, "mask"), args.get_float("value", 0))}};
  };
  r.add(std::move(m));

  OpSchema n;
  n.name = "logical_not";
  n.family = "select";
  n.summary = "self == 0, as bool";
  n.inputs = {"self"};
  n.outputs = {"out"};
  n.dtypes = {DType::Bool, DType::I32, DType::F32};
  n.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", logical_not(input(in, "self"))}};
  };
  r.add(std::move(n));
}

}  // namespace detail
}  // namespace wgtrain::ops
