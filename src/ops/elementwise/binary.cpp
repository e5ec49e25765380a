// Elementwise binary ops: add, sub, mul, div; tensor-tensor with broadcasting, and tensor-scalar.
#include <cmath>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

enum class BinaryOp : uint32_t { Add = 0, Sub = 1, Mul = 2, Div = 3 };

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "?";
}

struct alignas(16) BinaryParams {
  uint32_t n, rank, a_off, b_off;
  uint32_t contiguous, b_is_scalar;
  float alpha, scalar;
  U32x8 shape, a_strides, b_strides;
};
static_assert(sizeof(BinaryParams) == 128);

// a, b: views of the output's shape; b null for the scalar form.
Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor* b, float scalar, float alpha, const char* name) {
  DeviceImpl& dev = a.device_impl();
  const Shape& shape = a.shape();
  Tensor out = new_tensor(dev, shape, a.dtype());
  const int64_t n = numel(shape);
  if (n == 0) return out;

  std::vector<Shape> strides = {a.strides()};
  if (b) strides.push_back(b->strides());
  const Coalesced c = coalesce(shape, strides);

  BinaryParams p{};
  p.n = u32(n, "element count");
  p.a_off = u32(a.offset(), "offset");
  p.b_off = b ? u32(b->offset(), "offset") : 0;
  p.b_is_scalar = b ? 0 : 1;
  p.alpha = alpha;
  p.scalar = scalar;
  p.rank = static_cast<uint32_t>(c.shape.size());
  const bool dense_a = c.shape.size() == 1 && c.strides[0][0] == 1;
  const bool dense_b = !b || (c.shape.size() == 1 && c.strides[1][0] == 1);
  p.contiguous = dense_a && dense_b ? 1 : 0;
  fill_u32x8(p.shape, c.shape, name);
  fill_u32x8(p.a_strides, c.strides[0], name);
  if (b) fill_u32x8(p.b_strides, c.strides[1], name);

  const auto& pipe = dev.pipeline("elementwise/binary", {{"OP", std::to_string(static_cast<uint32_t>(op))}});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n) + 255) / 256);
  dev.dispatch({name, &pipe, &p, sizeof p,
                {{a.storage()->buffer}, {(b ? *b : a).storage()->buffer}, {out.storage()->buffer}}, gx, gy, 1});
  return out;
}

Tensor binary_tensor(BinaryOp op, const Tensor& a, const Tensor& b, float alpha) {
  const char* name = op_name(op);
  check_dtype(name, a, "self", {DType::F32});
  check_dtype(name, b, "other", {DType::F32});
  check_same_device(name, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  const Tensor ea = a.expand(shape), eb = b.expand(shape);
  return run_binary(op, ea, &eb, 0.0f, alpha, name);
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, float s) {
  const char* name = op_name(op);
  check_dtype(name, a, "self", {DType::F32});
  return run_binary(op, a, nullptr, s, 1.0f, name);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, float alpha) { return binary_tensor(BinaryOp::Add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, float alpha) { return binary_tensor(BinaryOp::Sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_tensor(BinaryOp::Mul, a, b, 1.0f); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_tensor(BinaryOp::Div, a, b, 1.0f); }
Tensor add(const Tensor& a, float s) { return binary_scalar(BinaryOp::Add, a, s); }
Tensor sub(const Tensor& a, float s) { return binary_scalar(BinaryOp::Sub, a, s); }
Tensor mul(const Tensor& a, float s) { return binary_scalar(BinaryOp::Mul, a, s); }
Tensor div(const Tensor& a, float s) { return binary_scalar(BinaryOp::Div, a, s); }

namespace detail {

void register_elementwise_ops(Registry& r) {
  const std::vector<std::string> bcast = {"self and other broadcast (NumPy rules)"};
  auto tensor_op = [&](const std::string& name, const std::string& summary, bool has_alpha,
                       Tensor (*fn)(const Tensor&, const Tensor&, float)) {
    OpSchema s;
    s.name = name;
    s.family = "elementwise";
    s.summary = summary;
    s.inputs = {"self", "other"};
    if (has_alpha) s.args = {{"alpha", "float", "1", "scale of other"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    s.constraints = bcast;
    s.run = [fn](Device&, const OpTensors& in, const OpArgs& args) {
      return OpTensors{{"out", fn(input(in, "self"), input(in, "other"),
                                  static_cast<float>(args.get_float("alpha", 1.0)))}};
    };
    r.add(std::move(s));
  };
  tensor_op("add", "self + alpha * other", true, [](const Tensor& a, const Tensor& b, float al) { return add(a, b, al); });
  tensor_op("sub", "self - alpha * other", true, [](const Tensor& a, const Tensor& b, float al) { return sub(a, b, al); });
  tensor_op("mul", "self * other", false, [](const Tensor& a, const Tensor& b, float) { return mul(a, b); });
  tensor_op("div", "self / other", false, [](const Tensor& a, const Tensor& b, float) { return div(a, b); });

  auto scalar_op = [&](const std::string& name, const std::string& summary, Tensor (*fn)(const Tensor&, float)) {
    OpSchema s;
    s.name = name;
    s.family = "elementwise";
    s.summary = summary;
    s.inputs = {"self"};
    s.args = {{"other", "float", "", "the scalar (required)"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    s.run = [fn, name](Device&, const OpTensors& in, const OpArgs& args) {
      if (!args.has("other")) throw ArgumentError(name + ": missing argument other=<number>");
      return OpTensors{{"out", fn(input(in, "self"), static_cast<float>(args.get_float("other", 0.0)))}};
    };
    r.add(std::move(s));
  };
  scalar_op("add.Scalar", "self + other (a number)", [](const Tensor& a, float s) { return add(a, s); });
  scalar_op("sub.Scalar", "self - other (a number)", [](const Tensor& a, float s) { return sub(a, s); });
  scalar_op("mul.Scalar", "self * other (a number)", [](const Tensor& a, float s) { return mul(a, s); });
  scalar_op("div.Scalar", "self / other (a number)", [](const Tensor& a, float s) { return div(a, s); });

}

}  // namespace detail
}  // namespace wgtrain::ops
