// Comparisons, where, masked_fill, logical_not: exact, against the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::all_equal;
using test::random_host;
using test::random_ints;
using test::upload;

const char* kCompares[] = {"eq", "ne", "lt", "le", "gt", "ge"};

TEST(Compare, TensorTensorWithBroadcasting) {
  // Small integers as floats, so that ties (eq, le, ge) happen often.
  const auto a = random_ints({4, 1, 33}, -2, 2), b = random_ints({5, 1}, -2, 2);
  for (const char* op : kCompares) {
    SCOPED_TRACE(op);
    const Tensor got = ops::compare(op, upload(a), upload(b));
    EXPECT_EQ(got.dtype(), DType::Bool);
    EXPECT_TRUE(all_equal(got, ref::compare(op, a, b)));
    EXPECT_TRUE(all_equal(ops::compare(op, test::upload_i32(a), test::upload_i32(b)), ref::compare(op, a, b)));
  }
}

TEST(Compare, TensorScalar) {
  const auto a = random_ints({257}, -3, 3);
  for (const char* op : kCompares) {
    SCOPED_TRACE(op);
    for (double s : {1.0, -0.5}) {
      const ref::HostTensor sv({}, {s});
      EXPECT_TRUE(all_equal(ops::compare_scalar(op, upload(a), s), ref::compare(op, a, sv)));
      EXPECT_TRUE(all_equal(ops::compare_scalar(op, test::upload_i32(a), s), ref::compare(op, a, sv)));
    }
  }
}

TEST(Where, BroadcastsAllThree) {
  const auto c = random_ints({3, 1, 7}, 0, 1), a = random_host({4, 1}), b = random_host({7});
  EXPECT_TRUE(all_close(ops::where(test::upload_bool(c), upload(a), upload(b)), ref::where(c, a, b), 0, 0));
  const auto ai = random_ints({3, 4, 7}, -9, 9), bi = random_ints({1}, -9, 9);
  EXPECT_TRUE(all_equal(ops::where(test::upload_bool(c), test::upload_i32(ai), test::upload_i32(bi)),
                        ref::where(c, ai, bi)));
}

TEST(Where, CausalMask) {
  // The attention use: keep the lower triangle of scores, -inf above it, then softmax rows sum to 1.
  const int64_t T = 19;
  ref::HostTensor lower({T, T});
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) lower.data[i * T + j] = j <= i;
  const auto scores = random_host({2, T, T}, -3, 3);
  const Tensor masked = ops::masked_fill(upload(scores), ops::logical_not(test::upload_bool(lower)), -INFINITY);
  const auto p = ops::softmax(masked, -1).to_host_f32();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < T; ++i) {
      double row = 0;
      for (int64_t j = 0; j < T; ++j) {
        const float v = p[(b * T + i) * T + j];
        if (j > i) {
          EXPECT_EQ(v, 0.0f);
        }
        row += v;
      }
      EXPECT_NEAR(row, 1.0, 1e-5);
    }
}

TEST(MaskedFill, FillsWhereTrue) {
  const auto x = random_host({6, 5}), m = random_ints({5}, 0, 1);
  const ref::HostTensor v({}, {7.5});
  EXPECT_TRUE(all_close(ops::masked_fill(upload(x), test::upload_bool(m), 7.5), ref::where(m, v, x), 0, 0));
  EXPECT_THROW(ops::masked_fill(upload(x), test::upload_bool(random_ints({6, 5, 2}, 0, 1)), 1.0), ArgumentError);
  EXPECT_THROW(ops::masked_fill(upload(x), upload(x), 1.0), ArgumentError);
}

TEST(LogicalNot, EveryInputDtype) {
  const auto a = random_ints({3, 11}, -1, 1);
  ref::HostTensor want(a.shape);
  for (size_t i = 0; i < a.data.size(); ++i) want.data[i] = a.data[i] == 0;
  EXPECT_TRUE(all_equal(ops::logical_not(upload(a)), want));
  EXPECT_TRUE(all_equal(ops::logical_not(test::upload_i32(a)), want));
  EXPECT_TRUE(all_equal(ops::logical_not(test::upload_bool(a)), want));
}

TEST(Select, RejectsBadArguments) {
  const Tensor f = upload(random_host({3})), i = test::upload_i32(random_ints({3}, 0, 1));
  EXPECT_THROW(ops::compare("eq", f, i), ArgumentError);
  EXPECT_THROW(ops::compare("equal", f, f), ArgumentError);
  EXPECT_THROW(ops::where(f, f, f), ArgumentError);  // condition must be bool
  EXPECT_THROW(ops::where(test::upload_bool(random_ints({3}, 0, 1)), f, i), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
