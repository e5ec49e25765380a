// Fused causal attention against the float64 reference and against the composite path it replaces in the model
// (bmm, causal softmax, bmm through autograd), forward and backward, at awkward sizes: T = 1, T not a multiple of
// the 64-query blocks, L > T (queries after a cached prefix), GQA, head dims 6 (no vec4 path), 32, 48, 64, 80,
// 128, and q, k, v as strided views (q from [B, H, T, hd], k and v from a [B, KV, capacity, hd] cache).
// The tiled kernels' every table entry and the row kernels are forced in turn against both (where an entry does not
// fit the device's limits at a size it is skipped there; on the H200 every entry fits at hd 6, 32 and 64).
// Outputs start poisoned (the test device fills every new buffer with NaN), so an unwritten element fails.
// Tolerances: inputs in [-1, 1], scale 2 / sqrt(hd) (scores of magnitude up to about 2); float32 sums over hd
// products and over up to L (dq) or T H / KV (dk, dv) terms, each summed in one invocation.
//   out: |err| <= 2e-6 + 1e-5 |ref|; lse: |err| <= 1e-5 + 1e-6 |ref|; dq, dk, dv: |err| <= 1e-5 (1 + |ref|).
// Against the composite path (two float32 computations): |err| <= 1e-5 (1 + |ref|) for out and every gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "gpu/device_impl.h"
#include "ops/attention/attention_ref.h"
#include "ops/attention/attention_variants.h"
#include "support/test_support.h"
#include "wgtrain/attention.h"
#include "wgtrain/autograd.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

namespace ag = wgtrain::autograd;
using test::all_close;
using test::download;
using test::random_host;
using test::upload;

struct Case {
  int64_t B, T, L, H, KV, hd;
  bool views;  // q, k, v as permuted / sliced views rather than dense [B, T, heads, hd] tensors
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " L" << c.L << " H" << c.H << " KV" << c.KV << " hd" << c.hd
      << (c.views ? " views" : "");
}

struct Inputs {
  Tensor q, k, v;              // what the op reads: [B, T, H, hd] and [B, L, KV, hd], dense or views
  ref::HostTensor hq, hk, hv;  // the same values, dense
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  if (c.views) {
    const int64_t capacity = c.L + 3;
    in.q = upload(random_host({c.B, c.H, c.T, c.hd})).permute({0, 2, 1, 3});
    in.k = upload(random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
    in.v = upload(random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
  } else {
    in.q = upload(random_host({c.B, c.T, c.H, c.hd}));
    in.k = upload(random_host({c.B, c.L, c.KV, c.hd}));
    in.v = upload(random_host({c.B, c.L, c.KV, c.hd}));
  }
  in.hq = download(in.q);
  in.hk = download(in.k);
  in.hv = download(in.v);
  return in;
}

double scale_for(const Case& c) { return 2.0 / std::sqrt(static_cast<double>(c.hd)); }

class AttentionCases : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionCases, ForwardAndBackwardMatchTheReference) {
  const Case c = GetParam();
  const double scale = scale_for(c);
  const Inputs in = make_inputs(c);
  const ops::Attention a = ops::attention(in.q, in.k, in.v, scale);
  ASSERT_EQ(a.out.shape(), (Shape{c.B, c.T, c.H * c.hd}));
  ASSERT_EQ(a.lse.shape(), (Shape{c.B, c.H, c.T}));
  const ref::AttentionRef want = ref::attention(in.hq, in.hk, in.hv, scale);
  EXPECT_TRUE(all_close(a.out, want.out, 2e-6, 1e-5)) << "out";
  EXPECT_TRUE(all_close(a.lse, want.lse, 1e-5, 1e-6)) << "lse";

  const ref::HostTensor dout = random_host({c.B, c.T, c.H * c.hd});
  const ops::AttentionGrads g = ops::attention_backward(upload(dout), in.q, in.k, in.v, a, scale);
  const ref::AttentionGradRef gw = ref::attention_backward(dout, in.hq, in.hk, in.hv, scale);
  EXPECT_TRUE(all_close(g.dq, gw.dq, 1e-5, 1e-5)) << "dq";
  EXPECT_TRUE(all_close(g.dk, gw.dk, 1e-5, 1e-5)) << "dk";
  EXPECT_TRUE(all_close(g.dv, gw.dv, 1e-5, 1e-5)) << "dv";
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, AttentionCases,
    ::testing::Values(Case{1, 1, 1, 1, 1, 32, false},     // one query, one key
                      Case{2, 67, 67, 4, 2, 64, false},   // T past one 64-query block, GQA 2:1
                      Case{1, 5, 133, 2, 1, 80, false},   // 128 cached positions before 5 queries, hd 80
                      Case{1, 130, 130, 2, 2, 128, true}, // three query blocks, hd 128, strided views
                      Case{1, 33, 40, 3, 3, 48, true},    // offset 7, hd 48, views
                      Case{2, 9, 9, 6, 2, 6, false},      // hd 6: scalar loads; GQA 3:1
                      Case{2, 1, 50, 4, 1, 32, true},     // one decoded token against a 50-position cache
                      Case{1, 70, 70, 5, 5, 64, true},    // base's layout (H = KV here), views
                      Case{16, 64, 64, 4, 2, 16, false}));  // the long training test's model

// The composite path the model used before (heads permuted out, KV heads expanded, scores materialised, causal
// softmax, bmm), through autograd: the fused op must give its values and gradients. Square (L = T) or one query.
ag::Var composite(const ag::Var& q, const ag::Var& k, const ag::Var& v, double scale) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), hd = q.size(3), L = k.size(1), KV = k.size(2);
  const ag::Var qh = ag::reshape(ag::mul(ag::permute(q, {0, 2, 1, 3}), scale), {B * H, T, hd});
  auto heads = [&](const ag::Var& x) {
    const ag::Var p = ag::permute(x, {0, 2, 1, 3});  // [B, KV, L, hd]
    return ag::reshape(ag::expand(ag::reshape(p, {B, KV, 1, L, hd}), {B, KV, H / KV, L, hd}), {B * H, L, hd});
  };
  const ag::Var scores = ag::bmm(qh, ag::transpose(heads(k), 1, 2));
  const ag::Var o = ag::bmm(ag::softmax(scores, -1, /*causal=*/T > 1), heads(v));
  return ag::reshape(ag::permute(ag::reshape(o, {B, H, T, hd}), {0, 2, 1, 3}), {B, T, H * hd});
}

// Sets which kernels run for the scope (ops::detail::attention_force), restoring the table's choice after.
struct ForceVariant {
  explicit ForceVariant(int v) { ops::detail::attention_force = v; }
  ~ForceVariant() { ops::detail::attention_force = ops::detail::kTableChoice; }
};

// The forced variant's entries fit the device at this head dim (each kernel checks before any work; else printed).
bool forced_fits(const Tensor& on, int64_t hd) {
  try {
    for (auto kernel : {ops::detail::AttentionKernel::Forward, ops::detail::AttentionKernel::BackwardDq,
                        ops::detail::AttentionKernel::BackwardDkv})
      ops::detail::attention_choice(on.device_impl(), kernel, hd);
    return true;
  } catch (const UnsupportedError& e) {
    std::printf("skipped: %s\n", e.what());
    return false;
  }
}

// The number of entries of the longest table: forcing 0 .. this - 1 (and kRowKernels) runs every variant.
int table_entries() {
  int most = 0;
  for (auto kernel : {ops::detail::AttentionKernel::Forward, ops::detail::AttentionKernel::BackwardDq,
                      ops::detail::AttentionKernel::BackwardDkv}) {
    int n = 0;
    ops::detail::attention_tilings(kernel, &n);
    most = std::max(most, n);
  }
  return most;
}

// The table's choice, then every variant forced (where it fits: hd 32 and 64 at least where the device allows).
TEST(Attention, MatchesTheCompositePath) {
  std::vector<std::pair<int, Case>> runs;
  for (int force = ops::detail::kTableChoice; force < table_entries(); ++force)
    for (const Case& c : {Case{2, 67, 67, 4, 2, 64, false}, Case{1, 1, 19, 6, 3, 32, true},
                          Case{1, 20, 20, 2, 1, 80, true}})
      if (force == ops::detail::kTableChoice || c.hd != 80) runs.push_back({force, c});  // keep the test short
  for (const auto& [force, c] : runs) {
    SCOPED_TRACE(testing::PrintToString(c) + " variant " + std::to_string(force));
    ForceVariant fv(force);
    const Inputs in = make_inputs(c);
    if (!forced_fits(in.q, c.hd)) continue;
    const double scale = scale_for(c);
    const ref::HostTensor dout = random_host({c.B, c.T, c.H * c.hd});
    auto run = [&](bool fused) {
      const ag::Var q = ag::Var::leaf(in.q), k = ag::Var::leaf(in.k), v = ag::Var::leaf(in.v);
      const ag::Var o = fused ? ag::attention(q, k, v, scale) : composite(q, k, v, scale);
      ag::backward(ag::sum(ag::mul(o, ag::Var::constant(upload(dout))), {}));
      return std::vector<ref::HostTensor>{download(o.value()), download(q.grad()), download(k.grad()),
                                          download(v.grad())};
    };
    const auto want = run(false);
    const auto got = run(true);
    const char* names[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(all_close(upload(got[i]), want[i], 1e-5, 1e-5)) << names[i];
  }
}

// Every tiled variant of every table (index i forces entry i, or a shorter table's last) and the row kernels, at
// awkward sizes, against the float64 reference, with the tolerances above. A variant that does not fit the test
// device's limits at a head dim is reported and skipped there, but each must run at some size.
TEST(Attention, EveryVariantMatchesTheReference) {
  for (int force = ops::detail::kRowKernels; force < table_entries(); ++force) {
    bool any = false;
    // hd 6: scalar loads, 2 vec4s split over 8 or 16 invocations (clamped columns), and small enough for every
    // entry to fit a 32 KiB device.
    for (const Case& c : {Case{2, 67, 70, 4, 2, 64, true},  // offset 3, GQA 2:1, views; T past a block
                          Case{1, 37, 37, 3, 1, 6, false},     // GQA 3:1
                          Case{16, 64, 64, 4, 2, 16, false}}) {  // the long training test's model
      SCOPED_TRACE(testing::PrintToString(c) + " variant " + std::to_string(force));
      ForceVariant fv(force);
      const double scale = scale_for(c);
      const Inputs in = make_inputs(c);
      if (!forced_fits(in.q, c.hd)) continue;
      const ops::Attention a = ops::attention(in.q, in.k, in.v, scale);
      const ref::AttentionRef want = ref::attention(in.hq, in.hk, in.hv, scale);
      EXPECT_TRUE(all_close(a.out, want.out, 2e-6, 1e-5)) << "out";
      EXPECT_TRUE(all_close(a.lse, want.lse, 1e-5, 1e-6)) << "lse";
      const ref::HostTensor dout = random_host({c.B, c.T, c.H * c.hd});
      const ops::AttentionGrads g = ops::attention_backward(upload(dout), in.q, in.k, in.v, a, scale);
      const ref::AttentionGradRef gw = ref::attention_backward(dout, in.hq, in.hk, in.hv, scale);
      EXPECT_TRUE(all_close(g.dq, gw.dq, 1e-5, 1e-5)) << "dq";
      EXPECT_TRUE(all_close(g.dk, gw.dk, 1e-5, 1e-5)) << "dk";
      EXPECT_TRUE(all_close(g.dv, gw.dv, 1e-5, 1e-5)) << "dv";
      any = true;
    }
    EXPECT_TRUE(any) << "variant " << force << " ran at no size";
  }
}

// The choice is the first table entry within the device's limits, and the row kernels past hd 128.
TEST(Attention, ChoosesTheFirstEntryThatFits) {
  const Tensor t = upload(random_host({1}));
  const auto& dev = t.device_impl();
  for (auto kernel : {ops::detail::AttentionKernel::Forward, ops::detail::AttentionKernel::BackwardDq,
                      ops::detail::AttentionKernel::BackwardDkv}) {
    int n = 0;
    const ops::detail::AttentionTiling* table = ops::detail::attention_tilings(kernel, &n);
    EXPECT_EQ(ops::detail::attention_choice(dev, kernel, 132), nullptr) << "hd 132: the row kernels";
    for (int64_t hd : {6, 32, 64, 128}) {
      SCOPED_TRACE("hd " + std::to_string(hd));
      const ops::detail::AttentionTiling* chosen = ops::detail::attention_choice(dev, kernel, hd);
      auto fits = [&](const ops::detail::AttentionTiling& e) {
        const bool ds_fits = !e.ds || (dev.limits.max_storage_buffers_per_stage >= 9 &&
                                       ops::detail::attention_dq_ds_storage((hd + 3) / 4) <=
                                           static_cast<int64_t>(dev.limits.max_workgroup_storage));
        return ds_fits && static_cast<uint32_t>(e.wg) <= dev.limits.max_invocations_per_workgroup &&
               ops::detail::attention_tiled_storage(kernel, e, (hd + 3) / 4) <=
                   static_cast<int64_t>(dev.limits.max_workgroup_storage);
      };
      int first = 0;
      while (first < n && !fits(table[first])) ++first;
      EXPECT_EQ(chosen, first < n ? &table[first] : nullptr);
    }
  }
}

TEST(Attention, BackwardIsTheSameOnEveryRun) {
  const Case c{2, 70, 70, 4, 2, 32, false};
  const Inputs in = make_inputs(c);
  const Tensor dout = upload(random_host({c.B, c.T, c.H * c.hd}));
  // The table's choice, and the dK/dV table's last entry: one that writes dS for the dq kernel.
  int n = 0;
  const ops::detail::AttentionTiling* dkv =
      ops::detail::attention_tilings(ops::detail::AttentionKernel::BackwardDkv, &n);
  ASSERT_TRUE(dkv[n - 1].ds);
  for (int force : {ops::detail::kTableChoice, n - 1}) {
    SCOPED_TRACE("variant " + std::to_string(force));
    ForceVariant fv(force);
    if (!forced_fits(in.q, c.hd)) continue;
    const ops::Attention a = ops::attention(in.q, in.k, in.v, 0.3);
    const ops::AttentionGrads g1 = ops::attention_backward(dout, in.q, in.k, in.v, a, 0.3);
    const ops::AttentionGrads g2 = ops::attention_backward(dout, in.q, in.k, in.v, a, 0.3);
    EXPECT_EQ(g1.dq.to_host_f32(), g2.dq.to_host_f32());
    EXPECT_EQ(g1.dk.to_host_f32(), g2.dk.to_host_f32());
    EXPECT_EQ(g1.dv.to_host_f32(), g2.dv.to_host_f32());
  }
}

// Where the dS scratch would pass its limit, a forced ds entry throws before any work, and the table's choice still
// runs and matches the reference (the fallback to an entry without ds, for a table that lists one first, is not
// reached: no table does).
TEST(Attention, DsScratchPastItsLimit) {
  const Case c{1, 9, 9, 2, 1, 8, false};
  const Inputs in = make_inputs(c);
  const ref::HostTensor dout = random_host({c.B, c.T, c.H * c.hd});
  const ops::Attention a = ops::attention(in.q, in.k, in.v, 0.5);
  int n = 0;
  ops::detail::attention_tilings(ops::detail::AttentionKernel::BackwardDkv, &n);
  const int64_t saved = ops::detail::attention_max_ds_bytes;
  ops::detail::attention_max_ds_bytes = c.B * c.H * c.T * c.T * 4 - 1;  // one byte short
  {
    ForceVariant fv(n - 1);  // the last entry writes dS (BackwardIsTheSameOnEveryRun checks)
    EXPECT_THROW(ops::attention_backward(upload(dout), in.q, in.k, in.v, a, 0.5), UnsupportedError);
  }
  const ops::AttentionGrads g = ops::attention_backward(upload(dout), in.q, in.k, in.v, a, 0.5);
  ops::detail::attention_max_ds_bytes = saved;
  const ref::AttentionGradRef gw = ref::attention_backward(dout, in.hq, in.hk, in.hv, 0.5);
  EXPECT_TRUE(all_close(g.dq, gw.dq, 1e-5, 1e-5)) << "dq";
  EXPECT_TRUE(all_close(g.dk, gw.dk, 1e-5, 1e-5)) << "dk";
  EXPECT_TRUE(all_close(g.dv, gw.dv, 1e-5, 1e-5)) << "dv";
}

TEST(Attention, RejectsBadShapesBeforeAnyWork) {
  const Tensor q = upload(random_host({1, 4, 4, 8}));
  const Tensor k = upload(random_host({1, 4, 2, 8}));
  EXPECT_THROW(ops::attention(q, upload(random_host({1, 3, 2, 8})), upload(random_host({1, 3, 2, 8})), 1.0),
               ArgumentError);  // fewer keys than queries
  EXPECT_THROW(ops::attention(q, upload(random_host({1, 4, 3, 8})), upload(random_host({1, 4, 3, 8})), 1.0),
               ArgumentError);  // 4 query heads on 3 KV heads
  EXPECT_THROW(ops::attention(q, k, upload(random_host({1, 4, 2, 6})), 1.0), ArgumentError);  // k and v differ
  EXPECT_THROW(ops::attention(q, upload(random_host({1, 4, 2, 6})), upload(random_host({1, 4, 2, 6})), 1.0),
               ArgumentError);  // head dims differ
  EXPECT_THROW(ops::attention(q.reshape({4, 4, 8}), k, k, 1.0), ArgumentError);  // rank 3
  EXPECT_THROW(ops::attention(q, k, k, NAN), ArgumentError);
  const ops::Attention a = ops::attention(q, k, k, 1.0);
  EXPECT_THROW(ops::attention_backward(upload(random_host({1, 4, 16})), q, k, k, a, 1.0), ArgumentError);
  EXPECT_THROW(ops::attention_backward(a.out, q, k, k, {a.out, a.out}, 1.0), ArgumentError);  // lse's shape
}

}  // namespace
}  // namespace wgtrain
