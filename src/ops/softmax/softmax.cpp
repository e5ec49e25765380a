// _softmax and _log_softmax along any dim (softmax.wgsl).
#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) SoftmaxParams {
  uint32_t rows, len, inner, x_off;
};

Tensor softmax_impl(const char* op, const Tensor& x_in, int dim, bool log) {
  check_dtype(op, x_in, "self", {DType::F32});
  const int d = normalize_dim(dim, x_in.rank());
  const Tensor x = contiguous(x_in);
  DeviceImpl& dev = x.device_impl();
  Tensor y = new_tensor(dev, x.shape(), DType::F32);
  if (x.numel() == 0) return y;
  int64_t outer = 1, inner = 1;
  const int64_t len = x.rank() == 0 ? 1 : x.size(d);
  for (int i = 0; i < d; ++i) outer *= x.size(i);
  for (int i = d + 1; i < x.rank(); ++i) inner *= x.size(i);
  SoftmaxParams p{};
  p.rows = u32(outer * inner, "rows");
  p.len = u32(len, "length");
  p.inner = u32(inner, "inner size");
  p.x_off = u32(x.offset(), "offset");
  const auto& pipe = dev.pipeline("softmax/softmax", {{"LOG", log ? "true" : "false"}});
  const auto [gx, gy] = dev.grid(p.rows);
  dev.dispatch({op, &pipe, &p, sizeof p, {{x.storage()->buffer}, {y.storage()->buffer}}, gx, gy, 1});
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int dim) { return softmax_impl("_softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int dim) { return softmax_impl("_log_softmax", x, dim, true); }

namespace detail {

void register_softmax_ops(Registry& r) {
  for (bool log : {false, true}) {
    OpSchema s;
    s.name = log ? "_log_softmax" : "_softmax";
    s.family = "softmax";
    s.summary = log ? "log(softmax(self)) along dim, computed as x - max - log(sum exp(x - max))"
                    : "exp(self - max) / sum(exp(self - max)) along dim";
    s.inputs = {"self"};
    s.args = {{"dim", "int", "-1", "the dim to normalise over (negative counts from the end)"}};
    s.outputs = {"out"};
    s.dtypes = {DType::F32};
    s.constraints = {"dim in [-rank, rank)", "a row of all -inf gives NaN, as in PyTorch"};
    s.run = [log](Device&, const OpTensors& in, const OpArgs& args) {
      const int dim = static_cast<int>(args.get_int("dim", -1));
      return OpTensors{{"out", log ? log_softmax(input(in, "self"), dim) : softmax(input(in, "self"), dim)}};
    };
    r.add(std::move(s));
  }
}

}  // namespace detail
}  // namespace wgtrain::ops
