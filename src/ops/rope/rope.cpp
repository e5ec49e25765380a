// rope: rotary position embedding and, inverted, its gradient (rope.wgsl).
#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) RopeParams {
  uint32_t pairs, half, heads, time, x_off, cos_off, sin_off, table_stride;
  float scale;
  uint32_t pad0, pad1, pad2;
};

}  // namespace

Tensor rope(const Tensor& x_in, const Tensor& cos, const Tensor& sin, bool inverse, double scale) {
  const char* op = "rope";
  check_dtype(op, x_in, "self", {DType::F32});
  check_dtype(op, cos, "cos", {DType::F32});
  check_dtype(op, sin, "sin", {DType::F32});
  check_same_device(op, x_in, cos);
  check_same_device(op, x_in, sin);
  if (x_in.rank() < 3) throw ArgumentError("rope: self must be [..., T, H, head_dim], got " + shape_str(x_in.shape()));
  const int64_t T = x_in.size(-3), H = x_in.size(-2), hd = x_in.size(-1);
  if (hd % 2) throw ArgumentError("rope: the head dim " + std::to_string(hd) + " must be even");
  check_rank(op, cos, "cos", 2);
  check_rank(op, sin, "sin", 2);
  if (cos.shape() != sin.shape() || cos.size(0) < T || cos.size(1) != hd / 2)
    throw ArgumentError("rope: cos " + shape_str(cos.shape()) + " and sin " + shape_str(sin.shape()) +
                        " must both be [>= " + std::to_string(T) + ", " + std::to_string(hd / 2) + "]");
  if (cos.strides()[1] != 1 || sin.strides()[1] != 1 || cos.strides()[0] != sin.strides()[0])
    throw ArgumentError("rope: cos and sin must be row-major tables of one layout");
  const Tensor x = contiguous(x_in);
  DeviceImpl& dev = x.device_impl();
  Tensor y = new_tensor(dev, x.shape(), DType::F32);
  if (x.numel() == 0) return y;
  // Four pairs a thread where the halves, offsets and table rows are whole vec4s.
  const int64_t w = vec_width(hd / 2, {x.offset(), cos.offset(), sin.offset(), cos.strides()[0]});
  const bool v4 = w == 4;
  RopeParams p{u32(x.numel() / 2 / w, "pairs"),
               u32(hd / 2 / w, "half"),
               u32(H, "heads"),
               u32(T, "time"),
               u32(x.offset() / w, "offset"),
               u32(cos.offset() / w, "offset"),
               u32(sin.offset() / w, "offset"),
               u32(cos.strides()[0] / w, "table stride"),
               static_cast<float>(scale),
               0,
               0,
               0};
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(p.pairs) + 255) / 256);
  const auto& pipe =
      dev.pipeline("rope/rope", {{"INVERSE", inverse ? "true" : "false"}, {"T", v4 ? "vec4<f32>" : "f32"}});
  dev.dispatch({op, &pipe, &p, sizeof p,
                {{x.storage()->buffer}, {cos.storage()->buffer}, {sin.storage()->buffer}, {y.storage()->buffer}},
                gx, gy, 1});
  return y;
}

namespace detail {

void register_rope_ops(Registry& r) {
  OpSchema s;
  s.name = "rope";
  s.family = "rope";
  s.summary = "rotary embedding of self[..., T, H, hd]: pairs (i, i + hd/2) rotated by cos/sin[t][i], times scale";
  s.inputs = {"self", "cos", "sin"};
  s.args = {{"inverse", "bool", "false", "rotate the other way (the gradient)"},
            {"scale", "float", "1", "multiplies the result (e.g. 1/sqrt(hd) for queries)"}};
  s.outputs = {"out"};
  s.dtypes = {DType::F32};
  s.min_rank = 2;  // the tables; self itself needs rank >= 3
  s.constraints = {"self [..., T, H, hd] with rank >= 3 and hd even", "cos and sin [>= T, hd / 2]"};
  s.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    return OpTensors{{"out", rope(input(in, "self"), input(in, "cos"), input(in, "sin"),
                                  args.get_bool("inverse", false), args.get_float("scale", 1.0))}};
  };
  r.add(std::move(s));
}

}  // namespace detail
}  // namespace wgtrain::ops
