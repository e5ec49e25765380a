// mm, bmm, linear against the float64 reference.
// Tolerance: |c - ref| <= 1e-6 + 2K * 2^-24 * sum_k |a_ik b_kj|, the bound of a length-K fp32 dot product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <tuple>

#include "ops/matmul/gemm_tiling.h"
#include "ops/matmul/split_k.h"
#include "ops/q4gsw/q4gsw_ref.h"
#include "ops/reference.h"
#include "gpu/device_impl.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::download;
using test::random_host;
using test::upload;

double dot_rtol(int64_t k) { return 2.0 * std::max<int64_t>(k, 1) * std::ldexp(1.0, -24); }

// WGTRAIN_FORCE_GEMM=<n>, as the bench takes it: every fp32 GEMM of this test process (these suites, q4gsw's, any)
// runs entry n of the tiling table, so that each entry can be put through all of them
// (scripts/h200/gemm_fp32.sh). Set before any test runs; the GemmTilings tests restore it after forcing their own.
const int kEnvGemmForce = [] {
  const char* f = std::getenv("WGTRAIN_FORCE_GEMM");
  if (f && *f) ops::detail::gemm_force = std::atoi(f);
  return ops::detail::gemm_force;
}();

// (M, K, N): 1s, primes, tile edges (64) and just past them, K longer than one 16-deep k-tile.
class MmSizes : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(MmSizes, MatchesReference) {
  const auto [M, K, N] = GetParam();
  const auto a = random_host({M, K}), b = random_host({K, N});
  const Tensor c = ops::mm(upload(a), upload(b));
  const auto scale = ref::mm_abs(a, b);
  EXPECT_TRUE(all_close(c, ref::mm(a, b), 1e-6, dot_rtol(K), &scale));
}

TEST_P(MmSizes, SplitAlongKMatchesReference) {
  // Forced split-K (see q4gsw_test.cpp): k in chunks of 16 or more, partial products summed at the end.
  const auto [M, K, N] = GetParam();
  const auto a = random_host({M, K}), b = random_host({K, N});
  test::device().impl().split_k = 1;
  const Tensor c = ops::mm(upload(a), upload(b));
  test::device().impl().split_k = 0;
  const auto scale = ref::mm_abs(a, b);
  EXPECT_TRUE(all_close(c, ref::mm(a, b), 1e-6, dot_rtol(K), &scale));
}

INSTANTIATE_TEST_SUITE_P(Awkward, MmSizes,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(1, 7, 1),
                                           std::make_tuple(3, 5, 7), std::make_tuple(17, 31, 13),
                                           std::make_tuple(64, 64, 64), std::make_tuple(65, 17, 129),
                                           std::make_tuple(100, 1, 3), std::make_tuple(2, 211, 3),
                                           std::make_tuple(127, 33, 67), std::make_tuple(1, 300, 131),
                                           // 128 x 128 tiles (8 x 8 per thread) from here on
                                           std::make_tuple(128, 16, 128), std::make_tuple(130, 33, 257),
                                           std::make_tuple(257, 129, 131)));

// The split-K policy (split_k.h): chunks of whole k steps, at least 256 deep, enough of them to bring the tiles near
// the target; none for a CPU rasteriser, for mode -1, or where the tiles reach half the target already.
TEST(SplitK, ChunksBringTheTilesNearTheTarget) {
  using ops::detail::plan_split_k;
  // A weight gradient of 640 x 640 over 8192 tokens: 25 tiles of 128 x 128.
  EXPECT_EQ(plan_split_k(25, 8192, 0, false, 32).splits, 32);        // fp32's 1024: ceil(1024 / 25), 256 deep
  EXPECT_EQ(plan_split_k(25, 8192, 0, false, 32, 384).splits, 16);   // the mixed GEMMs' 384
  EXPECT_EQ(plan_split_k(25, 8192, 0, false, 32, 384).chunk, 512);
  EXPECT_EQ(plan_split_k(320, 640, 0, false, 32, 384).splits, 1);    // 320 tiles: past half of 384
  EXPECT_EQ(plan_split_k(320, 640, 0, false, 32).splits, 2);         // not of 1024; K allows 2 chunks of 320
  EXPECT_EQ(plan_split_k(320, 640, 0, false, 32).chunk, 320);
  const auto odd = plan_split_k(3, 1000, 0, false, 32, 384);         // chunks of whole k steps, the last short
  EXPECT_EQ(odd.chunk % 32, 0);
  EXPECT_GE(odd.chunk * odd.splits, 1000);
  EXPECT_LT(odd.chunk * (odd.splits - 1), 1000);
  EXPECT_EQ(plan_split_k(25, 8192, 0, true, 32).splits, 1);          // a CPU rasteriser
  EXPECT_EQ(plan_split_k(25, 8192, -1, false, 32).splits, 1);        // never
  EXPECT_EQ(plan_split_k(25, 8192, 1, false, 32).splits, 4);         // wherever possible (tests)
}

TEST(Mm, TransposedViewsNeedNoCopy) {
  // a = A^T and b = B^T as strided views; the kernel reads them through their strides.
  const int64_t M = 37, K = 29, N = 41;
  const auto at = random_host({K, M}), bt = random_host({N, K});
  const Tensor a = upload(at).transpose(0, 1), b = upload(bt).transpose(0, 1);
  ASSERT_FALSE(a.is_contiguous());
  ref::HostTensor ah({M, K}), bh({K, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) ah.data[i * K + k] = at.data[k * M + i];
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) bh.data[k * N + j] = bt.data[j * K + k];
  const auto before = test::device().stats().dispatches;
  const Tensor c = ops::mm(a, b);
  EXPECT_EQ(test::device().stats().dispatches, before + 1) << "a transposed operand must not be copied first";
  const auto scale = ref::mm_abs(ah, bh);
  EXPECT_TRUE(all_close(c, ref::mm(ah, bh), 1e-6, dot_rtol(K), &scale));
}

TEST(Mm, EmptyDims) {
  EXPECT_EQ(ops::mm(upload(random_host({0, 3})), upload(random_host({3, 5}))).shape(), (Shape{0, 5}));
  // N = 0 (and M = N = 0): an empty result, not a complaint about reshaping views.
  EXPECT_EQ(ops::mm(upload(random_host({2, 3})), upload(random_host({3, 0}))).shape(), (Shape{2, 0}));
  EXPECT_EQ(ops::mm(upload(random_host({0, 0})), upload(random_host({0, 0}))).shape(), (Shape{0, 0}));
  EXPECT_EQ(ops::bmm(upload(random_host({2, 3, 4})), upload(random_host({2, 4, 0}))).shape(), (Shape{2, 3, 0}));
  EXPECT_EQ(ops::linear(upload(random_host({2, 3, 0})), upload(random_host({4, 0}))).shape(), (Shape{2, 3, 4}));
  // K = 0: every output is an empty sum.
  const Tensor c = ops::mm(upload(random_host({4, 0})), upload(random_host({0, 3})));
  EXPECT_TRUE(all_close(c, ref::HostTensor({4, 3}), 0, 0));
}

TEST(Mm, RejectsBadArguments) {
  const Tensor a = upload(random_host({3, 4})), b = upload(random_host({5, 6}));
  try {
    ops::mm(a, b);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[3, 4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[5, 6]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::mm(a, upload(random_host({4}))), ArgumentError);
  const std::vector<int32_t> ints(12, 1);
  EXPECT_THROW(ops::mm(Tensor::from_host(test::device(), {4, 3}, ints), a), ArgumentError);
}

class BmmSizes : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(BmmSizes, MatchesReference) {
  const auto [B, M, K, N] = GetParam();
  const auto a = random_host({B, M, K}), b = random_host({B, K, N});
  const Tensor c = ops::bmm(upload(a), upload(b));
  const auto scale = ref::mm_abs(a, b);
  EXPECT_TRUE(all_close(c, ref::bmm(a, b), 1e-6, dot_rtol(K), &scale));
}

INSTANTIATE_TEST_SUITE_P(Awkward, BmmSizes,
                         ::testing::Values(std::make_tuple(1, 1, 1, 1), std::make_tuple(3, 17, 9, 33),
                                           std::make_tuple(5, 65, 3, 2), std::make_tuple(7, 1, 70, 1),
                                           std::make_tuple(2, 66, 67, 65), std::make_tuple(2, 129, 20, 130)));

TEST(Bmm, BroadcastBatchOperand) {
  // b expanded over the batch (stride 0): one weight for every batch entry.
  const int64_t B = 4, M = 5, K = 6, N = 7;
  const auto a = random_host({B, M, K}), b1 = random_host({1, K, N});
  const Tensor c = ops::bmm(upload(a), upload(b1).expand({B, K, N}));
  const auto b = ref::expand(b1, {B, K, N});
  const auto scale = ref::mm_abs(a, b);
  EXPECT_TRUE(all_close(c, ref::bmm(a, b), 1e-6, dot_rtol(K), &scale));
}

TEST(Bmm, RejectsMismatchedBatch) {
  EXPECT_THROW(ops::bmm(upload(random_host({2, 3, 4})), upload(random_host({3, 4, 5}))), ArgumentError);
  EXPECT_THROW(ops::bmm(upload(random_host({2, 3, 4})), upload(random_host({2, 5, 5}))), ArgumentError);
}

// (leading shape, K, N, bias)
class LinearCases : public ::testing::TestWithParam<std::tuple<Shape, int64_t, int64_t, bool>> {};

TEST_P(LinearCases, MatchesReference) {
  auto [lead, K, N, with_bias] = GetParam();
  Shape xs = lead;
  xs.push_back(K);
  const auto x = random_host(xs), w = random_host({N, K});
  std::optional<ref::HostTensor> bias;
  std::optional<Tensor> bias_t;
  if (with_bias) {
    bias = random_host({N});
    bias_t = upload(*bias);
  }
  const Tensor y = ops::linear(upload(x), upload(w), bias_t);
  // Scale: sum_k |x w| plus |bias|.
  const int64_t M = numel(lead);
  ref::HostTensor scale({M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(x.data[i * K + k] * w.data[j * K + k]);
      scale.data[i * N + j] = s + (bias ? std::fabs(bias->data[j]) : 0.0);
    }
  Shape ys = lead;
  ys.push_back(N);
  auto want = ref::linear(x, w, bias);
  scale.shape = ys;
  EXPECT_TRUE(all_close(y, want, 1e-6, dot_rtol(K + 1), &scale));
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, LinearCases,
    ::testing::Values(std::make_tuple(Shape{1}, 1, 1, false), std::make_tuple(Shape{1}, 1, 1, true),
                      std::make_tuple(Shape{7}, 13, 5, true), std::make_tuple(Shape{2, 5}, 100, 70, true),
                      std::make_tuple(Shape{3, 1, 4}, 17, 65, false), std::make_tuple(Shape{66}, 64, 3, true)));

TEST(Linear, StridedInput) {
  // x is a column slice of a wider matrix: not contiguous, still exact.
  const int64_t M = 9, K = 11, N = 6;
  const auto wide = random_host({M, K + 5}), w = random_host({N, K});
  const Tensor x = upload(wide).slice(1, 2, 2 + K);
  ASSERT_FALSE(x.is_contiguous());
  ref::HostTensor xh({M, K});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) xh.data[i * K + k] = wide.data[i * (K + 5) + 2 + k];
  const Tensor y = ops::linear(x, upload(w));
  EXPECT_TRUE(all_close(y, ref::linear(xh, w, std::nullopt), 1e-6, 1e-5));
}

TEST(Linear, RejectsBadArguments) {
  const Tensor x = upload(random_host({3, 4})), w = upload(random_host({5, 4}));
  EXPECT_THROW(ops::linear(x, upload(random_host({5, 3}))), ArgumentError);
  EXPECT_THROW(ops::linear(x, w, upload(random_host({4}))), ArgumentError);
  EXPECT_THROW(ops::linear(x, upload(random_host({5, 4, 1}))), ArgumentError);
}

// Every entry of the fp32 GEMM's tiling table forced in turn (ops::detail::gemm_force), through every path of the
// contract: odd sizes (edge tiles in M, N and k, no vec4 loads) and aligned ones (vec4 loads), A and B as transposed
// views, a broadcast batch, bias, accumulation, forced split-K, and the two q4gsw forms of B. Outputs poisoned
// (test::device()), float64 references, the fp32 dot-product tolerance above.
class GemmTilings : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const auto& t = ops::detail::gemm_tilings()[static_cast<size_t>(GetParam())];
    if (ops::detail::gemm_tiling_storage(t) > static_cast<int64_t>(test::device().impl().limits.max_workgroup_storage))
      GTEST_SKIP() << t.name << " needs more workgroup memory than " << test::device().info().name << " has";
    ops::detail::gemm_force = GetParam();
  }
  void TearDown() override {
    ops::detail::gemm_force = kEnvGemmForce;
    test::device().impl().split_k = 0;
  }
};

TEST_P(GemmTilings, MmAtAwkwardSizesAndViews) {
  SCOPED_TRACE(ops::detail::gemm_tilings()[static_cast<size_t>(GetParam())].name);
  // (M, K, N): a single element; odd k and n; vec4-aligned with an edge tile in M and N; longer k than one BK;
  // M a multiple of 4 (A as a view loads vec4s along m: gemm_tiled.wgsl's A_T).
  for (const auto& [M, K, N] : {std::make_tuple(1, 1, 1), std::make_tuple(67, 45, 133),
                                std::make_tuple(130, 36, 260), std::make_tuple(257, 100, 65),
                                std::make_tuple(132, 50, 68)}) {
    SCOPED_TRACE(::testing::Message() << M << "x" << K << "x" << N);
    const auto a = random_host({M, K}), b = random_host({K, N});
    const auto want = ref::mm(a, b), scale = ref::mm_abs(a, b);
    EXPECT_TRUE(all_close(ops::mm(upload(a), upload(b)), want, 1e-6, dot_rtol(K), &scale)) << "plain";
    // A read through a transposed view (m stride 1), then B (k stride 1).
    const Tensor at = ops::contiguous(upload(a).transpose(0, 1)).transpose(0, 1);
    const Tensor bt = ops::contiguous(upload(b).transpose(0, 1)).transpose(0, 1);
    EXPECT_TRUE(all_close(ops::mm(at, upload(b)), want, 1e-6, dot_rtol(K), &scale)) << "A as a view";
    EXPECT_TRUE(all_close(ops::mm(upload(a), bt), want, 1e-6, dot_rtol(K), &scale)) << "B as a view";
    test::device().impl().split_k = 1;
    EXPECT_TRUE(all_close(ops::mm(upload(a), upload(b)), want, 1e-6, dot_rtol(K), &scale)) << "split-K";
    EXPECT_TRUE(all_close(ops::mm(at, bt), want, 1e-6, dot_rtol(K), &scale)) << "split-K, both views";
    test::device().impl().split_k = 0;
  }
}

TEST_P(GemmTilings, BmmLinearAndWeightGradient) {
  SCOPED_TRACE(ops::detail::gemm_tilings()[static_cast<size_t>(GetParam())].name);
  {
    // Three batches against one broadcast B (batch stride 0).
    const int64_t B = 3, M = 70, K = 24, N = 66;
    const auto a = random_host({B, M, K}), b1 = random_host({1, K, N});
    const auto b = ref::expand(b1, {B, K, N});
    const auto scale = ref::mm_abs(a, b);
    EXPECT_TRUE(all_close(ops::bmm(upload(a), upload(b1).expand({B, K, N})), ref::bmm(a, b), 1e-6, dot_rtol(K),
                          &scale))
        << "bmm";
  }
  {
    // linear: B = W^T, a view; bias added in the epilogue.
    const int64_t M = 131, K = 40, N = 129;
    const auto x = random_host({M, K}), w = random_host({N, K}), bias = random_host({N});
    ref::HostTensor scale({M, N});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = std::fabs(bias.data[j]);
        for (int64_t k = 0; k < K; ++k) s += std::fabs(x.data[i * K + k] * w.data[j * K + k]);
        scale.data[i * N + j] = s;
      }
    EXPECT_TRUE(all_close(ops::linear(upload(x), upload(w), upload(bias)), ref::linear(x, w, bias), 1e-6,
                          dot_rtol(K + 1), &scale))
        << "linear with bias";
  }
  for (int split : {0, 1}) {
    // dW = dy^T x accumulated onto g0: A = dy^T is a view (N a multiple of 4: A_T), C accumulates (split-K: the
    // sum pass does).
    SCOPED_TRACE(split ? "split-K" : "whole k");
    const int64_t M = 150, N = 72, K = 133;
    const auto dy = random_host({M, N}), x = random_host({M, K}), g0 = random_host({N, K});
    ref::HostTensor dyt({N, M});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) dyt.data[j * M + i] = dy.data[i * N + j];
    auto want = ref::mm(dyt, x), scale = ref::mm_abs(dyt, x);
    for (size_t i = 0; i < want.data.size(); ++i) {
      want.data[i] += g0.data[i];
      scale.data[i] += std::fabs(g0.data[i]);
    }
    const Tensor acc = upload(g0);
    test::device().impl().split_k = split;
    ops::linear_dW(upload(dy), upload(x), &acc);
    test::device().impl().split_k = 0;
    EXPECT_TRUE(all_close(acc, want, 1e-6, dot_rtol(M + 1), &scale)) << "linear_dW accumulated";
  }
}

TEST_P(GemmTilings, Q4ForwardAndInputGradient) {
  SCOPED_TRACE(ops::detail::gemm_tilings()[static_cast<size_t>(GetParam())].name);
  // (M, N, K, group): K and N not multiples of 8 (padding nibbles), several groups, edge tiles.
  for (const auto& [M, N, K, G] : {std::make_tuple(37, 70, 100, 32), std::make_tuple(130, 133, 67, 64)}) {
    SCOPED_TRACE(::testing::Message() << M << "x" << N << "x" << K << " g" << G);
    std::vector<uint8_t> bytes(static_cast<size_t>(N * ((K + 1) / 2)));
    for (auto& v : bytes) v = static_cast<uint8_t>(test::rng()() & 0xff);
    const auto s = random_host({q4gsw::groups(K, G), N}, 0.01, 0.2);
    const std::vector<float> scales(s.data.begin(), s.data.end());
    const Q4Weight w = q4gsw::upload(test::device(), bytes, scales, N, K, G);
    const auto wd = ref::q4_dequant(bytes, scales, N, K, G);  // [N, K]
    ref::HostTensor wt({K, N});
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < K; ++c) wt.data[c * N + r] = wd.data[r * K + c];
    const auto x = random_host({M, K}), dy = random_host({M, N});
    const auto y_want = ref::mm(x, wt), y_scale = ref::mm_abs(x, wt);
    const auto dx_want = ref::mm(dy, wd), dx_scale = ref::mm_abs(dy, wd);
    for (int split : {0, 1}) {
      SCOPED_TRACE(split ? "split-K" : "whole k");
      test::device().impl().split_k = split;
      EXPECT_TRUE(all_close(ops::linear_q4gsw(upload(x), w), y_want, 1e-6, dot_rtol(K), &y_scale)) << "forward";
      EXPECT_TRUE(all_close(ops::linear_q4gsw_backward(upload(dy), w), dx_want, 1e-6, dot_rtol(N), &dx_scale))
          << "input gradient";
      test::device().impl().split_k = 0;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forced, GemmTilings,
                         ::testing::Range(0, static_cast<int>(ops::detail::gemm_tilings().size())));

TEST(GemmTilings, ForcingAnEntryPastTheTableIsAnError) {
  ops::detail::gemm_force = static_cast<int>(ops::detail::gemm_tilings().size());
  EXPECT_THROW(ops::mm(upload(random_host({2, 3})), upload(random_host({3, 4}))), ArgumentError);
  ops::detail::gemm_force = kEnvGemmForce;
}

}  // namespace
}  // namespace wgtrain
