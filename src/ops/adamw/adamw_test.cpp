// adamw_step over 10 steps against a float64 CPU loop: parameters in separate buffers and as views into shared
// arenas (one dispatch), sizes that do and do not allow vec4, per-parameter weight decay, a changing lr.
// Tolerance: |p - ref| <= 1e-6 |ref| + 1e-6 lr steps (f32 rounding of each step's update, about lr).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/adamw/adamw_ref.h"
#include "support/backends.h"
#include "support/test_support.h"
#include "wgtrain/adamw.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::random_host;
using test::upload;

struct HostParam {
  std::vector<double> p, m, v;
  double wd;
};

template <class T>
std::vector<double> as_double(const T& t) {
  const auto f = t.to_host_f32();
  return {f.begin(), f.end()};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]) + atol) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i]
                    << "; WGTRAIN_TEST_SEED=" << test::seed();
}

class AdamWOn : public ::testing::TestWithParam<std::string> {};

template <class B>
void ten_steps_match_a_cpu_loop() {
  using T = typename B::T;
  const std::vector<int64_t> sizes = {1, 3, 1000, 4097, 64};
  const std::vector<double> wds = {0.01, 0.0, 0.1, 0.01, -1};  // -1: the options' default
  ops::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.05;

  // Three parameters in separate buffers, two as views into four shared arenas (offsets 0 and 1000).
  std::vector<HostParam> host;
  std::vector<typename B::AdamWParam> dev;
  const int64_t arena = 1000 + 64;
  const T ap = B::upload(random_host({arena})), am = B::zeros({arena}), av = B::zeros({arena});
  const T ag = B::empty({arena});
  const auto ap0 = ap.to_host_f32();
  for (size_t i = 0; i < sizes.size(); ++i) {
    HostParam h;
    h.wd = wds[i] >= 0 ? wds[i] : o.weight_decay;
    typename B::AdamWParam d;
    d.weight_decay = wds[i];
    if (i == 2 || i == 4) {
      const int64_t off = i == 2 ? 0 : 1000;
      d.param = B::slice(ap, off, off + sizes[i]);
      d.grad = B::slice(ag, off, off + sizes[i]);
      d.m = B::slice(am, off, off + sizes[i]);
      d.v = B::slice(av, off, off + sizes[i]);
      h.p.assign(ap0.begin() + off, ap0.begin() + off + sizes[i]);
    } else {
      const auto p0 = random_host({sizes[i]});
      d.param = B::upload(p0);
      d.grad = B::empty({sizes[i]});
      d.m = B::zeros({sizes[i]});
      d.v = B::zeros({sizes[i]});
      h.p = p0.data;
    }
    h.m.assign(sizes[i], 0.0);
    h.v.assign(sizes[i], 0.0);
    host.push_back(h);
    dev.push_back(d);
  }
  for (int step = 1; step <= 10; ++step) {
    o.lr = 3e-3 * (1.0 - 0.05 * step);  // a schedule: lr changes every step
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto g = random_host({sizes[i]}, -2, 2);
      B::copy_(dev[i].grad, B::upload(g));
      ref::adamw_step(host[i].p, host[i].m, host[i].v, g.data, o.lr, o.beta1, o.beta2, o.eps, host[i].wd, step);
    }
    B::adamw_step(dev, o, step);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(i);
    expect_close(as_double(dev[i].param), host[i].p, 1e-6 * 3e-3 * 10, "param");
    expect_close(as_double(dev[i].m), host[i].m, 1e-6, "m");
    expect_close(as_double(dev[i].v), host[i].v, 1e-6, "v");
  }
}

TEST_P(AdamWOn, TenStepsMatchACpuLoop) {
  test::with_backend(GetParam(), [](auto b) { ten_steps_match_a_cpu_loop<decltype(b)>(); });
}

TEST(AdamW, ARecordedUpdateReplaysWithEachStepsScalars) {
  // Two parameters in shared arenas with different weight decays; the update recorded once, replayed 10 times
  // with a new learning rate and new gradients each step.
  const int64_t n0 = 37, n1 = 100;
  const ref::HostTensor p0 = random_host({n0 + n1});
  Tensor ap = upload(p0), ag = Tensor::empty(test::device(), {n0 + n1});
  Tensor am = ops::full(test::device(), {n0 + n1}, 0.0), av = ops::full(test::device(), {n0 + n1}, 0.0);
  auto part = [](const Tensor& t, int64_t a, int64_t b) { return t.slice(0, a, b); };
  ops::AdamWOptions o;
  o.weight_decay = 0.1;
  ops::AdamW opt({{part(ap, 0, n0), part(ag, 0, n0), part(am, 0, n0), part(av, 0, n0), 0.0},
                  {part(ap, n0, n0 + n1), part(ag, n0, n0 + n1), part(am, n0, n0 + n1), part(av, n0, n0 + n1), -1}},
                 o);
  const Recording rec = test::device().record([&] { opt.update(); });
  EXPECT_EQ(rec.dispatches(), 1u);
  HostParam h0{{p0.data.begin(), p0.data.begin() + n0}, std::vector<double>(n0, 0.0), std::vector<double>(n0, 0.0), 0.0};
  HostParam h1{{p0.data.begin() + n0, p0.data.end()}, std::vector<double>(n1, 0.0), std::vector<double>(n1, 0.0), 0.1};
  for (int step = 1; step <= 10; ++step) {
    const double lr = 1e-2 / step;
    const auto g = random_host({n0 + n1}, -2, 2);
    ag.write(std::vector<float>(g.data.begin(), g.data.end()));
    opt.set_step(step, lr);
    rec.replay();
    ref::adamw_step(h0.p, h0.m, h0.v, {g.data.begin(), g.data.begin() + n0}, lr, o.beta1, o.beta2, o.eps, h0.wd, step);
    ref::adamw_step(h1.p, h1.m, h1.v, {g.data.begin() + n0, g.data.end()}, lr, o.beta1, o.beta2, o.eps, h1.wd, step);
  }
  const auto got = as_double(ap);
  expect_close({got.begin(), got.begin() + n0}, h0.p, 1e-6 * 1e-2 * 10, "param 0");
  expect_close({got.begin() + n0, got.end()}, h1.p, 1e-6 * 1e-2 * 10, "param 1");
}

template <class B>
void shared_arenas_take_one_dispatch() {
  const auto p = B::upload(random_host({256})), g = B::upload(random_host({256}));
  const auto m = B::zeros({256}), v = B::zeros({256});
  std::vector<typename B::AdamWParam> ps;
  for (int k = 0; k < 8; ++k) {
    const int64_t a = k * 32;
    ps.push_back({B::slice(p, a, a + 32), B::slice(g, a, a + 32), B::slice(m, a, a + 32), B::slice(v, a, a + 32), -1});
  }
  const auto before = B::dispatches();
  B::adamw_step(ps, {}, 1);
  EXPECT_EQ(B::dispatches(), before + 1);
}

TEST_P(AdamWOn, SharedArenasTakeOneDispatch) {
  test::with_backend(GetParam(), [](auto b) { shared_arenas_take_one_dispatch<decltype(b)>(); });
}

template <class B>
void rejects_bad_arguments() {
  const auto p = B::upload(random_host({4})), g = B::upload(random_host({4})), m = B::upload(random_host({4}));
  EXPECT_THROW(B::adamw_step({{p, g, m, B::upload(random_host({5})), -1}}, {}, 1), ArgumentError);
  EXPECT_THROW(B::adamw_step({{p, g, m, m, -1}}, {}, 1), ArgumentError);  // m and v share a buffer
  EXPECT_THROW(B::adamw_step({{p, g, m, B::upload(random_host({4})), -1}}, {}, 0), ArgumentError);
  ops::AdamWOptions bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(B::adamw_step({{p, g, m, B::upload(random_host({4})), -1}}, bad, 1), ArgumentError);
}

TEST_P(AdamWOn, RejectsBadArguments) {
  test::with_backend(GetParam(), [](auto b) { rejects_bad_arguments<decltype(b)>(); });
}

INSTANTIATE_TEST_SUITE_P(Backends, AdamWOn, ::testing::ValuesIn(test::kBackends));

TEST(AdamW, RejectsBadArgumentsOfTheClass) {
  Tensor p = upload(random_host({4})), g = upload(random_host({4})), m = upload(random_host({4}));
  ops::AdamW opt({{p, g, m, upload(random_host({4})), -1}}, {});
  EXPECT_THROW(opt.set_step(0, 1e-3), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
