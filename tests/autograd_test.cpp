// Every gradient rule against central finite differences on tiny shapes. The forward runs in float32 on the device;
// the loss L = sum(f(inputs) * R), R fixed and random, is summed on the host in float64, so the differences carry
// only float32 rounding of f: with h = 1e-3 that is about 1e-4, and the tolerance is |num - ana| <= 2e-3 + 2e-2 |num|.
// A wrong rule (a transposed operand, a missing term, a dropped broadcast) is off by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/fused_ce/fused_ce_ref.h"
#include "ops/q4gsw/q4gsw_ref.h"
#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/autograd.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain {
namespace {

namespace ag = wgtrain::autograd;
using test::device;
using test::random_host;
using test::random_ints;
using test::upload;
using test::upload_i32;

using Fn = std::function<ag::Var(const std::vector<ag::Var>&)>;

double weighted_sum(const Tensor& y, const ref::HostTensor& r) {
  const auto v = y.to_host_f32();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * r.data[i];
  return s;
}

// Checks the gradient of every input marked in `wrt` (all when empty).
void gradcheck(const std::vector<ref::HostTensor>& inputs, const Fn& f, std::vector<bool> wrt = {},
               double h = 1e-3) {
  if (wrt.empty()) wrt.assign(inputs.size(), true);
  std::vector<ag::Var> vars;
  for (size_t i = 0; i < inputs.size(); ++i)
    vars.push_back(wrt[i] ? ag::Var::leaf(upload(inputs[i])) : ag::Var::constant(upload(inputs[i])));
  const ag::Var y = f(vars);
  const ref::HostTensor r = random_host(y.shape());
  ag::backward(ag::sum(ag::mul(y, ag::Var::constant(upload(r))), {}));

  auto loss_at = [&](size_t which, const ref::HostTensor& moved) {
    std::vector<ag::Var> c;
    for (size_t i = 0; i < inputs.size(); ++i) c.push_back(ag::Var::constant(upload(i == which ? moved : inputs[i])));
    return weighted_sum(f(c).value(), r);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!wrt[i]) continue;
    SCOPED_TRACE("input " + std::to_string(i) + " " + test::shape_label(inputs[i].shape));
    const Tensor g = vars[i].grad();
    ASSERT_TRUE(g.defined()) << "no gradient reached the input";
    ASSERT_EQ(g.shape(), inputs[i].shape);
    const auto ana = g.to_host_f32();
    int bad = 0;
    for (size_t j = 0; j < inputs[i].data.size(); ++j) {
      ref::HostTensor up = inputs[i], down = inputs[i];
      // The steps actually taken, after rounding to float32.
      up.data[j] = static_cast<float>(inputs[i].data[j] + h);
      down.data[j] = static_cast<float>(inputs[i].data[j] - h);
      const double num = (loss_at(i, up) - loss_at(i, down)) / (up.data[j] - down.data[j]);
      if (!(std::fabs(num - ana[j]) <= 2e-3 + 2e-2 * std::fabs(num)) && bad++ < 4)
        ADD_FAILURE() << "d/dx[" << j << "]: autograd " << ana[j] << ", finite differences " << num
                      << "; WGTRAIN_TEST_SEED=" << test::seed();
    }
  }
}

TEST(Autograd, BroadcastingArithmetic) {
  gradcheck({random_host({3, 1, 4}), random_host({4})}, [](auto& v) { return ag::add(v[0], v[1]); });
  gradcheck({random_host({2, 3}), random_host({3, 2, 1})}, [](auto& v) { return ag::sub(v[0], v[1]); });
  gradcheck({random_host({2, 5}), random_host({5})}, [](auto& v) { return ag::mul(v[0], v[1]); });
  gradcheck({random_host({7})}, [](auto& v) { return ag::add(ag::mul(v[0], -2.5), 3.0); });
  // One value used twice: the two contributions add up.
  gradcheck({random_host({6})}, [](auto& v) { return ag::mul(v[0], v[0]); });
}

TEST(Autograd, UnaryMaps) {
  gradcheck({random_host({3, 5}, -3, 3)}, [](auto& v) { return ag::silu(v[0]); });
  gradcheck({random_host({9}, 0.5, 2.0)}, [](auto& v) { return ag::rsqrt(v[0]); });
  gradcheck({random_host({2, 4})}, [](auto& v) { return ag::exp(v[0]); });
  // The fused MLP activation against finite differences, and one input used as both gate and up.
  gradcheck({random_host({3, 6}, -3, 3), random_host({3, 6})}, [](auto& v) { return ag::swiglu(v[0], v[1]); });
  gradcheck({random_host({5}, -3, 3)}, [](auto& v) { return ag::swiglu(v[0], v[0]); });
}

TEST(Autograd, Reductions) {
  gradcheck({random_host({3, 4, 5})}, [](auto& v) { return ag::sum(v[0], {1}); });
  gradcheck({random_host({3, 4, 5})}, [](auto& v) { return ag::sum(v[0], {0, 2}, true); });
  gradcheck({random_host({2, 7})}, [](auto& v) { return ag::mean(v[0], {-1}, true); });
  gradcheck({random_host({2, 3, 2})}, [](auto& v) { return ag::mean(v[0], {}); });
}

TEST(Autograd, SoftmaxAndMasking) {
  gradcheck({random_host({3, 7}, -2, 2)}, [](auto& v) { return ag::softmax(v[0], -1); });
  gradcheck({random_host({4, 3}, -2, 2)}, [](auto& v) { return ag::softmax(v[0], 0); });
  const Tensor mask = test::upload_bool(random_ints({1, 5}, 0, 1));
  gradcheck({random_host({3, 5})}, [&](auto& v) { return ag::masked_fill(v[0], mask, -7.0); });
  // The attention pattern: masked to -inf, then a softmax (masked entries get no gradient, and no NaN).
  std::vector<uint8_t> causal(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) causal[i * 4 + j] = j > i;
  const Tensor cm = Tensor::from_host_bool(device(), {4, 4}, causal);
  gradcheck({random_host({2, 4, 4}, -2, 2)},
            [&](auto& v) { return ag::softmax(ag::masked_fill(v[0], cm, -INFINITY), -1); });
  // The same pattern with the mask built into the softmax.
  gradcheck({random_host({2, 5, 5}, -2, 2)}, [&](auto& v) { return ag::softmax(v[0], -1, /*causal=*/true); });
}

TEST(Autograd, FusedNormAndRope) {
  gradcheck({random_host({3, 2, 7}, -2, 2), random_host({7}, 0.5, 1.5)},
            [](auto& v) { return ag::rms_norm(v[0], v[1], 1e-5); });
  // The residual form x + norm(x): x's two gradients joined in the norm's backward pass.
  gradcheck({random_host({4, 9}, -2, 2), random_host({9}, 0.5, 1.5)},
            [](auto& v) { return ag::add(v[0], ag::rms_norm(v[0], v[1], 1e-5)); });
  ref::HostTensor cs({5, 3}), sn({5, 3});
  for (size_t i = 0; i < cs.data.size(); ++i) {
    cs.data[i] = static_cast<float>(std::cos(0.3 * static_cast<double>(i)));
    sn.data[i] = static_cast<float>(std::sin(0.3 * static_cast<double>(i)));
  }
  const Tensor c = upload(cs), s = upload(sn);
  gradcheck({random_host({2, 4, 3, 6})}, [&](auto& v) { return ag::rope(v[0], c, s, 0.7); });
}

TEST(Autograd, Products) {
  gradcheck({random_host({2, 3, 4}), random_host({2, 4, 5})}, [](auto& v) { return ag::bmm(v[0], v[1]); });
  // A transposed operand (a strided view).
  gradcheck({random_host({2, 3, 4}), random_host({2, 5, 4})},
            [](auto& v) { return ag::bmm(v[0], ag::transpose(v[1], 1, 2)); });
  gradcheck({random_host({2, 3, 4}), random_host({5, 4})}, [](auto& v) { return ag::linear(v[0], v[1]); });
}

TEST(Autograd, FusedAttention) {
  // q [B, T, H, hd], k and v [B, L, KV, hd]: GQA (4 query heads on 2 KV heads), an odd head dim, T < L (queries
  // after a cached prefix), and q and k as permuted views of [B, H, T, hd] tensors (read through their strides).
  gradcheck({random_host({2, 3, 4, 5}), random_host({2, 4, 2, 5}), random_host({2, 4, 2, 5})},
            [](auto& v) { return ag::attention(v[0], v[1], v[2], 0.7); });
  gradcheck({random_host({1, 2, 5, 4}), random_host({1, 2, 5, 4}), random_host({1, 5, 2, 4})},
            [](auto& v) {
              return ag::attention(ag::permute(v[0], {0, 2, 1, 3}), ag::permute(v[1], {0, 2, 1, 3}), v[2], 0.5);
            });
}

TEST(Autograd, ParameterGradientsAddIntoTheirBuffers) {
  const auto x = random_host({3, 4}), w = random_host({5, 4});
  const Tensor buf = ops::full(device(), {5, 4}, 0.0);
  const ag::Var wp = ag::Var::parameter(upload(w), buf);
  const ag::Var xv = ag::Var::constant(upload(x));
  // Used twice: linear (which adds with linear_dW) and a product (which adds through copy_).
  const ag::Var y = ag::add(ag::sum(ag::linear(xv, wp), {}), ag::sum(ag::mul(wp, 2.0), {}));
  ag::backward(y);
  // d/dw of sum(x w^T) is the column sums of x in every row; plus 2.
  const auto got = buf.to_host_f32();
  for (int n = 0; n < 5; ++n)
    for (int k = 0; k < 4; ++k) {
      double want = 2.0;
      for (int m = 0; m < 3; ++m) want += x.data[m * 4 + k];
      EXPECT_NEAR(got[n * 4 + k], want, 1e-5);
    }
  EXPECT_EQ(wp.grad().storage(), buf.storage());
}

TEST(Autograd, LinearQ4InputGradientAndStraightThroughLatentGradient) {
  const int64_t N = 6, K = 40, G = 8;
  ref::HostTensor latent = random_host({N, K});
  std::vector<float> scales = ref::q4_scales(latent, G);
  const std::vector<uint8_t> codes = ref::q4_requant(latent, scales, G);
  const Q4Weight w = q4gsw::upload(device(), codes, scales, N, K, G);
  const ref::HostTensor deq = ref::q4_dequant(codes, scales, N, K, G);
  // The input gradient, by finite differences through the 4-bit forward.
  gradcheck({random_host({2, 3, K}), latent},
            [&](auto& v) { return ag::linear_q4gsw(v[0], w, v[1]); }, {true, false});
  // The latent's gradient is the dequantised weight's (straight through): compare with the float32 linear at W_deq.
  const auto x = random_host({5, K});
  const ref::HostTensor r = random_host({5, N});
  const ag::Var lat = ag::Var::leaf(upload(latent));
  ag::backward(ag::sum(ag::mul(ag::linear_q4gsw(ag::Var::constant(upload(x)), w, lat), ag::Var::constant(upload(r))), {}));
  const ag::Var wd = ag::Var::leaf(upload(deq));
  ag::backward(ag::sum(ag::mul(ag::linear(ag::Var::constant(upload(x)), wd), ag::Var::constant(upload(r))), {}));
  const auto a = lat.grad().to_host_f32(), b = wd.grad().to_host_f32();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}

TEST(Autograd, EmbeddingSumsRepeatedRows) {
  const Tensor idx = upload_i32(ref::HostTensor({2, 5}, {1, 3, 1, 0, 6, 3, 3, 2, 1, 6}));
  gradcheck({random_host({7, 3})}, [&](auto& v) { return ag::embedding(v[0], idx); });
}

TEST(Autograd, CrossEntropy) {
  const Tensor labels = upload_i32(ref::HostTensor({5}, {2, -1, 0, 6, 6}));
  gradcheck({random_host({5, 7}, -3, 3)}, [&](auto& v) { return ag::cross_entropy(v[0], labels); });
  // Seeded directly (the loss itself), with the gradient written over a copy of the logits.
  const auto logits = random_host({5, 7}, -3, 3);
  const ag::Var x = ag::Var::leaf(upload(logits));
  ag::backward(ag::cross_entropy(ag::mul(x, 1.0), labels, /*overwrite_logits=*/true));
  std::vector<int> lab = {2, -1, 0, 6, 6};
  EXPECT_TRUE(test::all_close(x.grad(), ref::cross_entropy(logits, lab).dlogits, 1e-6, 1e-5));
}

// Every label ignored (a batch that is all prompt): loss 0 and a zero gradient all the way back, no NaN.
TEST(Autograd, CrossEntropyWithNoCountedLabels) {
  const Tensor labels = upload_i32(ref::HostTensor({4}, {-100, -1, -100, -100}));
  for (bool overwrite : {false, true}) {
    SCOPED_TRACE(overwrite);
    const ag::Var w = ag::Var::leaf(upload(random_host({4, 7}, -3, 3)));
    const ag::Var loss = ag::cross_entropy(ag::mul(w, 2.0), labels, overwrite);
    EXPECT_EQ(loss.value().to_host_f32(), std::vector<float>{0.0f});
    ag::backward(loss);
    EXPECT_EQ(w.grad().to_host_f32(), std::vector<float>(28, 0.0f));
  }
  gradcheck({random_host({4, 7}, -3, 3)}, [&](auto& v) { return ag::cross_entropy(v[0], labels); });
}

TEST(Autograd, ViewsAndCopies) {
  gradcheck({random_host({2, 3, 4})}, [](auto& v) { return ag::reshape(v[0], {4, 6}); });
  // reshape of a non-contiguous view copies first.
  gradcheck({random_host({3, 4})}, [](auto& v) { return ag::reshape(ag::transpose(v[0], 0, 1), {12}); });
  gradcheck({random_host({2, 3, 4})}, [](auto& v) { return ag::mul(ag::permute(v[0], {2, 0, 1}), 1.5); });
  gradcheck({random_host({5, 3})}, [](auto& v) { return ag::slice(v[0], 0, 1, 4); });
  gradcheck({random_host({2, 6})}, [](auto& v) { return ag::slice(v[0], -1, 3, 100); });
  gradcheck({random_host({3, 1})}, [](auto& v) { return ag::expand(v[0], {2, 3, 4}); });
  gradcheck({random_host({3, 4})}, [](auto& v) { return ag::contiguous(ag::transpose(v[0], 0, 1)); });
  gradcheck({random_host({2, 3}), random_host({2, 1}), random_host({2, 4})},
            [](auto& v) { return ag::cat({v[0], v[1], v[2]}, 1); });
}

TEST(Autograd, BackwardChecksItsLoss) {
  const ag::Var x = ag::Var::leaf(upload(random_host({3})));
  EXPECT_THROW(ag::backward(ag::mul(x, 2.0)), ArgumentError);  // not a scalar
  EXPECT_THROW(ag::backward(ag::Var::constant(upload(random_host({1})))), ArgumentError);  // nothing to differentiate
  EXPECT_THROW(ag::Var::parameter(upload(random_host({3})), upload(random_host({4}))), ArgumentError);
}

TEST(Autograd, BackwardFreesTheTape) {
  const ag::Var x = ag::Var::leaf(upload(random_host({4})));
  const ag::Var loss = ag::sum(ag::exp(x), {});
  ag::backward(loss);
  const auto g1 = x.grad().to_host_f32();
  ag::backward(loss);  // the tape is gone: nothing more reaches x
  EXPECT_EQ(x.grad().to_host_f32(), g1);
}

// An intermediate that no rule saved and no Var holds gives its buffer back during the forward pass (as PyTorch's
// autograd frees what no backward saved), where the tape used to keep every value until backward: x + 1 below,
// whose gradient rule needs nothing. A value a Var still holds stays readable; gradients are unchanged.
TEST(Autograd, AnIntermediateNoOneHoldsIsFreedBeforeBackward) {
  Device& dev = test::device();
  const int64_t n = 1 << 18;  // 1 MiB a tensor
  const auto xh = random_host({n});
  const ag::Var x = ag::Var::leaf(upload(xh));
  dev.release_cached_memory();
  const uint64_t before = dev.memory().current.in_use();
  const ag::Var y = ag::mul(ag::add(x, 1.0), 2.0);  // x + 1 lives only until mul has read it
  EXPECT_EQ(dev.memory().current.in_use(), before + (uint64_t{4} << 18)) << "only y is new";
  const ag::Var held = ag::add(x, 3.0);
  const ag::Var z = ag::mul(held, 0.5);
  EXPECT_EQ(dev.memory().current.in_use(), before + (uint64_t{12} << 18)) << "y, held and z";
  const auto hv = held.value().to_host_f32();
  EXPECT_FLOAT_EQ(hv[7], static_cast<float>(xh.data[7] + 3.0)) << "a held value stays readable";
  ag::backward(ag::sum(ag::add(y, z), {}));
  const auto g = x.grad().to_host_f32();
  for (int64_t i = 0; i < n; i += 4099) EXPECT_FLOAT_EQ(g[i], 2.5f);
}

// A norm's output and SwiGLU's are as large as their inputs and feed linears whose weight gradients need them: the
// linears do not keep them; the backward makes them again from what the norm's and SwiGLU's own rules keep. So
// once no Var holds them, their buffers go back during the forward, and the gradients are bit for bit those of a
// run where a Var held them (the same kernel on the same inputs).
TEST(Autograd, ANormsAndSwiglusOutputsAreRecomputedForTheWeightGradients) {
  Device& dev = test::device();
  const int64_t rows = 96, dim = 512, out = 24;  // the recomputable value: 192 KiB
  const auto xh = random_host({rows, dim}), uh = random_host({rows, dim}), gh = random_host({dim});
  const auto wh = random_host({out, dim}), rh = random_host({rows, out});
  for (const bool norm : {true, false}) {
    SCOPED_TRACE(norm ? "rms_norm" : "swiglu");
    auto run = [&](bool hold, uint64_t& kept) {
      const ag::Var x = ag::Var::leaf(upload(xh)), u = ag::Var::leaf(upload(uh));
      const ag::Var gain = ag::Var::leaf(upload(gh)), w = ag::Var::leaf(upload(wh));
      dev.release_cached_memory();
      const uint64_t before = dev.memory().current.in_use();
      ag::Var h = norm ? ag::rms_norm(x, gain, 1e-5) : ag::swiglu(x, u);
      const ag::Var y = ag::linear(h, w);
      if (!hold) h = ag::Var();
      kept = dev.memory().current.in_use() - before;
      ag::backward(ag::sum(ag::mul(y, ag::Var::constant(upload(rh))), {}));
      std::vector<std::vector<float>> grads = {x.grad().to_host_f32(), w.grad().to_host_f32()};
      grads.push_back(norm ? gain.grad().to_host_f32() : u.grad().to_host_f32());
      return grads;
    };
    uint64_t held_bytes = 0, dropped_bytes = 0;
    const auto held = run(true, held_bytes);
    const auto dropped = run(false, dropped_bytes);
    EXPECT_EQ(held_bytes - dropped_bytes, static_cast<uint64_t>(rows * dim * 4)) << "the output is not kept";
    for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i], dropped[i]) << "gradient " << i;
  }
}

}  // namespace
}  // namespace wgtrain
