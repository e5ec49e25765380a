// add, sub, mul, div (tensor-tensor with broadcasting, tensor-scalar) against the float64 reference.
// Tolerance: add/sub |y - ref| <= 2^-23 (|a| + |alpha b|) (one or two f32 roundings); mul 2^-23 |ref|;
// div 2^-21 |ref| (WGSL allows 2.5 ulp for division).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::random_host;
using test::upload;

Tensor gpu(const char* op, const Tensor& a, const Tensor& b, float alpha) {
  if (!std::strcmp(op, "add")) return ops::add(a, b, alpha);
  if (!std::strcmp(op, "sub")) return ops::sub(a, b, alpha);
  if (!std::strcmp(op, "mul")) return ops::mul(a, b);
  return ops::div(a, b);
}

Tensor gpu_scalar(const char* op, const Tensor& a, float s) {
  if (!std::strcmp(op, "add")) return ops::add(a, s);
  if (!std::strcmp(op, "sub")) return ops::sub(a, s);
  if (!std::strcmp(op, "mul")) return ops::mul(a, s);
  return ops::div(a, s);
}

// Per-element error scale for one op.
ref::HostTensor scale_for(const char* op, const ref::HostTensor& a, const ref::HostTensor& b, double alpha,
                          const ref::HostTensor& want) {
  ref::HostTensor s(want.shape);
  const bool additive = !std::strcmp(op, "add") || !std::strcmp(op, "sub");
  const double ulps = !std::strcmp(op, "div") ? 4.0 : 1.0;
  if (additive) {
    const auto ea = ref::expand(a, want.shape), eb = ref::expand(b, want.shape);
    for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = std::fabs(ea.data[i]) + std::fabs(alpha * eb.data[i]);
  } else {
    for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = ulps * std::fabs(want.data[i]);
  }
  return s;
}

struct Case {
  Shape a, b;
};

void PrintTo(const Case& c, std::ostream* os) { *os << shape_str(c.a) << " with " << shape_str(c.b); }

class BinaryCases : public ::testing::TestWithParam<Case> {};

TEST_P(BinaryCases, AllOpsMatchReference) {
  const Case c = GetParam();
  const auto a = random_host(c.a);
  auto b = random_host(c.b);
  for (const char* op : {"add", "sub", "mul", "div"}) {
    SCOPED_TRACE(op);
    const double alpha = std::strcmp(op, "sub") == 0 ? -0.75 : (std::strcmp(op, "add") == 0 ? 2.5 : 1.0);
    auto bb = b;
    if (!std::strcmp(op, "div"))
      for (auto& v : bb.data) v = static_cast<float>(std::copysign(std::fabs(v) + 0.25, v));  // away from 0
    const auto want = ref::binary(op, a, bb, alpha);
    const auto scale = scale_for(op, a, bb, alpha, want);
    EXPECT_TRUE(all_close(gpu(op, upload(a), upload(bb), static_cast<float>(alpha)), want, 1e-30,
                          std::ldexp(1.0, -23), &scale));
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, BinaryCases,
                         ::testing::Values(Case{{1}, {1}}, Case{{257}, {257}}, Case{{3, 5, 7}, {3, 5, 7}},
                                           Case{{4, 1, 3}, {5, 1}}, Case{{1}, {6, 7}}, Case{{6, 7}, {}},
                                           Case{{2, 1, 3, 1, 2, 1, 2, 3}, {3, 4, 1, 5, 2, 1}},
                                           Case{{70001}, {1}}, Case{{13, 1}, {1, 11}},
                                           // dense and a multiple of 4: the vec4 form of the kernel
                                           Case{{4, 64}, {4, 64}}, Case{{8}, {8}}));

TEST(Binary, ScalarForms) {
  const auto a = random_host({5, 37});
  for (const char* op : {"add", "sub", "mul", "div"}) {
    SCOPED_TRACE(op);
    const double s = -1.75;
    const auto want = ref::binary_scalar(op, a, s);
    const ref::HostTensor bs({}, {s});
    const auto scale = scale_for(op, a, bs, 1.0, want);
    EXPECT_TRUE(all_close(gpu_scalar(op, upload(a), static_cast<float>(s)), want, 1e-30, std::ldexp(1.0, -23),
                          &scale));
  }
}

TEST(Binary, StridedOperands) {
  // a transposed, b a slice: the general indexing path.
  const auto a = random_host({8, 6}), bw = random_host({6, 10});
  const Tensor at = upload(a).transpose(0, 1);    // [6, 8]
  const Tensor bt = upload(bw).slice(1, 1, 9);    // [6, 8]
  ref::HostTensor ah({6, 8}), bh({6, 8});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 8; ++j) {
      ah.data[i * 8 + j] = a.data[j * 6 + i];
      bh.data[i * 8 + j] = bw.data[i * 10 + 1 + j];
    }
  const auto want = ref::binary("mul", ah, bh);
  const auto scale = scale_for("mul", ah, bh, 1.0, want);
  EXPECT_TRUE(all_close(ops::mul(at, bt), want, 1e-30, std::ldexp(1.0, -23), &scale));
}

TEST(Binary, RejectsShapesThatDoNotBroadcast) {
  try {
    ops::add(upload(random_host({3, 4})), upload(random_host({5})));
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("[3, 4]"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> ints(4, 1);
  EXPECT_THROW(ops::add(Tensor::from_host(test::device(), {4}, ints), upload(random_host({4}))), ArgumentError);
}

TEST(Binary, EmptyTensors) {
  EXPECT_EQ(ops::add(upload(random_host({0, 3})), upload(random_host({1, 3}))).shape(), (Shape{0, 3}));
}

}  // namespace
}  // namespace wgtrain
