// Unary math, backward maps and int32 arithmetic against the float64 reference.
// Tolerances, from WGSL's accuracy rules: exact for neg, abs, sign; |y - ref| <= 1e-6 + 4e-6 |ref| for exp, log,
// sqrt, rsqrt, reciprocal, sigmoid, silu, tanh, pow and the backward maps (a few ulp, plus exp's 2|x| ulp at
// |x| <= 4); sin and cos 2^-11 absolute, the bound WGSL gives on [-pi, pi].
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
using test::upload;

struct Tol {
  double atol, rtol;
};

Tol tolerance(const std::string& op) {
  if (op == "neg" || op == "abs" || op == "sign") return {0, 0};
  if (op == "sin" || op == "cos") return {std::ldexp(1.0, -11), 0};
  return {1e-6, 4e-6};
}

// Inputs inside each op's domain.
std::pair<double, double> domain(const std::string& op) {
  if (op == "log" || op == "sqrt" || op == "rsqrt" || op == "reciprocal") return {0.05, 4.0};
  if (op == "sin" || op == "cos") return {-3.14, 3.14};
  return {-4.0, 4.0};
}

TEST(Unary, EveryOpMatchesReference) {
  for (const std::string& op : ops::unary_op_names()) {
    if (op == "pow.Scalar") continue;  // below, per exponent
    SCOPED_TRACE(op);
    const auto [lo, hi] = domain(op);
    for (const Shape& shape : {Shape{1}, Shape{1031}, Shape{3, 1, 17}, Shape{16, 64}}) {  // the last: vec4
      const auto x = random_host(shape, lo, hi);
      const Tol t = tolerance(op);
      EXPECT_TRUE(all_close(ops::unary(op, upload(x)), ref::unary(op.c_str(), x), t.atol, t.rtol)) << shape_str(shape);
    }
  }
}

TEST(Unary, StridedInput) {
  const auto x = random_host({9, 13}, 0.1, 3.0);
  const Tensor xt = upload(x).transpose(0, 1);
  ref::HostTensor xtr({13, 9});
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 13; ++j) xtr.data[j * 9 + i] = x.data[i * 13 + j];
  EXPECT_TRUE(all_close(ops::log(xt), ref::unary("log", xtr), 1e-6, 4e-6));
}

TEST(Unary, PowByScalar) {
  // Integer exponents take negative bases (with the sign PyTorch gives); 0 gives 1 everywhere, 0^0 included.
  for (double e : {2.0, 3.0, -1.0, -2.0, 0.0, 1.0}) {
    SCOPED_TRACE(e);
    auto x = random_host({257}, -3, 3);
    x.data[0] = 0.0;
    if (e < 0) x.data[0] = 0.5;
    EXPECT_TRUE(all_close(ops::pow(upload(x), e), ref::unary("pow.Scalar", x, e), 1e-6, 4e-6));
  }
  for (double e : {0.5, 1.5, -0.5, 2.25}) {
    SCOPED_TRACE(e);
    const auto x = random_host({100}, 0.05, 3);
    EXPECT_TRUE(all_close(ops::pow(upload(x), e), ref::unary("pow.Scalar", x, e), 1e-6, 4e-6));
  }
  // A negative base with a fractional exponent is NaN, as in PyTorch.
  const auto y = ops::pow(upload(ref::HostTensor({1}, {-2.0})), 0.5).to_host_f32();
  EXPECT_TRUE(std::isnan(y[0]));
}

TEST(Unary, BackwardMaps) {
  const auto g = random_host({5, 41}), x = random_host({5, 41}, -4, 4), y = random_host({5, 41}, 0.01, 0.99);
  EXPECT_TRUE(all_close(ops::silu_backward(upload(g), upload(x)), ref::binary("silu_backward", g, x), 1e-6, 4e-6));
  EXPECT_TRUE(all_close(ops::sigmoid_backward(upload(g), upload(y)), ref::binary("sigmoid_backward", g, y), 1e-6,
                        4e-6));
  EXPECT_TRUE(all_close(ops::tanh_backward(upload(g), upload(y)), ref::binary("tanh_backward", g, y), 1e-6, 4e-6));
  // silu_backward is the derivative of silu: compare with a central difference of the GPU's own silu.
  const double h = 1e-2;
  ref::HostTensor xp = x, xm = x, ones(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    xp.data[i] = x.data[i] + h;
    xm.data[i] = x.data[i] - h;
    ones.data[i] = 1.0;
  }
  const auto fp = ops::silu(upload(xp)).to_host_f32(), fm = ops::silu(upload(xm)).to_host_f32();
  const auto d = ops::silu_backward(upload(ones), upload(x)).to_host_f32();
  for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], (fp[i] - fm[i]) / (2 * h), 2e-3) << i;
}

TEST(Unary, MaximumMinimum) {
  const auto a = random_host({4, 1, 6}), b = random_host({3, 1});
  EXPECT_TRUE(all_close(ops::maximum(upload(a), upload(b)), ref::binary("maximum", a, b), 0, 0));
  EXPECT_TRUE(all_close(ops::minimum(upload(a), upload(b)), ref::binary("minimum", a, b), 0, 0));
}

TEST(Int32, ArithmeticIsExact) {
  const auto a = test::random_ints({7, 19}, -100000, 100000), b = test::random_ints({19}, -300, 300);
  const Tensor ta = test::upload_i32(a), tb = test::upload_i32(b);
  EXPECT_TRUE(all_equal(ops::add(ta, tb, 3.0f), ref::binary("add", a, b, 3.0)));
  EXPECT_TRUE(all_equal(ops::sub(ta, tb), ref::binary("sub", a, b)));
  EXPECT_TRUE(all_equal(ops::mul(ta, tb), ref::binary("mul", a, b)));
  EXPECT_TRUE(all_equal(ops::add(ta, -7.0f), ref::binary_scalar("add", a, -7)));
  EXPECT_TRUE(all_equal(ops::neg(ta), ref::unary("neg", a)));
  EXPECT_TRUE(all_equal(ops::abs(ta), ref::unary("abs", a)));
  const auto c = test::random_ints({4, 16}, -1000, 1000), d = test::random_ints({4, 16}, -1000, 1000);  // vec4
  EXPECT_TRUE(all_equal(ops::sub(test::upload_i32(c), test::upload_i32(d), 2.0f), ref::binary("sub", c, d, 2.0)));
  EXPECT_THROW(ops::div(ta, tb), ArgumentError);
  EXPECT_THROW(ops::exp(ta), ArgumentError);
  EXPECT_THROW(ops::add(ta, 0.5f), ArgumentError);
  EXPECT_THROW(ops::add(ta, upload(random_host({19}))), ArgumentError);  // no implicit promotion
}

}  // namespace
}  // namespace wgtrain
