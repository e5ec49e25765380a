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
};
static_assert(sizeof(AdamWParams) == 32);

struct Segment {
  uint32_t start, len, p_off, g_off, m_off, v_off, pad0, pad1;
};
static_assert(sizeof(Segment) == 32);

using wgtrain::detail::Storage;

}  // namespace

// One dispatch's worth: the parameters that share four buffers.
struct AdamW::Impl {
  struct Group {
    std::vector<AdamWParam> params;
    std::vector<double> decays;  // each segment's weight decay
    Tensor table;                // Segment[]
    Tensor step_scalars;         // [4 + segments] f32, rewritten by set_step
    AdamWParams uniforms{};
    bool vec4 = true;
  };
  AdamWOptions options;
  std::vector<Group> groups;
  mutable bool used = false;  // an update was issued: later scalar writes must be ordered after it
};

AdamW::AdamW(std::vector<AdamWParam> params, AdamWOptions o) : impl_(std::make_unique<Impl>()) {
  if (!(o.lr >= 0) || !(o.eps > 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1))
    throw ArgumentError("adamw: need lr >= 0, eps > 0, 0 <= beta1, beta2 < 1");
  impl_->options = o;
  using Key = std::tuple<const Storage*, const Storage*, const Storage*, const Storage*>;
  std::map<Key, size_t> group_of;
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamWParam& p = params[i];
    const std::string what = "adamw: parameter " + std::to_string(i);
    for (const Tensor* t : {&p.param, &p.grad, &p.m, &p.v}) {
      check_dtype(what.c_str(), *t, "tensor", {DType::F32});
      if (!t->is_contiguous()) throw ArgumentError(what + ": tensors must be contiguous");
      if (t->shape() != p.param.shape())
        throw ArgumentError(what + ": param " + shape_str(p.param.shape()) + ", grad " + shape_str(p.grad.shape()) +
                            ", m " + shape_str(p.m.shape()) + ", v " + shape_str(p.v.shape()) + " differ");
      check_same_device(what.c_str(), *t, p.param);
    }
    const Storage* s[4] = {p.param.storage().get(), p.grad.storage().get(), p.m.storage().get(),
                           p.v.storage().get()};
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        if (s[a] == s[b]) throw ArgumentError(what + ": param, grad, m and v must live in four different buffers");
    if (p.param.numel() == 0) continue;
    auto [it, fresh] = group_of.try_emplace(Key{s[0], s[1], s[2], s[3]}, impl_->groups.size());
    if (fresh) impl_->groups.emplace_back();
    impl_->groups[it->second].params.push_back(p);
  }
  for (auto& g : impl_->groups) {
    for (const AdamWParam& p : g.params)
      for (const Tensor* t : {&p.param, &p.grad, &p.m, &p.v})
        g.vec4 = g.vec4 && t->numel() % 4 == 0 && t->offset() % 4 == 0;
    const int64_t unit = g.vec4 ? 4 : 1;
    std::vector<Segment> segs;
    uint64_t total = 0;
    for (const AdamWParam& p : g.params) {
      Segment s{};
      s.start = u32(static_cast<int64_t>(total), "elements");
      s.len = u32(p.param.numel() / unit, "elements");
      s.p_off = u32(p.param.offset() / unit, "offset");
      s.g_off = u32(p.grad.offset() / unit, "offset");
      s.m_off = u32(p.m.offset() / unit, "offset");
      s.v_off = u32(p.v.offset() / unit, "offset");
      segs.push_back(s);
      g.decays.push_back(p.weight_decay >= 0 ? p.weight_decay : o.weight_decay);
      total += s.len;
    }
    DeviceImpl& dev = g.params.front().param.device_impl();
    g.table = upload_words(dev, segs.data(), segs.size() * sizeof(Segment));
    // Allocated for the host to fill (set_step): not poisoned on the GPU after that write.
    const Shape n_scalars = {static_cast<int64_t>(4 + segs.size())};
    g.step_scalars = Tensor(dev.allocate(static_cast<uint64_t>(n_scalars[0]) * 4, "adamw step scalars", true),
                            n_scalars, contiguous_strides(n_scalars), 0, DType::F32);
    g.uniforms.total = u32(static_cast<int64_t>(total), "elements");
    g.uniforms.segments = static_cast<uint32_t>(segs.size());
    g.uniforms.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
    g.uniforms.beta2 = static_cast<float>(o.beta2);
    g.uniforms.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
    g.uniforms.eps = static_cast<float>(o.eps);
  }
  set_step(1, o.lr);
}

AdamW::~AdamW() = default;
AdamW::AdamW(AdamW&&) noexcept = default;
AdamW& AdamW::operator=(AdamW&&) noexcept = default;

const AdamWOptions& AdamW::options() const { return impl_->options; }

void AdamW::set_step(int64_t step, double lr) {
  if (step < 1) throw ArgumentError("adamw: step counts from 1, got " + std::to_string(step));
  if (!(lr >= 0)) throw ArgumentError("adamw: the learning rate must be >= 0, got " + std::to_string(lr));
  const AdamWOptions& o = impl_->options;
  // Torch's scalars, computed in double as Python does, rounded to f32 where its kernels use them as f32.
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  for (auto& g : impl_->groups) {
    std::vector<float> v(4 + g.decays.size(), 0.0f);
    v[0] = static_cast<float>(-(lr / bc1));
    v[1] = static_cast<float>(std::sqrt(bc2));
    for (size_t s = 0; s < g.decays.size(); ++s) v[4 + s] = static_cast<float>(1.0 - lr * g.decays[s]);
    DeviceImpl& dev = g.step_scalars.device_impl();
    // Before the first update nothing reads the buffer yet, so the write needs no flush.
    if (impl_->used)
      dev.write(g.step_scalars.storage()->buffer, 0, v.data(), v.size() * 4);
    else
      dev.write_idle(g.step_scalars.storage()->buffer, 0, v.data(), v.size() * 4);
  }
}

void AdamW::update() const {
  for (const auto& g : impl_->groups) {
    const AdamWParam& first = g.params.front();
    DeviceImpl& dev = first.param.device_impl();
    const auto& pipe = dev.pipeline("adamw/adamw", {{"VEC", g.vec4 ? "4" : "1"}, {"T", g.vec4 ? "vec4<f32>" : "f32"}});
    const auto [gx, gy] = dev.grid((static_cast<uint64_t>(g.uniforms.total) + 255) / 256);
    dev.dispatch({"adamw_step", &pipe, &g.uniforms, sizeof g.uniforms,
                  {{g.table.storage()->buffer},
                   {first.grad.storage()->buffer},
                   {first.param.storage()->buffer},
                   {first.m.storage()->buffer},
                   {first.v.storage()->buffer},
                   {g.step_scalars.storage()->buffer}},
                  gx, gy, 1});
  }
  impl_->used = true;
}

void adamw_step(const std::vector<AdamWParam>& params, const AdamWOptions& o, int64_t step) {
  AdamW opt(params, o);
  opt.set_step(step, o.lr);
  opt.update();
}

namespace detail {

void register_adamw_ops(Registry& r) {
  OpSchema s;
  s.name = "adamw_step";
  s.family = "adamw";
  s.backends = {"webgpu", "native-vulkan"};
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
