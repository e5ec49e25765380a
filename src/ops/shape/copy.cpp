// Dim-order copy: any strided view (transpose, permute, slice, expand) to a new contiguous tensor.
#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) CopyParams {
  uint32_t n, rank, src_off, pad;
  U32x8 shape, strides;
};
static_assert(sizeof(CopyParams) == 80);

}  // namespace

Tensor contiguous(const Tensor& x) {
  check_defined("contiguous", x, "self");
  if (x.is_contiguous()) return x;
  DeviceImpl& dev = x.device_impl();
  Tensor out = new_tensor(dev, x.shape(), x.dtype());
  const int64_t n = x.numel();
  if (n == 0) return out;
  const Coalesced c = coalesce(x.shape(), {x.strides()});
  CopyParams p{};
  p.n = u32(n, "element count");
  p.rank = static_cast<uint32_t>(c.shape.size());
  p.src_off = u32(x.offset(), "offset");
  fill_u32x8(p.shape, c.shape, "contiguous");
  fill_u32x8(p.strides, c.strides[0], "contiguous");
  const auto& pipe = dev.pipeline("shape/copy", {});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n) + 255) / 256);
  dev.dispatch({"contiguous", &pipe, &p, sizeof p, {{x.storage()->buffer}, {out.storage()->buffer}}, gx, gy, 1});
  return out;
}

namespace detail {

void register_shape_ops(Registry& r) {
  OpSchema c;
  c.name = "contiguous";
  c.family = "shape";
  c.summary = "a row-major copy of any strided view (dim-order copy)";
  c.inputs = {"self"};
  c.outputs = {"out"};
  c.dtypes = {DType::F32, DType::I32, DType::Bool};
  c.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", contiguous(input(in, "self"))}};
  };
  r.add(std::move(c));
}

}  // namespace detail
}  // namespace wgtrain::ops
