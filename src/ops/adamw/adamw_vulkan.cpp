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

namespace {

struct Segment {
  uint32_t start, len, p_off, g_off, m_off, v_off, pad0, pad1;
};

struct Push {
  uint32_t total, segments, row;
  float one_minus_beta1, beta2, one_minus_beta2, eps;
};

}  // namespace

struct AdamW::Impl {
  struct Group {
    std::vector<const AdamWParam*> params;
    std::vector<double> decays;
    std::shared_ptr<detail::Buffer> table, step_scalars;
    uint32_t total = 0;
    bool vec4 = true;
  };
  std::vector<AdamWParam> params;
  wgtrain::ops::AdamWOptions options;
  std::vector<Group> groups;
};

AdamW::AdamW(std::vector<AdamWParam> params, wgtrain::ops::AdamWOptions o) : impl_(std::make_unique<Impl>()) {
  if (!(o.lr >= 0) || !(o.eps > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw ArgumentError("adamw: need lr >= 0, eps > 0, 0 <= beta1, beta2 < 1");
  impl_->params = std::move(params);
  impl_->options = o;
  using Key = std::tuple<const detail::Buffer*, const detail::Buffer*, const detail::Buffer*, const detail::Buffer*>;
  std::map<Key, size_t> group_of;
  for (size_t i = 0; i < impl_->params.size(); ++i) {
    const AdamWParam& p = impl_->params[i];
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
    if (p.param.numel() == 0) continue;
    auto [it, fresh] = group_of.try_emplace(Key{b[0], b[1], b[2], b[3]}, impl_->groups.size());
    if (fresh) impl_->groups.emplace_back();
    impl_->groups[it->second].params.push_back(&p);
  }
  for (auto& g : impl_->groups) {
    for (const AdamWParam* p : g.params)
      for (const Tensor* t : {&p->param, &p->grad, &p->m, &p->v})
        g.vec4 = g.vec4 && t->numel() % 4 == 0 && t->offset() % 4 == 0;
    const int64_t unit = g.vec4 ? 4 : 1;
    std::vector<Segment> segs;
    uint64_t total = 0;
    for (const AdamWParam* p : g.params) {
      segs.push_back({u32(static_cast<int64_t>(total), "elements"), u32(p->param.numel() / unit, "elements"),
                      u32(p->param.offset() / unit, "offset"), u32(p->grad.offset() / unit, "offset"),
                      u32(p->m.offset() / unit, "offset"), u32(p->v.offset() / unit, "offset"), 0, 0});
      g.decays.push_back(p->weight_decay >= 0 ? p->weight_decay : o.weight_decay);
      total += static_cast<uint64_t>(p->param.numel() / unit);
    }
    g.total = u32(static_cast<int64_t>(total), "elements");
    detail::Context& ctx = g.params.front()->param.ctx();
    g.table = ctx.allocate(segs.size() * sizeof(Segment), "adamw segment table");
    ctx.upload(*g.table, 0, segs.data(), segs.size() * sizeof(Segment));
    g.step_scalars = ctx.allocate((4 + segs.size()) * 4, "adamw step scalars");
  }
  set_step(1, o.lr);
}

AdamW::~AdamW() = default;
AdamW::AdamW(AdamW&&) noexcept = default;
AdamW& AdamW::operator=(AdamW&&) noexcept = default;
const wgtrain::ops::AdamWOptions& AdamW::options() const { return impl_->options; }

void AdamW::set_step(int64_t step, double lr) {
  if (step < 1) throw ArgumentError("adamw: step counts from 1, got " + std::to_string(step));
  if (!(lr >= 0)) throw ArgumentError("adamw: the learning rate must be >= 0");
  const auto& o = impl_->options;
  // Torch's scalars, in double, rounded to f32 where its kernels use them as f32.
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  for (auto& g : impl_->groups) {
    std::vector<float> v = {static_cast<float>(-(lr / bc1)), static_cast<float>(std::sqrt(bc2)), 0, 0};
    for (double wd : g.decays) v.push_back(static_cast<float>(1.0 - lr * wd));
    g.params.front()->param.ctx().upload(*g.step_scalars, 0, v.data(), v.size() * 4);
  }
}

void AdamW::update() const {
  const auto& o = impl_->options;
  for (const auto& g : impl_->groups) {
    const AdamWParam& first = *g.params.front();
    detail::Context& ctx = first.param.ctx();
    const auto [gx, gy] = ctx.grid((static_cast<uint64_t>(g.total) + 255) / 256);
    const Push push{g.total, static_cast<uint32_t>(g.decays.size()), gx * 256u, static_cast<float>(1.0 - o.beta1),
                    static_cast<float>(o.beta2), static_cast<float>(1.0 - o.beta2), static_cast<float>(o.eps)};
    ctx.dispatch(ctx.kernel(g.vec4 ? "adamw/adamw_vec4" : "adamw/adamw_vec1", {}, 6, sizeof push), &push,
                 {g.table.get(), first.grad.buffer().get(), first.param.buffer().get(), first.m.buffer().get(),
                  first.v.buffer().get(), g.step_scalars.get()},
                 gx, gy);
  }
}

void adamw_step(const std::vector<AdamWParam>& params, const wgtrain::ops::AdamWOptions& o, int64_t step) {
  AdamW opt(params, o);
  opt.set_step(step, o.lr);
  opt.update();
}

}  // namespace wgtrain::vk::ops
