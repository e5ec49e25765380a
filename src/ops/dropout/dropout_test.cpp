// dropout and dropout_mask against the CPU reference (the same hash in C++): the masks bit for bit, the values to
// one float32 rounding of x * scale (rtol 1e-7); the keep rate within 5 standard deviations of 1 - p; independent
// masks for other streams and counters; a recorded op replays with the key written before each replay.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/dropout/dropout_ref.h"
#include "support/test_support.h"
#include "wgtrain/device.h"
#include "wgtrain/dropout.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::device;
using test::random_host;
using test::upload;

Tensor key_tensor(uint64_t seed, uint64_t counter) {
  const auto k = ops::dropout_key(seed, counter);
  return Tensor::from_host(device(), {4}, std::span<const int32_t>(k.data(), k.size()));
}

struct Case {
  Shape shape;
  double p;
  uint32_t stream;
};

class DropoutCases : public ::testing::TestWithParam<Case> {};

TEST_P(DropoutCases, MatchesTheReference) {
  const Case c = GetParam();
  const uint64_t seed = test::seed(), counter = test::seed() * 31 + 7;
  const Tensor key = key_tensor(seed, counter);
  const auto words = ops::dropout_key(seed, counter);
  const auto x = random_host(c.shape, -3, 3);
  const std::vector<double> mask = ref::dropout_mask(words, c.stream, x.numel(), c.p);
  ref::HostTensor want(x.shape), want_mask(x.shape, mask);
  for (int64_t i = 0; i < x.numel(); ++i) want.data[i] = x.data[i] * mask[i];
  EXPECT_TRUE(all_close(ops::dropout(upload(x), key, c.p, c.stream), want, 0, 1e-7))
      << "WGTRAIN_TEST_SEED=" << test::seed();
  EXPECT_TRUE(all_close(ops::dropout_mask(c.shape, key, c.p, c.stream), want_mask, 0, 0))
      << "WGTRAIN_TEST_SEED=" << test::seed();
}

INSTANTIATE_TEST_SUITE_P(Awkward, DropoutCases,
                         ::testing::Values(Case{{1}, 0.5, 0}, Case{{7, 13}, 0.1, 3}, Case{{3, 5, 17}, 0.5, 0xffffffffu},
                                           Case{{1000, 3}, 0.9, 12}, Case{{257}, 0.0, 1}, Case{{2, 3, 4, 5}, 0.999, 2},
                                           Case{{33, 65}, 1e-7, 9}));

TEST(Dropout, StridedInputsUseTheirRowMajorIndex) {
  const Tensor key = key_tensor(5, 6);
  const auto x = random_host({6, 10});
  const Tensor xt = upload(x).transpose(0, 1);  // [10, 6], not contiguous
  const std::vector<float> got = ops::dropout(xt, key, 0.4, 1).to_host_f32();
  const std::vector<float> want = ops::dropout(ops::contiguous(xt), key, 0.4, 1).to_host_f32();
  EXPECT_EQ(got, want);
}

TEST(Dropout, KeepsAboutOneMinusPAndMasksAreIndependent) {
  const int64_t n = 1 << 16;
  for (double p : {0.05, 0.3, 0.5, 0.8}) {
    SCOPED_TRACE(p);
    const double sigma = std::sqrt(n * p * (1 - p));
    auto kept = [&](uint64_t counter, uint32_t stream) {
      std::vector<float> m = ops::dropout_mask({n}, key_tensor(test::seed(), counter), p, stream).to_host_f32();
      std::vector<bool> k(m.size());
      for (size_t i = 0; i < m.size(); ++i) k[i] = m[i] != 0;
      return k;
    };
    const auto a = kept(1, 0), b = kept(2, 0), c = kept(1, 1);
    int64_t na = 0, ab = 0, ac = 0;
    for (int64_t i = 0; i < n; ++i) {
      na += a[i];
      ab += a[i] && b[i];
      ac += a[i] && c[i];
    }
    EXPECT_NEAR(static_cast<double>(na), n * (1 - p), 5 * sigma);
    // Independent masks keep an element in both with probability (1 - p)^2.
    const double both = n * (1 - p) * (1 - p), sd = std::sqrt(both * (1 - (1 - p) * (1 - p)));
    EXPECT_NEAR(static_cast<double>(ab), both, 5 * sd) << "counters 1 and 2";
    EXPECT_NEAR(static_cast<double>(ac), both, 5 * sd) << "streams 0 and 1";
    // Neighbours are independent too (a hash with weak avalanche correlates element i with i + 1).
    int64_t adjacent = 0;
    for (int64_t i = 0; i + 1 < n; ++i) adjacent += a[i] && a[i + 1];
    EXPECT_NEAR(static_cast<double>(adjacent), (n - 1) * (1 - p) * (1 - p), 5 * sd);
  }
}

TEST(Dropout, IsItsOwnBackwardUnderTheSameKey) {
  // d/dx sum(g * dropout(x)) = dropout(g): the same elements drop, the same scale multiplies.
  const Tensor key = key_tensor(11, 12);
  const auto x = random_host({9, 31}), g = random_host({9, 31});
  const auto y = ops::dropout(upload(x), key, 0.25, 4).to_host_f32();
  const auto dx = ops::dropout(upload(g), key, 0.25, 4).to_host_f32();
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i] == 0.0f, dx[i] == 0.0f) << i;
    if (y[i] != 0) {
      EXPECT_FLOAT_EQ(dx[i] / static_cast<float>(g.data[i]), y[i] / static_cast<float>(x.data[i])) << i;
    }
  }
}

TEST(Dropout, ARecordedOpReadsTheKeyWrittenBeforeEachReplay) {
  const Tensor key = key_tensor(3, 0);
  const auto x = random_host({40, 7});
  const Tensor xd = upload(x);
  Tensor out;
  const Recording rec = device().record([&] { out = ops::dropout(xd, key, 0.5, 2); });
  for (uint64_t counter : {5u, 6u, 5u}) {
    const auto k = ops::dropout_key(3, counter);
    key.write(std::span<const int32_t>(k.data(), k.size()));
    rec.replay();
    const std::vector<double> mask = ref::dropout_mask(k, 2, x.numel(), 0.5);
    ref::HostTensor want(x.shape);
    for (int64_t i = 0; i < x.numel(); ++i) want.data[i] = x.data[i] * mask[i];
    EXPECT_TRUE(all_close(out, want, 0, 1e-7)) << "counter " << counter;
  }
}

TEST(Dropout, KeyWordsAreTheSeedAndCounterHalves) {
  const auto k = ops::dropout_key(0x0123456789abcdefull, 0xfedcba9876543210ull);
  EXPECT_EQ(static_cast<uint32_t>(k[0]), 0x89abcdefu);
  EXPECT_EQ(static_cast<uint32_t>(k[1]), 0x01234567u);
  EXPECT_EQ(static_cast<uint32_t>(k[2]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(k[3]), 0xfedcba98u);
}

TEST(Dropout, RejectsBadArguments) {
  const Tensor key = key_tensor(1, 2), x = upload(random_host({3, 4}));
  EXPECT_THROW(ops::dropout(x, key, 1.0, 0), ArgumentError);
  EXPECT_THROW(ops::dropout(x, key, -0.1, 0), ArgumentError);
  EXPECT_THROW(ops::dropout(x, key, std::nan(""), 0), ArgumentError);
  EXPECT_THROW(ops::dropout(x, upload(random_host({4})), 0.5, 0), ArgumentError);  // float key
  const std::vector<int32_t> three = {1, 2, 3};
  EXPECT_THROW(ops::dropout(x, Tensor::from_host(device(), {3}, three), 0.5, 0), ArgumentError);
  EXPECT_THROW(ops::dropout(Tensor::from_host(device(), {3}, three), key, 0.5, 0), ArgumentError);  // int x
  EXPECT_THROW(ops::dropout_mask({2, -1}, key, 0.5, 0), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
