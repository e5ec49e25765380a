#include "ops/elementwise/map.h"

#include <algorithm>
#include <vector>

#include "wgtrain/device.h"

namespace wgtrain::ops::detail {

StridedParams strided_params(const Shape& shape, const std::vector<const Tensor*>& views, const char* op) {
  StridedParams p{};
  p.n = u32(numel(shape), "element count");
  std::vector<Shape> strides;
  for (const Tensor* v : views) strides.push_back(v->strides());
  const Coalesced c = coalesce(shape, strides);
  p.rank = static_cast<uint32_t>(c.shape.size());
  bool dense = c.shape.size() == 1;
  for (size_t k = 0; k < views.size(); ++k) {
    p.off[k] = u32(views[k]->offset(), "offset");
    dense = dense && c.strides[k][0] == 1;
  }
  p.dense = dense ? 1 : 0;
  fill_u32x8(p.shape, c.shape, op);
  U32x8* dst[3] = {&p.strides0, &p.strides1, &p.strides2};
  for (size_t k = 0; k < views.size(); ++k) fill_u32x8(*dst[k], c.strides[k], op);
  return p;
}

namespace {
std::string vec4_of(const char* scalar) { return std::string("vec4<") + scalar + ">"; }

}  // namespace

const char* wgsl_type(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::Bool: return "u32";
  }
  return "?";
}

Tensor run_map(const char* op, const MapKernel& k, std::initializer_list<Tensor> operands, const Shape& shape,
               std::array<float, 4> fscalar, std::array<int32_t, 4> iscalar) {
  std::vector<const Tensor*> views;
  for (const Tensor& t : operands) views.push_back(&t);
  if (views.empty() || views.size() > 3) throw Error(std::string(op) + ": a map takes 1 to 3 operands");
  for (size_t i = 1; i < views.size(); ++i) check_same_device(op, *views[0], *views[i]);
  DeviceImpl& dev = views[0]->device_impl();
  Tensor out = new_tensor(dev, shape, k.out);
  if (numel(shape) == 0) return out;

  StridedParams p = strided_params(shape, views, op);
  p.flags = (views.size() > 1 ? 1u : 0u) | (views.size() > 2 ? 2u : 0u);
  // Dense and 16-byte aligned everywhere: the same kernel over vec4 elements.
  bool vec4 = k.vectorizable && p.dense && p.n % 4 == 0;
  for (size_t i = 0; i < views.size(); ++i) vec4 = vec4 && p.off[i] % 4 == 0;
  const uint32_t unit = vec4 ? 4 : 1;
  p.n /= unit;
  for (auto& o : p.off) o /= unit;
  auto type = [&](DType t) { return vec4 ? vec4_of(wgsl_type(t)) : std::string(wgsl_type(t)); };
  std::copy(fscalar.begin(), fscalar.end(), p.fscalar);
  std::copy(iscalar.begin(), iscalar.end(), p.iscalar);

  const Tensor& t1 = views.size() > 1 ? *views[1] : *views[0];
  const Tensor& t2 = views.size() > 2 ? *views[2] : *views[0];
  const auto& pipe = dev.pipeline("elementwise/map", {{"T0", type(views[0]->dtype())},
                                                      {"T1", type(t1.dtype())},
                                                      {"T2", type(t2.dtype())},
                                                      {"TOUT", type(k.out)},
                                                      {"EXPR", k.expr}});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(p.n) + 255) / 256);
  dev.dispatch({op, &pipe, &p, sizeof p,
                {{views[0]->storage()->buffer}, {t1.storage()->buffer}, {t2.storage()->buffer}, {out.storage()->buffer}},
                gx, gy, 1});
  return out;
}

Tensor clone(const Tensor& x) {
  check_defined("clone", x, "self");
  return run_map("clone", {"x0", x.dtype(), true}, {x}, x.shape());
}

void copy_into(const char* op, const Tensor& dst, const Tensor& src) {
  check_same_device(op, dst, src);
  if (dst.shape() != src.shape())
    throw ArgumentError(std::string(op) + ": cannot copy " + shape_str(src.shape()) + " into " +
                        shape_str(dst.shape()));
  if (dst.dtype() != src.dtype())
    throw ArgumentError(std::string(op) + ": cannot copy " + dtype_name(src.dtype()) + " into " +
                        dtype_name(dst.dtype()));
  if (dst.numel() == 0) return;
  for (size_t d = 0; d < dst.shape().size(); ++d)
    if (dst.strides()[d] == 0 && dst.shape()[d] > 1)
      throw ArgumentError(std::string(op) + ": the destination is a broadcast view (several elements share memory)");
  // A read and a write binding of one buffer may not meet in a dispatch: stage such a source through a copy.
  const Tensor staged = src.storage() == dst.storage()
                            ? clone(src)
                            : src;
  copy_view(op, dst, staged);
}

}  // namespace wgtrain::ops::detail
