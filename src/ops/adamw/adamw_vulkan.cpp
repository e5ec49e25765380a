// adamw_step on the native Vulkan backend (adamw.comp): the twin of adamw.cpp, one dispatch per set of buffers.
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "ops/common.h"
#include "vulkan/context.h"
#include "wgtrain/error.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::vk::ops {

using wgtrain::ops::detail::u32;

void adamw_step(const std::vector<AdamWParam>& params, const wgtrain::ops::AdamWOptions& o, int64_t step) {
  if (step < 1) throw ArgumentError("adamw: step counts from 1, got " + std::to_string(step));
  if (!(o.lr >= 0) || !(o.eps > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw ArgumentError("adamw: need lr >= 0, eps > 0, 0 <= beta1, beta2 < 1");
  using Key = std::tuple<const detail::Buffer*, const detail::Buffer*, const detail::Buffer*, const detail::Buffer*>;
  std::map<Key, std::vector<const AdamWParam*>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWParam& p = params[i];
    const std::string what = "adamw: parameter " + std::to_string(i);
    for (const Tensor* t : {&p.param, &p.grad, &p.m, &p.v}) {
      if (!t->defined() || t->dtype() != DType::F32) throw ArgumentError(what + ": tensors must be float32");
      if (t->shape() != p.param.shape())
        throw ArgumentError(what + ": param " + shape_str(p.param.shape()) + ", grad " + shape_str(p.grad.shape()) +
                            ", m " + shape_str(p.m.shape()) + ", v " + shape_str(p.v.shape()) + " differ");
    }
    const detail::Buffer* b[4] = {p.param.buffer().get(), p.grad.buffer().get(), p.m.buffer().get(),
                                  p.v.buffer().get()};
    for (int a = 0; a < 4; ++a)
      for (int c = a + 1; c < 4; ++c)
        if (b[a] == b[c]) throw ArgumentError(what + ": param, grad, m and v must live in four different buffers");
    if (p.param.numel() > 0) groups[{b[0], b[1], b[2], b[3]}].push_back(&p);
  }
  // Torch's scalars, in double, rounded to f32 where its kernels use them as f32.
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  for (const auto& [key, list] : groups) {
    struct Segment {
      uint32_t start, len, p_off, g_off, m_off, v_off, pad0, pad1;
    };
    std::vector<Segment> segs;
    std::vector<float> scalars = {static_cast<float>(-(o.lr / bc1)), static_cast<float>(std::sqrt(bc2)), 0, 0};
    bool vec4 = true;
    for (const AdamWParam* p : list)
      for (const Tensor* t : {&p->param, &p->grad, &p->m, &p->v}) vec4 = vec4 && t->numel() % 4 == 0 && t->offset() % 4 == 0;
    const int64_t unit = vec4 ? 4 : 1;
    uint64_t total = 0;
    for (const AdamWParam* p : list) {
      segs.push_back({u32(static_cast<int64_t>(total), "elements"), u32(p->param.numel() / unit, "elements"),
                      u32(p->param.offset() / unit, "offset"), u32(p->grad.offset() / unit, "offset"),
                      u32(p->m.offset() / unit, "offset"), u32(p->v.offset() / unit, "offset"), 0, 0});
      const double wd = p->weight_decay >= 0 ? p->weight_decay : o.weight_decay;
      scalars.push_back(static_cast<float>(1.0 - o.lr * wd));
      total += static_cast<uint64_t>(p->param.numel() / unit);
    }
    detail::Context& ctx = list.front()->param.ctx();
    const auto table = ctx.allocate(segs.size() * sizeof(Segment), "adamw segment table");
    ctx.upload(*table, 0, segs.data(), segs.size() * sizeof(Segment));
    const auto step_scalars = ctx.allocate(scalars.size() * 4, "adamw step scalars");
    ctx.upload(*step_scalars, 0, scalars.data(), scalars.size() * 4);
    const auto [gx, gy] = ctx.grid((total + 255) / 256);
    struct {
      uint32_t total, segments, row;
      float one_minus_beta1, beta2, one_minus_beta2, eps;
    } push{u32(static_cast<int64_t>(total), "elements"), static_cast<uint32_t>(segs.size()), gx * 256u,
           static_cast<float>(1.0 - o.beta1), static_cast<float>(o.beta2), static_cast<float>(1.0 - o.beta2),
           static_cast<float>(o.eps)};
    const AdamWParam& first = *list.front();
    ctx.dispatch(ctx.kernel(vec4 ? "adamw/adamw_vec4" : "adamw/adamw_vec1", {}, 6, sizeof push), &push,
                 {table.get(), first.grad.buffer().get(), first.param.buffer().get(), first.m.buffer().get(),
                  first.v.buffer().get(), step_scalars.get()},
                 gx, gy);
  }
}

}  // namespace wgtrain::vk::ops
