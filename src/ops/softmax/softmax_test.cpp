// _softmax, _log_softmax and _softmax_backward_data against the float64 reference.
// Tolerance: softmax |y - ref| <= 1e-6 + 1e-5 |ref|; log_softmax |y - ref| <= 4e-7 (|ref| + |x| + 1), a few f32
// roundings of x - max - log(sum) (for logits of 1e4 that is about 1e-3 absolute, as exact as x itself);
// the backward |dx - ref| <= 1e-6 (y (|dy| + sum |dy y|) + 1e-6), float32 rounding of the row's dot product.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::random_host;
using test::upload;

struct Case {
  Shape shape;
  int dim;
  double magnitude;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << shape_str(c.shape) << " dim " << c.dim << " |x| < " << c.magnitude;
}

class SoftmaxCases : public ::testing::TestWithParam<Case> {};

void check(const ref::HostTensor& x, int dim) {
  const Tensor xt = upload(x);
  EXPECT_TRUE(all_close(ops::softmax(xt, dim), ref::softmax(x, dim, false), 1e-6, 1e-5)) << "softmax";
  const auto want_log = ref::softmax(x, dim, true);
  ref::HostTensor scale(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) scale.data[i] = std::fabs(want_log.data[i]) + std::fabs(x.data[i]) + 1.0;
  EXPECT_TRUE(all_close(ops::log_softmax(xt, dim), want_log, 0, 4e-7, &scale)) << "log_softmax";
  // The backward, from the reference output (rounded to f32, as the GPU would hold it).
  ref::HostTensor y = ref::softmax(x, dim, false);
  for (auto& v : y.data) v = static_cast<float>(v);
  const ref::HostTensor g = random_host(x.shape);
  ref::HostTensor gy = g;
  for (size_t i = 0; i < gy.data.size(); ++i) gy.data[i] = std::fabs(g.data[i] * y.data[i]);
  const ref::HostTensor dots = ref::reduce(gy, {dim}, true, false);
  ref::HostTensor bscale(x.shape);
  const ref::HostTensor dots_full = ref::expand(dots, x.shape);
  for (size_t i = 0; i < bscale.data.size(); ++i)
    bscale.data[i] = y.data[i] * (std::fabs(g.data[i]) + dots_full.data[i]) + 1e-6;
  EXPECT_TRUE(all_close(ops::softmax_backward(upload(g), upload(y), dim), ref::softmax_backward(g, y, dim), 0, 1e-6,
                        &bscale))
      << "softmax_backward";
}

TEST_P(SoftmaxCases, MatchesReference) {
  const Case c = GetParam();
  check(random_host(c.shape, -c.magnitude, c.magnitude), c.dim);
}

INSTANTIATE_TEST_SUITE_P(Awkward, SoftmaxCases,
                         ::testing::Values(Case{{1}, 0, 3}, Case{{7}, -1, 3}, Case{{3, 1000}, -1, 5},
                                           Case{{5, 17, 3}, 1, 5}, Case{{5, 17, 3}, 0, 5}, Case{{2, 3, 257}, 2, 8},
                                           Case{{4, 31}, -1, 1e4}, Case{{1, 1}, 1, 1}, Case{{2, 1, 3}, 1, 2},
                                           // Short rows, several to a workgroup (attention scores).
                                           Case{{37, 128}, -1, 6}, Case{{3, 9, 64}, -1, 4}, Case{{101, 5}, 1, 3},
                                           Case{{7, 130, 2}, 1, 3}));

TEST(Softmax, ManyRowsUseA2DGrid) {
  // More rows than one grid dimension holds (65535).
  check(random_host({66000, 3}, -4, 4), -1);
}

TEST(Softmax, MaskedEntries) {
  // -inf entries (an attention mask) get probability 0; a row that is all -inf is NaN, as in PyTorch.
  auto x = random_host({3, 6}, -2, 2);
  const double ninf = -std::numeric_limits<double>::infinity();
  x.data[0] = ninf;
  x.data[4] = ninf;
  for (int j = 0; j < 6; ++j) x.data[12 + j] = ninf;
  const Tensor y = ops::softmax(upload(x), -1);
  const auto got = y.to_host_f32();
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[4], 0.0f);
  for (int j = 0; j < 6; ++j) EXPECT_TRUE(std::isnan(got[12 + j]));
  const auto want = ref::softmax(x, -1, false);
  for (int i = 6; i < 12; ++i) EXPECT_NEAR(got[i], want.data[i], 1e-6);
}

TEST(Softmax, CausalRowsMatchAMaskedSoftmax) {
  for (const Shape& shape : {Shape{3, 7, 7}, Shape{2, 1, 1}, Shape{2, 130, 130}, Shape{1, 2, 5, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    const auto x = random_host(shape, -4, 4);
    auto masked = x;
    const int64_t T = shape.back();
    for (size_t i = 0; i < masked.data.size(); ++i)
      if (static_cast<int64_t>(i) % T > static_cast<int64_t>(i) / T % T)
        masked.data[i] = -std::numeric_limits<double>::infinity();
    EXPECT_TRUE(all_close(ops::softmax(upload(x), -1, true), ref::softmax(masked, -1, false), 1e-6, 1e-5));
  }
  EXPECT_THROW(ops::softmax(upload(random_host({2, 3, 4})), -1, true), ArgumentError);  // not square
  EXPECT_THROW(ops::softmax(upload(random_host({3, 3})), 0, true), ArgumentError);      // not the last dim
}

TEST(Softmax, StridedInput) {
  const auto x = random_host({6, 5}, -3, 3);
  const Tensor xt = upload(x).transpose(0, 1);  // [5, 6] view
  ref::HostTensor xtr({5, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) xtr.data[j * 6 + i] = x.data[i * 5 + j];
  EXPECT_TRUE(all_close(ops::softmax(xt, 1), ref::softmax(xtr, 1, false), 1e-6, 1e-5));
}

TEST(Softmax, BackwardRejectsMismatchedShapes) {
  EXPECT_THROW(ops::softmax_backward(upload(random_host({2, 3})), upload(random_host({3, 2}))), ArgumentError);
}

TEST(Softmax, RejectsBadDim) {
  EXPECT_THROW(ops::softmax(upload(random_host({2, 3})), 2), ArgumentError);
  EXPECT_THROW(ops::log_softmax(upload(random_host({2, 3})), -3), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
