// _softmax and _log_softmax along any dim (softmax.wgsl), and the softmax's gradient (softmax_backward.wgsl).
#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) SoftmaxParams {
  uint32_t rows, len, inner, x_off;
};
struct alignas(16) SoftmaxBackwardParams {
  uint32_t rows, len, inner, dy_off, y_off, pad0, pad1, pad2;
};

// outer * inner rows of `len` along dim d of a contiguous shape.
struct Rows {
  int64_t outer = 1, len = 1, inner = 1;
};
Rows rows_of(const Tensor& x, int d) {
  Rows r;
  r.len = x.rank() == 0 ? 1 : x.size(d);
  for (int i = 0; i < d; ++i) r.outer *= x.size(i);
  for (int i = d + 1; i < x.rank(); ++i) r.inner *= x.size(i);
  return r;
}

Tensor softmax_impl(const char* op, const Tensor& x_in, int dim, bool log, bool causal) {
  check_dtype(op, x_in, "self", {DType::F32});
  const int d = normalize_dim(dim, x_in.rank());
  if (causal && (d != x_in.rank() - 1 || x_in.rank() < 2 || x_in.size(-2) != x_in.size(-1)))
    throw ArgumentError(std::string(op) + ": a causal softmax runs over the last dim of square [..., T, T] rows, got " +
                        shape_str(x_in.shape()) + " dim " + std::to_string(dim));
  const Tensor x = contiguous(x_in);
  DeviceImpl& dev = x.device_impl();
  Tensor y = new_tensor(dev, x.shape(), DType::F32);
  if (x.numel() == 0) return y;
  const Rows r = rows_of(x, d);
  SoftmaxParams p{};
  p.rows = u32(r.outer * r.inner, "rows");
  p.len = u32(r.len, "length");
  p.inner = u32(r.inner, "inner size");
  p.x_off = u32(x.offset(), "offset");
  const uint32_t seg = row_segment(r.len);
  const auto& pipe = dev.pipeline("softmax/softmax", {{"LOG", log ? "true" : "false"},
                                                      {"SEG", std::to_string(seg)},
                                                      {"CAUSAL", causal ? "true" : "false"}});
  const auto [gx, gy] = row_grid(dev, p.rows, seg);
  dev.dispatch({op, &pipe, &p, sizeof p, {{x.storage()->buffer}, {y.storage()->buffer}}, gx, gy, 1});
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int dim, bool causal) { return softmax_impl("_softmax", x, dim, false, causal); }

Tensor softmax_backward(const Tensor& grad, const Tensor& output, int dim) {
  const char* op = "_softmax_backward_data";
  check_dtype(op, grad, "grad_output", {DType::F32});
  check_dtype(op, output, "output", {DType::F32});
  check_same_device(op, grad, output);
  if (grad.shape() != output.shape())
    throw ArgumentError(std::string(op) + ": grad_output " + shape_str(grad.shape()) + " and output " +
                        shape_str(output.shape()) + " differ");
  const int d = normalize_dim(dim, output.rank());
  const Tensor g = contiguous(grad), y = contiguous(output);
  DeviceImpl& dev = y.device_impl();
  Tensor dx = new_tensor(dev, y.shape(), DType::F32);
  if (y.numel() == 0) return dx;
  const Rows r = rows_of(y, d);
  SoftmaxBackwardParams p{u32(r.outer * r.inner, "rows"), u32(r.len, "length"), u32(r.inner, "inner size"),
                          u32(g.offset(), "offset"), u32(y.offset(), "offset"), 0, 0, 0};
  const uint32_t seg = row_segment(r.len);
  const auto& pipe = dev.pipeline("softmax/softmax_backward", {{"SEG", std::to_string(seg)}});
  const auto [gx, gy] = row_grid(dev, p.rows, seg);
  dev.dispatch({op, &pipe, &p, sizeof p, {{g.storage()->buffer}, {y.storage()->buffer}, {dx.storage()->buffer}},
                gx, gy, 1});
  return dx;
}
Tensor log_softmax(const Tensor& x, int dim) { return softmax_impl("_log_softmax", x, dim, true, false); }

namespace detail {

void register_softmax_ops(Registry& r) {
  for (bool log : {false, true}) {
    OpSchema s;
    s.name = log ? "_log_softmax" : "_softmax";
    s.family = "softmax";
    s.summary = log ? "log(softmax(self)) along dim, computed as self - max - log(sum exp(self - max))"
                    : "exp(self - max) / sum(exp(self - max)) along dim";
    s.inputs = {"self"};
    s.args = {{"dim", "int", "-1", "the dim to normalise over (negative counts from the end)"}};
    if (!log)
      s.args.push_back({"causal", "bool", "false",
                        "rows of square [..., T, T] (dim -1): entries past the diagonal count as -inf"});
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    s.constraints = {"dim in [-rank, rank)", "a row of all -inf gives NaN, as in PyTorch"};
    s.run = [log](Device&, const OpTensors& in, const OpArgs& args) {
      const int dim = static_cast<int>(args.get_int("dim", -1));
      return OpTensors{{"out", log ? log_softmax(input(in, "self"), dim)
                                   : softmax(input(in, "self"), dim, args.get_bool("causal", false))}};
    };
    r.add(std::move(s));
  }
  OpSchema b;
  b.name = "_softmax_backward_data";
  b.family = "softmax";
  b.summary = "the softmax's gradient: output * (grad_output - sum(grad_output * output)) along dim";
  b.inputs = {"grad_output", "output"};
  b.args = {{"dim", "int", "-1", "the dim the softmax normalised over"}};
  b.outputs = {"out"};
  b.dtypes = {DType::F32};
  b.training_only = true;
  b.constraints = {"grad_output and output of one shape", "output is the softmax's result"};
  b.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    return OpTensors{{"out", softmax_backward(input(in, "grad_output"), input(in, "output"),
                                              static_cast<int>(args.get_int("dim", -1)))}};
  };
  r.add(std::move(b));
}

}  // namespace detail
}  // namespace wgtrain::ops
