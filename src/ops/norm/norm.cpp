// rms_norm and rms_norm_backward (rms_norm.wgsl, rms_norm_backward.wgsl).
#include <algorithm>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

// rms_norm_backward's partial sums of the weight's gradient: kNormParts (where there are as many rows), up to twice
// as many where its segments are narrow, to keep about kNormThreads threads busy.
constexpr int64_t kNormParts = 1024, kNormThreads = 131072;

struct alignas(16) NormParams {
  uint32_t rows, dim, x_off, w_off;  // dim and the offsets in elements of the kernel's T (float or vec4)
  float eps;
  uint32_t elems, pad1, pad2;        // elems: a row's floats
};
struct alignas(16) NormBackwardParams {
  uint32_t rows, dim, dy_off, x_off, w_off, r_off, add_off, per_seg;  // as NormParams; r_off in floats
  uint32_t elems, pad0, pad1, pad2;
};

void check_weight(const char* op, const Tensor& x, const Tensor& weight) {
  check_dtype(op, x, "input", {DType::F32});
  check_dtype(op, weight, "weight", {DType::F32});
  check_same_device(op, x, weight);
  if (x.rank() < 1) throw ArgumentError(std::string(op) + ": input needs at least 1 dim");
  if (weight.rank() != 1 || weight.size(0) != x.size(-1))
    throw ArgumentError(std::string(op) + ": weight " + shape_str(weight.shape()) + " must be [" +
                        std::to_string(x.size(-1)) + "], the input's last dim");
}

}  // namespace

RmsNorm rms_norm(const Tensor& x_in, const Tensor& weight_in, double eps) {
  check_weight("rms_norm", x_in, weight_in);
  if (!(eps > 0)) throw ArgumentError("rms_norm: eps must be > 0");
  const Tensor x = contiguous(x_in), w = contiguous(weight_in);
  DeviceImpl& dev = x.device_impl();
  const int64_t dim = x.size(-1), rows = dim ? x.numel() / dim : 0;
  RmsNorm out;
  out.y = new_tensor(dev, x.shape(), DType::F32);
  out.rstd = new_tensor(dev, Shape(x.shape().begin(), x.shape().end() - 1), DType::F32);
  if (rows == 0 || dim == 0) return out;
  const int64_t v = vec_width(dim, {x.offset(), w.offset()});
  NormParams p{u32(rows, "rows"),
               u32(dim / v, "dim"),
               u32(x.offset() / v, "offset"),
               u32(w.offset() / v, "offset"),
               static_cast<float>(eps),
               u32(dim, "dim"),
               0,
               0};
  const uint32_t seg = row_segment(dim / v);
  const auto [gx, gy] = row_grid(dev, rows, seg);
  const auto& pipe = dev.pipeline("norm/rms_norm", {{"SEG", std::to_string(seg)},
                                                    {"T", v == 4 ? "vec4<f32>" : "f32"},
                                                    {"V4", v == 4 ? "true" : "false"}});
  dev.dispatch({"rms_norm", &pipe, &p, sizeof p,
                {{x.storage()->buffer}, {w.storage()->buffer}, {out.y.storage()->buffer}, {out.rstd.storage()->buffer}},
                gx, gy, 1});
  return out;
}

RmsNormGrads rms_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight_in,
                               const Tensor& rstd_in, const Tensor* addend_in, const Tensor* dweight_acc) {
  const char* op = "rms_norm_backward";
  check_weight(op, x_in, weight_in);
  check_dtype(op, dy_in, "grad_output", {DType::F32});
  check_dtype(op, rstd_in, "rstd", {DType::F32});
  if (dy_in.shape() != x_in.shape())
    throw ArgumentError(std::string(op) + ": grad_output " + shape_str(dy_in.shape()) + " and input " +
                        shape_str(x_in.shape()) + " differ");
  const Shape rows_shape(x_in.shape().begin(), x_in.shape().end() - 1);
  if (rstd_in.shape() != rows_shape)
    throw ArgumentError(std::string(op) + ": rstd " + shape_str(rstd_in.shape()) + " should be " +
                        shape_str(rows_shape) + " (one per row)");
  if (addend_in) {
    check_dtype(op, *addend_in, "dx_addend", {DType::F32});
    check_same_device(op, x_in, *addend_in);
    if (addend_in->shape() != x_in.shape())
      throw ArgumentError(std::string(op) + ": dx_addend " + shape_str(addend_in->shape()) + " and input " +
                          shape_str(x_in.shape()) + " differ");
  }
  if (dweight_acc) {
    check_dtype(op, *dweight_acc, "dweight_acc", {DType::F32});
    check_same_device(op, x_in, *dweight_acc);
    if (dweight_acc->shape() != weight_in.shape() || !dweight_acc->is_contiguous())
      throw ArgumentError(std::string(op) + ": dweight_acc " + shape_str(dweight_acc->shape()) +
                          " must be contiguous, of the weight's shape " + shape_str(weight_in.shape()));
  }
  const Tensor dy = contiguous(dy_in), x = contiguous(x_in), w = contiguous(weight_in), r = contiguous(rstd_in);
  const Tensor addend = addend_in ? contiguous(*addend_in) : Tensor();
  DeviceImpl& dev = x.device_impl();
  const int64_t dim = x.size(-1), rows = dim ? x.numel() / dim : 0;
  RmsNormGrads g;
  g.dx = new_tensor(dev, x.shape(), DType::F32);
  const int64_t v = vec_width(dim, {dy.offset(), x.offset(), w.offset(), addend_in ? addend.offset() : 0});
  const uint32_t seg = row_segment(dim / v);
  // Each segment sums the weight's gradient over per_seg rows into one part, summed below (one part a row would
  // write and read the whole [rows, dim] again).
  const int64_t parts = std::clamp<int64_t>(kNormThreads / seg, kNormParts, 2 * kNormParts);
  const int64_t per_seg = std::max<int64_t>(1, (rows + parts - 1) / parts);
  const int64_t segs = (rows + per_seg - 1) / per_seg;
  const Tensor part = new_tensor(dev, {segs, dim}, DType::F32);
  if (rows > 0 && dim > 0) {
    NormBackwardParams p{u32(rows, "rows"),
                         u32(dim / v, "dim"),
                         u32(dy.offset() / v, "offset"),
                         u32(x.offset() / v, "offset"),
                         u32(w.offset() / v, "offset"),
                         u32(r.offset(), "offset"),
                         addend_in ? u32(addend.offset() / v, "offset") : 0u,
                         u32(per_seg, "rows a segment"),
                         u32(dim, "dim"),
                         0,
                         0,
                         0};
    const auto [gx, gy] = row_grid(dev, segs, seg);
    const auto& pipe = dev.pipeline("norm/rms_norm_backward", {{"SEG", std::to_string(seg)},
                                                               {"ADD", addend_in ? "true" : "false"},
                                                               {"T", v == 4 ? "vec4<f32>" : "f32"},
                                                               {"V4", v == 4 ? "true" : "false"}});
    wgtrain::detail::DispatchDesc d{op,
                                    &pipe,
                                    &p,
                                    sizeof p,
                                    {{dy.storage()->buffer},
                                     {x.storage()->buffer},
                                     {w.storage()->buffer},
                                     {r.storage()->buffer},
                                     {g.dx.storage()->buffer},
                                     {part.storage()->buffer}},
                                    gx,
                                    gy,
                                    1};
    if (addend_in) d.storage.push_back({addend.storage()->buffer});
    d.read_only = 0b1001111;  // all but dx and the parts
    dev.dispatch(d);
  }
  if (dweight_acc) {
    sum_rows_into(op, part, *dweight_acc, true);
    g.dweight = *dweight_acc;
  } else {
    g.dweight = sum(part, {0});
  }
  return g;
}

namespace detail {

void register_norm_ops(Registry& r) {
  OpSchema f;
  f.name = "rms_norm";
  f.family = "norm";
  f.summary = "input * rstd * weight over the last dim, rstd = 1 / sqrt(mean(input^2) + eps)";
  f.inputs = {"input", "weight"};
  f.args = {{"eps", "float", "1e-5", "added to the mean square"}};
  f.outputs = {"out", "rstd"};
  f.dtypes = {DType::F32};
  f.min_rank = 1;
  f.constraints = {"weight is [input.size(-1)]", "rstd has input's shape without its last dim"};
  f.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    RmsNorm n = rms_norm(input(in, "input"), input(in, "weight"), args.get_float("eps", 1e-5));
    return OpTensors{{"out", n.y}, {"rstd", n.rstd}};
  };
  r.add(std::move(f));

  OpSchema b;
  b.name = "rms_norm_backward";
  b.family = "norm";
  b.summary = "gradients of rms_norm: grad_input, and grad_weight summed over rows";
  b.inputs = {"grad_output", "input", "weight", "rstd"};
  b.outputs = {"grad_input", "grad_weight"};
  b.dtypes = {DType::F32};
  b.min_rank = 1;
  b.training_only = true;
  b.constraints = {"rstd is the forward's", "grad_output has input's shape"};
  b.run = [](Device&, const OpTensors& in, const OpArgs&) {
    RmsNormGrads g =
        rms_norm_backward(input(in, "grad_output"), input(in, "input"), input(in, "weight"), input(in, "rstd"));
    return OpTensors{{"grad_input", g.dx}, {"grad_weight", g.dweight}};
  };
  r.add(std::move(b));
}

}  // namespace detail
}  // namespace wgtrain::ops
