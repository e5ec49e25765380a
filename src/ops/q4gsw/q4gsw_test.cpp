// q4gsw: layout conversion, the three GEMMs against the float64 reference, and re-quantisation bit for bit, each
// case on both backends (WebGPU, and the native Vulkan backend's GLSL kernels; tests/support/backends.h).
// GEMM tolerance: |y - ref| <= 1e-6 + 2K * 2^-24 * sum_k |x_k w_k| (a length-K fp32 dot product).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/q4gsw/q4gsw_force.h"
#include "ops/q4gsw/q4gsw_ref.h"
#include "gpu/device_impl.h"
#include "support/backends.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::close_to;
using test::random_host;
using test::upload;

double dot_rtol(int64_t k) { return 2.0 * std::max<int64_t>(k, 1) * std::ldexp(1.0, -24); }

struct HostQ4 {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  int64_t n, k, group;
};

// Random codes (all 16 values), random positive scales, and some all-zero-scale groups.
HostQ4 random_q4(int64_t n, int64_t k, int64_t group) {
  HostQ4 q{{}, {}, n, k, group};
  const auto codes = test::random_ints({n, k}, 0, 15);
  q.bytes.assign(static_cast<size_t>(n * ((k + 1) / 2)), 0x88);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      uint8_t& b = q.bytes[r * ((k + 1) / 2) + c / 2];
      const int code = static_cast<int>(codes.data[r * k + c]);
      b = c % 2 ? static_cast<uint8_t>((b & 0x0f) | (code << 4)) : static_cast<uint8_t>((b & 0xf0) | code);
    }
  const auto s = random_host({q4gsw::groups(k, group), n}, 0.01, 0.2);
  q.scales.assign(s.data.begin(), s.data.end());
  for (size_t i = 0; i < q.scales.size(); i += 7) q.scales[i] = 0.0f;
  return q;
}

ref::HostTensor abs_dot(const ref::HostTensor& x, const ref::HostTensor& w) {  // sum_k |x[m,k] w[n,k]|
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  ref::HostTensor s({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < k; ++c) s.data[i * n + j] += std::fabs(x.data[i * k + c] * w.data[j * k + c]);
  return s;
}

TEST(Q4Layout, BytesAndWordsRoundTrip) {
  for (int64_t k : {1, 2, 7, 8, 13, 64, 100}) {
    SCOPED_TRACE(k);
    const auto q = random_q4(5, k, 8);
    const auto words = q4gsw::pack_bytes(q.bytes, 5, k);
    ASSERT_EQ(static_cast<int64_t>(words.size()), 5 * q4gsw::words_per_row(k));
    EXPECT_EQ(q4gsw::unpack_words(words, 5, k), q.bytes);
    // Every nibble past K is the zero code.
    for (int64_t r = 0; r < 5; ++r)
      for (int64_t c = k; c < q4gsw::words_per_row(k) * 8; ++c)
        EXPECT_EQ((static_cast<uint32_t>(words[r * q4gsw::words_per_row(k) + c / 8]) >> (4 * (c % 8))) & 15u, 8u);
  }
  EXPECT_THROW(q4gsw::pack_bytes(std::vector<uint8_t>(3), 2, 4), ArgumentError);
  EXPECT_THROW(q4gsw::upload(test::device(), std::vector<uint8_t>(4), std::vector<float>(2), 2, 4, 12),
               ArgumentError);
}

// (M, N, K, group), backend
class Q4Gemms
    : public ::testing::TestWithParam<std::tuple<std::tuple<int64_t, int64_t, int64_t, int64_t>, std::string>> {};

// `extra`: a relative tolerance on top of fp32 rounding, for the fp16 operands of cooperative matrices.
template <class B>
void check_q4_gemms(int64_t M, int64_t N, int64_t K, int64_t G, double extra = 0) {
  const auto q = random_q4(N, K, G);
  const typename B::Q4 w = B::upload_q4(q.bytes, q.scales, N, K, G);
  const auto wd = ref::q4_dequant(q.bytes, q.scales, N, K, G);  // [N, K]

  const auto x = random_host({M, K});
  const auto y_scale = abs_dot(x, wd);
  EXPECT_TRUE(close_to(B::linear_q4gsw(B::upload(x), w), ref::linear(x, wd, std::nullopt), 1e-6,
                       dot_rtol(K) + extra, &y_scale))
      << "forward";

  const auto dy = random_host({M, N});
  ref::HostTensor wt({K, N});
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < K; ++c) wt.data[c * N + r] = wd.data[r * K + c];
  const auto dx_scale = abs_dot(dy, wt);
  EXPECT_TRUE(close_to(B::linear_q4gsw_backward(B::upload(dy), w), ref::linear(dy, wt, std::nullopt), 1e-6,
                       dot_rtol(N) + extra, &dx_scale))
      << "input gradient";
  // Accumulated onto an existing gradient (q, k and v's terms of one input's).
  {
    const auto d0 = random_host({M, K});
    const typename B::T acc = B::upload(d0);
    const typename B::T same = B::linear_q4gsw_backward(B::upload(dy), w, &acc);
    EXPECT_EQ(same.to_host_f32(), acc.to_host_f32()) << "accumulates in place";
    auto want = ref::linear(dy, wt, std::nullopt);
    auto acc_scale = dx_scale;
    for (size_t i = 0; i < want.data.size(); ++i) {
      want.data[i] += d0.data[i];
      acc_scale.data[i] += std::fabs(d0.data[i]);
    }
    EXPECT_TRUE(close_to(acc, want, 1e-6, dot_rtol(N + 1) + extra, &acc_scale)) << "input gradient accumulated";
  }

  // dW = dy^T x, and accumulated onto an existing gradient.
  ref::HostTensor dyt({N, M}), xt({K, M});
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) dyt.data[j * M + i] = dy.data[i * N + j];
    for (int64_t c = 0; c < K; ++c) xt.data[c * M + i] = x.data[i * K + c];
  }
  const auto dw_ref = ref::linear(dyt, xt, std::nullopt);
  const auto dw_scale = abs_dot(dyt, xt);
  EXPECT_TRUE(close_to(B::linear_dW(B::upload(dy), B::upload(x)), dw_ref, 1e-6, dot_rtol(M) + extra, &dw_scale))
      << "dW";
  const auto g0 = random_host({N, K});
  const typename B::T acc = B::upload(g0);
  const typename B::T same = B::linear_dW(B::upload(dy), B::upload(x), &acc);
  EXPECT_EQ(same.to_host_f32(), acc.to_host_f32()) << "accumulates in place";
  auto want = dw_ref;
  auto acc_scale = dw_scale;
  for (size_t i = 0; i < want.data.size(); ++i) {
    want.data[i] += g0.data[i];
    acc_scale.data[i] += std::fabs(g0.data[i]);
  }
  EXPECT_TRUE(close_to(acc, want, 1e-6, dot_rtol(M + 1) + extra, &acc_scale)) << "dW accumulated";
}

TEST_P(Q4Gemms, ForwardBackwardAndWeightGradMatchReference) {
  const auto [shape, backend] = GetParam();
  const auto [M, N, K, G] = shape;
  // Bindings copied into the lambda: clang before 16 (the browser build's) cannot capture them by reference.
  test::with_backend(backend, [M = M, N = N, K = K, G = G](auto b) { check_q4_gemms<decltype(b)>(M, N, K, G); });
}

// The same, with every product split along k into chunks whose partial sums are added at the end (split-K, which
// a GPU uses for products with few output tiles and a long k; forced here, where a CPU would never choose it).
TEST_P(Q4Gemms, SplitAlongKMatchReference) {
  const auto [shape, backend] = GetParam();
  const auto [M, N, K, G] = shape;
  test::with_backend(backend, [M = M, N = N, K = K, G = G](auto b) {  // copies: as above
    using B = decltype(b);
    B::set_split_k(1);
    check_q4_gemms<B>(M, N, K, G);
    B::set_split_k(0);
  });
}

const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> kQ4GemmShapes = {
    {1, 1, 8, 8},      {3, 5, 13, 32},     {7, 13, 64, 32},   {5, 17, 100, 64},
    {2, 3, 128, 128},  {33, 65, 257, 128}, {130, 129, 96, 32}, {1, 70, 1, 32}};

INSTANTIATE_TEST_SUITE_P(Awkward, Q4Gemms,
                         ::testing::Combine(::testing::ValuesIn(kQ4GemmShapes), ::testing::ValuesIn(test::kBackends)));

// The native Vulkan backend's cooperative-matrix GEMMs, where the device offers them (not lavapipe: skipped in CI,
// run on the GPU machine). fp16 operands: 2^-10 of sum |x_k w_k| on top (each product's operands rounded once).
class Q4CoopMat : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int64_t>> {};

TEST_P(Q4CoopMat, MatchReferenceWithinFp16) {
  if ((test::native_device(), !test::native_coopmat_offered()))
    GTEST_SKIP() << test::native_device().info().name << " offers no cooperative matrices";
  const auto [M, N, K, G] = GetParam();
  test::native_device().impl().features.cooperative_matrix = true;
  check_q4_gemms<test::Vulkan>(M, N, K, G, std::ldexp(1.0, -10));
  test::Vulkan::set_split_k(1);
  check_q4_gemms<test::Vulkan>(M, N, K, G, std::ldexp(1.0, -10));
  test::Vulkan::set_split_k(0);
  test::native_device().impl().features.cooperative_matrix = false;
}

INSTANTIATE_TEST_SUITE_P(Awkward, Q4CoopMat, ::testing::ValuesIn(kQ4GemmShapes));

TEST(Q4Gemms, LeadingDimsAndStridedInput) {
  const auto q = random_q4(6, 40, 32);
  const Q4Weight w = q4gsw::upload(test::device(), q.bytes, q.scales, 6, 40, 32);
  const auto wd = ref::q4_dequant(q.bytes, q.scales, 6, 40, 32);
  const auto x = random_host({2, 3, 40});
  const Tensor y = ops::linear_q4gsw(upload(x), w);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6}));
  EXPECT_TRUE(all_close(y, ref::linear(x, wd, std::nullopt), 1e-5, 1e-5));
  EXPECT_THROW(ops::linear_q4gsw(upload(random_host({3, 41})), w), ArgumentError);
  EXPECT_THROW(ops::linear_q4gsw_backward(upload(random_host({3, 7})), w), ArgumentError);
}

class Q4Requant : public ::testing::TestWithParam<std::string> {};

// Runs fn with each form of q4gsw_requant forced (ops/q4gsw/q4gsw_force.h): the two-kernel one and the one-pass
// requant_groups kernel with one and two code words a thread, then the op's own choice.
template <class Fn>
void each_requant_form(const Fn& fn) {
  namespace od = ops::detail;
  for (int form : {od::kRequantOld, od::kRequantGroups, od::kRequantGroups2, od::kRequantChoice}) {
    SCOPED_TRACE("requant form " + std::to_string(form));
    od::q4gsw_requant_force = form;
    try {
      fn();
    } catch (...) {
      od::q4gsw_requant_force = od::kRequantChoice;
      throw;
    }
    od::q4gsw_requant_force = od::kRequantChoice;
  }
}

template <class B>
void requant_matches_reference() {
  // With the one-pass kernel: groups of 1, 3, 4, 8 and 256 words, a workgroup's groups across rows (65 x 64,
  // 300 x 40), vec4 rows (K % 4 == 0) ending in half a word (36) and scalar ones.
  for (auto [n, k, g] : {std::make_tuple(1, 1, 8), std::make_tuple(7, 13, 32), std::make_tuple(33, 100, 64),
                         std::make_tuple(5, 256, 128), std::make_tuple(3, 36, 8), std::make_tuple(4, 100, 24),
                         std::make_tuple(2, 4100, 2048), std::make_tuple(65, 64, 32), std::make_tuple(300, 40, 8),
                         std::make_tuple(7, 96, 24)}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + " g" + std::to_string(g));
    auto latent = random_host({n, k}, -1.5, 1.5);
    const auto s = random_host({q4gsw::groups(k, g), n}, 0.05, 0.3);  // some |latent / s| > 8: clamped
    std::vector<float> scales(s.data.begin(), s.data.end());
    scales[0] = 0.0f;  // a zero-scale group: code 8
    typename B::Q4 w = B::upload_q4(std::vector<uint8_t>(n * q4gsw::bytes_per_row(k), 0), scales, n, k, g);
    B::q4gsw_requant(B::upload(latent), w, false);
    EXPECT_EQ(B::q4_bytes(w), ref::q4_requant(latent, scales, g)) << "seed " << test::seed();
  }
}

TEST_P(Q4Requant, MatchesTheReferenceBitForBit) {
  each_requant_form([&] { test::with_backend(GetParam(), [](auto b) { requant_matches_reference<decltype(b)>(); }); });
}

template <class B>
void requant_ties() {
  // scale 0.25 (a power of two): latent = (q + 1/2) * 0.25 is an exact tie for every q.
  const int64_t n = 1, k = 32;
  ref::HostTensor latent({n, k});
  for (int64_t c = 0; c < k; ++c) latent.data[c] = (static_cast<double>(c % 17) - 8.5) * 0.25;
  const std::vector<float> scales = {0.25f};
  typename B::Q4 w = B::upload_q4(std::vector<uint8_t>(16, 0), scales, n, k, 32);
  B::q4gsw_requant(B::upload(latent), w, false);
  const auto got = B::q4_bytes(w);
  const auto want = ref::q4_requant(latent, scales, 32);
  EXPECT_EQ(got, want);
  // -8.5 -> -8, -7.5 -> -8, -6.5 -> -6, -0.5 -> 0, 0.5 -> 0, 1.5 -> 2 (each to the even neighbour).
  EXPECT_EQ(want[0] & 15, 0);   // k = 0
  EXPECT_EQ(want[0] >> 4, 0);   // k = 1
  EXPECT_EQ(want[1] & 15, 2);   // k = 2
  EXPECT_EQ(want[4] & 15, 8);   // k = 8
  EXPECT_EQ(want[4] >> 4, 8);   // k = 9
  EXPECT_EQ(want[5] & 15, 10);  // k = 10
}

TEST_P(Q4Requant, TiesRoundHalfToEven) {
  each_requant_form([&] { test::with_backend(GetParam(), [](auto b) { requant_ties<decltype(b)>(); }); });
}

template <class B>
void requant_near_ties() {
  // Latents a rounding away from ties: the float nearest (q + 1/2) s and its two neighbours, for scales of full
  // 24-bit mantissas, so that x - (q + 1/2) s is a few 2^-30 from zero. Deciding that sign through an fma the
  // driver may split into a product and a sum (WGSL and SPIR-V allow it; Mesa's lavapipe and llvmpipe do) picks the
  // wrong neighbour for some of them: the reference rounds x / s in double, exactly.
  const int64_t n = 16, k = 96, g = 32;
  ref::HostTensor latent({n, k});
  const auto sc = random_host({q4gsw::groups(k, g), n}, 0.05, 0.3);
  const std::vector<float> scales(sc.data.begin(), sc.data.end());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const double s = scales[(c / g) * n + r], half = static_cast<double>((c / 3) % 17) - 8.5;
      const float tie = static_cast<float>(half * s);
      const int step = static_cast<int>(c % 3) - 1;  // the float below, at, or above
      latent.data[r * k + c] = step == 0 ? tie : std::nextafter(tie, step > 0 ? 1e9f : -1e9f);
    }
  typename B::Q4 w = B::upload_q4(std::vector<uint8_t>(n * q4gsw::bytes_per_row(k), 0), scales, n, k, g);
  B::q4gsw_requant(B::upload(latent), w, false);
  EXPECT_EQ(B::q4_bytes(w), ref::q4_requant(latent, scales, g)) << "seed " << test::seed();
}

TEST_P(Q4Requant, NearTiesRoundAsTheExactQuotient) {
  each_requant_form([&] { test::with_backend(GetParam(), [](auto b) { requant_near_ties<decltype(b)>(); }); });
}

template <class B>
void requant_scales_of_every_magnitude() {
  // quantize.wgsl takes x (1 / s) for a quotient far from a tie where |s| is in [2^-100, 2^100], and the exact test
  // elsewhere: scales inside, on and past both ends (negative ones too), each row's latents their multiples from
  // -10 to 10, exact ties (q + 1/2) s (s a power of two) and the floats beside them, near 8.5 where the clamp meets.
  const std::vector<double> mags = {0x1p-120, 0x1p-101, 0x1p-100, 0x1p-99, 0.75,
                                    1.0,      0x1p99,   0x1p100,  0x1p101, 0x1p110, 0x1p124};
  const int64_t n = static_cast<int64_t>(mags.size()) * 2, k = 64, g = 64;
  std::vector<float> scales(static_cast<size_t>(n));
  ref::HostTensor latent({n, k});
  auto rnd = random_host({n, k}, -10, 10);
  for (int64_t r = 0; r < n; ++r) {
    const double s = (r % 2 ? -1.0 : 1.0) * mags[static_cast<size_t>(r / 2)];
    scales[static_cast<size_t>(r)] = static_cast<float>(s);
    for (int64_t c = 0; c < k; ++c) {
      const double q = c < 40 ? static_cast<double>(c % 20) - 9.5 : rnd.data[r * k + c];
      const float x = static_cast<float>(q * s);
      const int step = static_cast<int>(c % 3) - 1;  // for the ties: the float below, at, or above
      latent.data[r * k + c] = c < 40 && step != 0 ? std::nextafter(x, step > 0 ? 1e38f : -1e38f) : x;
    }
  }
  typename B::Q4 w = B::upload_q4(std::vector<uint8_t>(n * q4gsw::bytes_per_row(k), 0), scales, n, k, g);
  B::q4gsw_requant(B::upload(latent), w, false);
  EXPECT_EQ(B::q4_bytes(w), ref::q4_requant(latent, scales, g)) << "seed " << test::seed();
}

TEST_P(Q4Requant, ScalesOfEveryMagnitude) {
  each_requant_form(
      [&] { test::with_backend(GetParam(), [](auto b) { requant_scales_of_every_magnitude<decltype(b)>(); }); });
}

template <class B>
void requant_recomputes_scales() {
  for (auto [n, k, g] : {std::make_tuple(9, 70, 32), std::make_tuple(65, 64, 32), std::make_tuple(4, 100, 24),
                         std::make_tuple(3, 36, 8), std::make_tuple(2, 4100, 2048), std::make_tuple(7, 96, 24),
                         std::make_tuple(300, 40, 8)}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + " g" + std::to_string(g));
    auto latent = random_host({n, k}, -2, 2);
    for (int64_t c = 0; c < g; ++c) latent.data[c] = 0.0;  // an all-zero group: scale 0, codes 8
    typename B::Q4 w = B::upload_q4(std::vector<uint8_t>(n * q4gsw::bytes_per_row(k), 0),
                                    std::vector<float>(q4gsw::groups(k, g) * n, 1.0f), n, k, g);
    B::q4gsw_requant(B::upload(latent), w, true);
    const auto got_scales = w.scales.to_host_f32();
    const auto want_scales = ref::q4_scales(latent, g);
    ASSERT_EQ(got_scales.size(), want_scales.size());
    for (size_t i = 0; i < got_scales.size(); ++i)
      EXPECT_NEAR(got_scales[i], want_scales[i], 3e-7 * want_scales[i]) << i;  // WGSL/SPIR-V division: 2.5 ulp
    EXPECT_EQ(got_scales[0], 0.0f);
    // Codes against the scales the device chose; with max/7 scales no code clamps.
    EXPECT_EQ(B::q4_bytes(w), ref::q4_requant(latent, got_scales, g));
  }
}

TEST_P(Q4Requant, RecomputesScalesFromTheLatent) {
  each_requant_form(
      [&] { test::with_backend(GetParam(), [](auto b) { requant_recomputes_scales<decltype(b)>(); }); });
}

INSTANTIATE_TEST_SUITE_P(Backends, Q4Requant, ::testing::ValuesIn(test::kBackends));

}  // namespace
}  // namespace wgtrain
