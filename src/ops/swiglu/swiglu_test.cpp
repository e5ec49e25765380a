// swiglu and swiglu_backward against the float64 reference: lengths on and off the 16-byte path, offset and
// transposed views, gates far into silu's tails. Tolerances (exp within a few ulp of |g|, then a few products):
// out |err| <= 1e-12 + 4e-6 |gate up| (1 + |gate|); d_up the same with |d gate|; d_gate, whose factor
// 1 + g (1 - s) cancels near g = -1.28, |err| <= 1e-12 + 1e-5 |d up| (1 + |gate|).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::random_host;
using test::upload;

ref::HostTensor scale_of(const ref::HostTensor& a, const ref::HostTensor& b, const ref::HostTensor& gate) {
  ref::HostTensor s(a.shape);
  for (size_t i = 0; i < s.data.size(); ++i)
    s.data[i] = std::fabs(a.data[i] * b.data[i]) * (1.0 + std::fabs(gate.data[i]));
  return s;
}

void expect_matches(const ref::HostTensor& gate, const ref::HostTensor& up, const ref::HostTensor& dy,
                    const Tensor& gt, const Tensor& ut, const Tensor& dyt) {
  const ref::HostTensor want = ref::swiglu(gate, up);
  auto s = scale_of(gate, up, gate);
  EXPECT_TRUE(all_close(ops::swiglu(gt, ut), want, 1e-12, 4e-6, &s)) << "out";
  const ref::SwigluGradRef g = ref::swiglu_backward(dy, gate, up);
  const ops::SwigluGrads got = ops::swiglu_backward(dyt, gt, ut);
  s = scale_of(dy, up, gate);
  EXPECT_TRUE(all_close(got.dgate, g.dgate, 1e-12, 1e-5, &s)) << "d_gate";
  s = scale_of(dy, gate, gate);
  EXPECT_TRUE(all_close(got.dup, g.dup, 1e-12, 4e-6, &s)) << "d_up";
}

class SwigluCases : public ::testing::TestWithParam<Shape> {};

TEST_P(SwigluCases, ForwardAndBackwardMatchTheReference) {
  const Shape shape = GetParam();
  const auto gate = random_host(shape, -8, 8), up = random_host(shape, -3, 3), dy = random_host(shape);
  expect_matches(gate, up, dy, upload(gate), upload(up), upload(dy));
}

// 15 and 1 element(s): one element a thread; 1028, 3 x 1729 rounded: 16-byte words (or not); past one
// workgroup's 256 and a second grid row's worth.
INSTANTIATE_TEST_SUITE_P(Awkward, SwigluCases,
                         ::testing::Values(Shape{1}, Shape{3, 5}, Shape{4, 257}, Shape{3, 1729}, Shape{2, 1728},
                                           Shape{5, 7, 1031}, Shape{70000}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           std::string name;
                           for (int64_t d : i.param) name += (name.empty() ? "" : "x") + std::to_string(d);
                           return name;
                         });

// Views: rows sliced at an offset that is not a whole 16-byte word (one element a thread), at one that is, and a
// transposed operand (made contiguous first).
TEST(Swiglu, ViewsAtOffsetsAndTransposed) {
  const auto gate = random_host({9, 12}, -6, 6), up = random_host({9, 12}), dy = random_host({9, 12});
  const Tensor g = upload(gate), u = upload(up), d = upload(dy);
  for (int64_t start : {1, 2}) {
    SCOPED_TRACE("rows from " + std::to_string(start));
    ref::HostTensor gs({9 - start, 12}), us({9 - start, 12}), ds({9 - start, 12});
    for (size_t i = 0; i < gs.data.size(); ++i) {
      gs.data[i] = gate.data[start * 12 + i];
      us.data[i] = up.data[start * 12 + i];
      ds.data[i] = dy.data[start * 12 + i];
    }
    expect_matches(gs, us, ds, g.slice(0, start, 9), u.slice(0, start, 9), d.slice(0, start, 9));
  }
  ref::HostTensor gt({12, 9});
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 12; ++c) gt.data[c * 9 + r] = gate.data[r * 12 + c];
  const Tensor gtt = upload(gt).transpose(0, 1);
  expect_matches(gate, up, dy, gtt, u, d);
}

// Gates of +-90 (exp(-90) is an f32 subnormal), +-20 and 0: no inf or NaN, silu's tails (0 and the identity).
TEST(Swiglu, GatesInSilusTails) {
  ref::HostTensor gate({8}), up({8}), dy({8});
  const double g[] = {90, -90, 20, -20, 0, 1e-3, -1.2785, 44};
  for (int i = 0; i < 8; ++i) {
    gate.data[i] = g[i];
    up.data[i] = 1.5 - 0.25 * i;
    dy.data[i] = 0.75 + 0.125 * i;
  }
  expect_matches(gate, up, dy, upload(gate), upload(up), upload(dy));
}

TEST(Swiglu, MismatchedShapesAndDtypesAreRefusedNamingThem) {
  const Tensor a = upload(random_host({3, 4})), b = upload(random_host({4, 3}));
  try {
    ops::swiglu(a, b);
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("up [4, 3] must have the shape of gate [3, 4]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::swiglu_backward(a, a, b), ArgumentError);
  const Tensor i = Tensor::empty(test::device(), {3, 4}, DType::I32);
  EXPECT_THROW(ops::swiglu(a, i), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
