// The subgroup-matrix attention kernels (forward_sm.wgsl, backward_dq_sm.wgsl, backward_dkv_sm.wgsl: mixed
// precision) against the float64 reference, two ways:
// - on the matrix units, where the device has them (the H200; skipped, saying why, elsewhere), at hd 16 to 128;
// - everywhere, emulated (tests/support/sm_emulation.h): the kernels' own texts with each subgroup-matrix builtin
//   written out in plain WGSL. That checks all of the kernels' indexing, staging, masking, softmax, scaling and
//   barriers on llvmpipe. Its tiles are f32, twice the size, so it runs BN = 32 and head dims up to 32 (llvmpipe's
//   32 KiB of workgroup storage). About 20 s, nearly all of it llvmpipe compiling the six kernels.
// Outputs start poisoned (an unwritten element fails).
// Tolerances: q, k, v and dO enter f16 (relative rounding 2^-11) and P and dS are rounded to f16 before their
// products; sums are f32. An output is a sum of such products, so its error is a small multiple of 2^-11 times the
// sum of its terms' magnitudes, which for these inputs (in [-1, 1], scale 2 / sqrt(hd)) is bounded by the largest
// output of its tensor: |err| <= 1e-2 max|ref| for out, dq, dk, dv (normwise per tensor), |err| <= 1e-2 for lse
// (scores of magnitude up to 2 shift by hd 2^-11 at most). The emulation rounds as the hardware does; only the order
// of the f32 sums differs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpu/device_impl.h"
#include "ops/attention/attention_ref.h"
#include "ops/attention/attention_variants.h"
#include "support/sm_emulation.h"
#include "support/test_support.h"
#include "wgtrain/attention.h"
#include "wgtrain/error.h"
#include "wgtrain/precision.h"

namespace wgtrain {
namespace {

namespace od = ops::detail;

// For its scope: the subgroup-matrix kernels forced, emulated on the test device (their texts in an override
// directory).
class Emulation {
 public:
  Emulation()
      : kernels_({{"attention/forward_sm"}, {"attention/backward_dq_sm"}, {"attention/backward_dkv_sm"},
                  {"attention/sm_tiles"}}) {
    od::attention_sm_emulated = true;
    od::attention_force = od::kSubgroupMatrix;
  }
  ~Emulation() {
    od::attention_force = od::kTableChoice;
    od::attention_sm_emulated = false;
  }

 private:
  test::SmEmulation kernels_;
};

using test::mixed_device;

struct Case {
  int64_t B, T, L, H, KV, hd;
  bool views;  // q, k, v as permuted / sliced views
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " L" << c.L << " H" << c.H << " KV" << c.KV << " hd" << c.hd
      << (c.views ? " views" : "");
}

// |got - want| <= tol max|want| + floor over the tensor.
::testing::AssertionResult normwise(const Tensor& got, const ref::HostTensor& want, double tol, double floor = 0) {
  double most = 0.0;
  for (double x : want.data) most = std::max(most, std::fabs(x));
  return test::all_close(got, want, tol * most + floor, 0.0);
}

// Forward and backward on `dev` against the float64 reference, with the tolerances at the top.
void check(Device& dev, const Case& c) {
  SCOPED_TRACE(testing::PrintToString(c));
  auto up = [&](const ref::HostTensor& h) {
    return Tensor::from_host(dev, h.shape, std::vector<float>(h.data.begin(), h.data.end()));
  };
  Tensor q, k, v;
  if (c.views) {
    const int64_t capacity = c.L + 5;
    q = up(test::random_host({c.B, c.H, c.T, c.hd})).permute({0, 2, 1, 3});
    k = up(test::random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
    v = up(test::random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
  } else {
    q = up(test::random_host({c.B, c.T, c.H, c.hd}));
    k = up(test::random_host({c.B, c.L, c.KV, c.hd}));
    v = up(test::random_host({c.B, c.L, c.KV, c.hd}));
  }
  const ref::HostTensor hq = test::download(q), hk = test::download(k), hv = test::download(v);
  const double scale = 2.0 / std::sqrt(static_cast<double>(c.hd));
  const ops::Attention a = ops::attention(q, k, v, scale);
  const ref::AttentionRef want = ref::attention(hq, hk, hv, scale);
  EXPECT_TRUE(normwise(a.out, want.out, 1e-2)) << "out";
  EXPECT_TRUE(test::all_close(a.lse, want.lse, 1e-2, 0.0)) << "lse";
  // dO of a gradient's size (the loss is a mean over many tokens): f16 alone would flush much of it to zero.
  const ref::HostTensor dout = test::random_host({c.B, c.T, c.H * c.hd}, -3e-6, 3e-6);
  const ops::AttentionGrads g = ops::attention_backward(up(dout), q, k, v, a, scale);
  const ref::AttentionGradRef gw = ref::attention_backward(dout, hq, hk, hv, scale);
  // dq and dk are sums of dS = P (dP - D), where dP = dO v (f16 operands) cancels against D = dO . out (f32): the
  // one f16 rounding of dP, 2^-11 hd max|dO| at most, times the scale, stays where the exact dS is 0 (a row with
  // one key: dq = dk = 0 exactly).
  double dmax = 0.0;
  for (double x : dout.data) dmax = std::max(dmax, std::fabs(x));
  const double floor = std::ldexp(1.0, -11) * scale * static_cast<double>(c.hd) * dmax;
  EXPECT_TRUE(normwise(g.dq, gw.dq, 1e-2, floor)) << "dq";
  EXPECT_TRUE(normwise(g.dk, gw.dk, 1e-2, floor)) << "dk";
  EXPECT_TRUE(normwise(g.dv, gw.dv, 1e-2)) << "dv";
}

class AttentionSmEmulated : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionSmEmulated, MatchesTheReference) {
  Emulation emulation;
  check(test::device(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionSmEmulated,
                         ::testing::Values(Case{1, 1, 1, 1, 1, 16, false},    // one query, one key
                                           Case{2, 67, 67, 4, 2, 32, false},  // T past one 64-query block, GQA 2:1
                                           Case{1, 5, 40, 2, 1, 16, true},    // 35 cached positions, views
                                           Case{1, 33, 45, 3, 3, 32, true},   // offset 12 inside a key tile
                                           Case{2, 130, 130, 4, 1, 16, false},  // three query blocks, GQA 4:1
                                           Case{1, 1, 50, 2, 2, 32, true}));  // one new token after 49

TEST(AttentionSm, OnTheMatrixUnitsMatchesTheReference) {
  Device& dev = mixed_device();
  const std::string missing = od::attention_sm_missing(dev.impl(), 64, true);
  if (!missing.empty()) GTEST_SKIP() << "no subgroup-matrix attention here: " << missing;
  od::attention_force = od::kSubgroupMatrix;
  for (const Case& c : {Case{1, 1, 1, 1, 1, 16, false}, Case{2, 67, 67, 4, 2, 64, false},
                        Case{1, 5, 133, 2, 1, 80, false}, Case{1, 130, 130, 2, 2, 128, true},
                        Case{1, 33, 40, 3, 3, 48, true}, Case{2, 1, 50, 4, 1, 32, true},
                        Case{1, 70, 70, 5, 5, 64, true}, Case{2, 200, 203, 4, 1, 96, false}})
    check(dev, c);
  od::attention_force = od::kTableChoice;
}

// The table's choice takes the subgroup-matrix kernels exactly where attention_sm_missing says they can run, and
// forcing them where they cannot throws before any work, saying why.
TEST(AttentionSm, ChosenWhereTheyCanRun) {
  Device& dev = test::device();
  const std::string missing = od::attention_sm_missing(dev.impl(), 64, true);
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 72, true), "") << "hd 72 is not a multiple of 16";
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 144, true), "") << "hd 144 is past 128";
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 64, false), "") << "not vec4 views";
  if (missing.empty()) return;
  const Tensor q = test::upload(test::random_host({1, 4, 2, 64}));
  od::attention_force = od::kSubgroupMatrix;
  try {
    ops::attention(q, q, q, 1.0);
    ADD_FAILURE() << "forced subgroup-matrix kernels ran on a device without them";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  od::attention_force = od::kTableChoice;
}

}  // namespace
}  // namespace wgtrain
