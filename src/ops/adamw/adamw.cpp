// adamw_step: adamw.wgsl over segment tables, one dispatch per set of shared buffers.
#include "wgtrain/adamw.h"

#include <cmath>
#include <map>
#include <tuple>

#include "ops/common.h"
#include "ops/elementwise/map.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) AdamWParams {
  uint32_t total, segments, pad0, pad1;
  float one_minus_beta1, beta2, one_minus_beta2, eps;
  float neg_step_size, sqrt_bc2, pad2, pad3;
};
static_assert(sizeof(AdamWParams) == 48);

struct Segment {
  uint32_t start, len, p_off, g_off, m_off, v_off;
  float decay;
  uint32_t pad;
};
static_assert(sizeof(Segment) == 32);

}  // namespace

void adamw_step(const std::vector<AdamWParam>& params, const AdamWOptions& o, int64_t step) {
  if (step < 1) throw ArgumentError("adamw_step: step counts from 1, got " + std::to_string(step));
  if (!(o.lr >= 0) || !(o.eps > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw ArgumentError("adamw_step: need lr >= 0, eps > 0, 0 <= beta1, beta2 < 1");
  using Key = std::tuple<const wgtrain::detail::Storage*, const wgtrain::detail::Storage*, const wgtrain::detail::Storage*,
                         const wgtrain::detail::Storage*>;
  std::map<Key, std::vector<const AdamWParam*>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWParam& p = params[i];
    const std::string what = "adamw_step: parameter " + std::to_string(i);
    for (const Tensor* t : {&p.param, &p.grad, &p.m, &p.v}) {
      check_dtype(what.c_str(), *t, "tensor", {DType::F32});
      if (!t->is_contiguous()) throw ArgumentError(what + ": tensors must be contiguous");
      if (t->shape() != p.param.shape())
        throw ArgumentError(what + ": param " + shape_str(p.param.shape()) + ", grad " + shape_str(p.grad.shape()) +
                            ", m " + shape_str(p.m.shape()) + ", v " + shape_str(p.v.shape()) + " differ");
      check_same_device(what.c_str(), *t, p.param);
    }
    const wgtrain::detail::Storage* s[4] = {p.param.storage().get(), p.grad.storage().get(), p.m.storage().get(),
                                   p.v.storage().get()};
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        if (s[a] == s[b]) throw ArgumentError(what + ": param, grad, m and v must live in four different buffers");
    groups[{s[0], s[1], s[2], s[3]}].push_back(&p);
  }
  // Torch's scalars, rounded to f32 where torch's kernels use them as f32.
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  AdamWParams u{};
  u.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  u.beta2 = static_cast<float>(o.beta2);
  u.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  u.eps = static_cast<float>(o.eps);
  u.neg_step_size = static_cast<float>(-(o.lr / bc1));
  u.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));

  for (const auto& [key, list] : groups) {
    bool vec4 = true;
    for (const AdamWParam* p : list)
      for (const Tensor* t : {&p->param, &p->grad, &p->m, &p->v})
        vec4 = vec4 && t->numel() % 4 == 0 && t->offset() % 4 == 0;
    const int64_t unit = vec4 ? 4 : 1;
    std::vector<Segment> segs;
    uint64_t total = 0;
    for (const AdamWParam* p : list) {
      if (p->param.numel() == 0) continue;
      const double wd = p->weight_decay >= 0 ? p->weight_decay : o.weight_decay;
      Segment s{};
      s.start = u32(static_cast<int64_t>(total), "elements");
      s.len = u32(p->param.numel() / unit, "elements");
      s.p_off = u32(p->param.offset() / unit, "offset");
      s.g_off = u32(p->grad.offset() / unit, "offset");
      s.m_off = u32(p->m.offset() / unit, "offset");
      s.v_off = u32(p->v.offset() / unit, "offset");
      s.decay = static_cast<float>(1.0 - o.lr * wd);
      segs.push_back(s);
      total += s.len;
    }
    if (segs.empty()) continue;
    u.total = u32(static_cast<int64_t>(total), "elements");
    u.segments = static_cast<uint32_t>(segs.size());
    const AdamWParam& first = *list.front();
    DeviceImpl& dev = first.param.device_impl();
    const Tensor table = upload_words(dev, segs.data(), segs.size() * sizeof(Segment));
    const auto& pipe = dev.pipeline("adamw/adamw", {{"VEC", vec4 ? "4" : "1"}, {"T", vec4 ? "vec4<f32>" : "f32"}});
    const auto [gx, gy] = dev.grid((total + 255) / 256);
    dev.dispatch({"adamw_step", &pipe, &u, sizeof u,
                  {{table.storage()->buffer},
                   {first.grad.storage()->buffer},
                   {first.param.storage()->buffer},
                   {first.m.storage()->buffer},
                   {first.v.storage()->buffer}},
                  gx, gy, 1});
  }
}

namespace detail {

void register_adamw_ops(Registry& r) {
  OpSchema s;
  s.name = "adamw_step";
  s.family = "adamw";
  s.summary = "one AdamW step (torch.optim.AdamW), returning the updated param, m and v";
  s.inputs = {"param", "grad", "m", "v"};
  s.args = {{"lr", "float", "0.001", ""},         {"beta1", "float", "0.9", ""},
            {"beta2", "float", "0.999", ""},      {"eps", "float", "1e-8", ""},
            {"weight_decay", "float", "0.01", ""}, {"step", "int", "1", "the step number, from 1"}};
  s.outputs = {"param", "m", "v"};
  s.dtypes = {DType::F32};
  s.training_only = true;
  s.constraints = {"param, grad, m, v of one shape"};
  s.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    // run-op works on copies: the op itself updates in place.
    AdamWParam p{clone(input(in, "param")), contiguous(input(in, "grad")), clone(input(in, "m")),
                 clone(input(in, "v")), -1};
    AdamWOptions o;
    o.lr = args.get_float("lr", o.lr);
    o.beta1 = args.get_float("beta1", o.beta1);
    o.beta2 = args.get_float("beta2", o.beta2);
    o.eps = args.get_float("eps", o.eps);
    o.weight_decay = args.get_float("weight_decay", o.weight_decay);
    adamw_step({p}, o, args.get_int("step", 1));
    return OpTensors{{"param", p.param}, {"m", p.m}, {"v", p.v}};
  };
  r.add(std::move(s));
}

}  // namespace detail
}  // namespace wgtrain::ops
