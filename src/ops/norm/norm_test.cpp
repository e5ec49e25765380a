// rms_norm and rms_norm_backward against the float64 reference, at row lengths that give one to many rows per
// workgroup. Tolerances: y and dx |err| <= 1e-6 + 2e-5 |ref| (float32 row sums); dweight, a sum over rows,
// |err| <= 1e-5 (sum over rows of |dy x rstd|) + 1e-6.
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

class RmsNormCases : public ::testing::TestWithParam<Shape> {};

// t's elements as a view `at` floats into a buffer of its own.
Tensor view_at(const ref::HostTensor& t, int64_t at) {
  ref::HostTensor padded({t.numel() + at});
  std::copy(t.data.begin(), t.data.end(), padded.data.begin() + at);
  return upload(padded).slice(0, at, t.numel() + at).reshape(t.shape);
}

TEST_P(RmsNormCases, ForwardAndBackwardMatchTheReference) {
  const Shape shape = GetParam();
  const int64_t dim = shape.back();
  const double eps = 1e-5;
  const auto x = random_host(shape, -3, 3), w = random_host({dim}, 0.5, 1.5), dy = random_host(shape);
  const ref::RmsNormRef want = ref::rms_norm(x, w, eps);
  const Tensor xt = upload(x), wt = upload(w);
  const ops::RmsNorm got = ops::rms_norm(xt, wt, eps);
  EXPECT_TRUE(all_close(got.y, want.y, 1e-6, 2e-5)) << "y";
  EXPECT_TRUE(all_close(got.rstd, want.rstd, 1e-6, 2e-5)) << "rstd";

  const ref::RmsNormGradRef g = ref::rms_norm_backward(dy, x, w, eps);
  const ops::RmsNormGrads gg = ops::rms_norm_backward(upload(dy), xt, wt, got.rstd);
  EXPECT_TRUE(all_close(gg.dx, g.dx, 1e-6, 2e-5)) << "dx";
  ref::HostTensor scale({dim});
  for (int64_t r = 0; r < x.numel() / dim; ++r)
    for (int64_t j = 0; j < dim; ++j)
      scale.data[j] += std::fabs(dy.data[r * dim + j] * x.data[r * dim + j] * want.rstd.data[r]);
  EXPECT_TRUE(all_close(gg.dweight, g.dweight, 1e-6, 1e-5, &scale)) << "dweight";
  {
    // dweight added into a parameter's gradient buffer: a slice at an offset of a larger one, the rest untouched.
    const auto arena = random_host({dim + 5});
    const Tensor arena_t = upload(arena), acc = arena_t.slice(0, 2, 2 + dim);
    const ops::RmsNormGrads into = ops::rms_norm_backward(upload(dy), xt, wt, got.rstd, nullptr, &acc);
    EXPECT_EQ(into.dweight.storage(), arena_t.storage()) << "dweight is the buffer it was added into";
    ref::HostTensor want_arena = arena, arena_scale({dim + 5});
    for (int64_t j = 0; j < dim; ++j) {
      want_arena.data[2 + j] += g.dweight.data[j];
      arena_scale.data[2 + j] = scale.data[j] + std::fabs(arena.data[2 + j]);
    }
    EXPECT_TRUE(all_close(arena_t, want_arena, 1e-6, 1e-5, &arena_scale)) << "dweight added into a buffer";
    EXPECT_TRUE(all_close(into.dx, g.dx, 1e-6, 2e-5)) << "dx beside dweight_acc";
  }

  // dx joined with another gradient of x (the residual stream's) in the same pass; the addend read as a view at an
  // offset, and left as it was. At 4 floats in, rows whose length is a multiple of 4 stay whole vec4s; 3 floats in
  // takes the kernels' float path.
  const auto add = random_host(shape);
  ref::HostTensor want_dx = g.dx;
  for (size_t i = 0; i < want_dx.data.size(); ++i) want_dx.data[i] += add.data[i];
  ref::HostTensor dx_scale = want_dx;
  for (size_t i = 0; i < dx_scale.data.size(); ++i)
    dx_scale.data[i] = std::fabs(g.dx.data[i]) + std::fabs(add.data[i]);
  for (const int64_t at : {3, 4}) {
    SCOPED_TRACE("views " + std::to_string(at) + " floats in");
    const Tensor addend = view_at(add, at), xv = view_at(x, at);
    const ops::RmsNormGrads joined = ops::rms_norm_backward(upload(dy), xt, wt, got.rstd, &addend);
    EXPECT_TRUE(all_close(joined.dx, want_dx, 1e-6, 2e-5, &dx_scale)) << "dx + addend";
    EXPECT_TRUE(all_close(joined.dweight, g.dweight, 1e-6, 1e-5, &scale)) << "dweight beside the addend";
    EXPECT_TRUE(all_close(addend, add, 0, 0)) << "the addend is only read";
    // The forward and the backward of an input read as such a view.
    const ops::RmsNorm from_view = ops::rms_norm(xv, wt, eps);
    EXPECT_TRUE(all_close(from_view.y, want.y, 1e-6, 2e-5)) << "y of a view";
    const ops::RmsNormGrads of_view = ops::rms_norm_backward(upload(dy), xv, wt, from_view.rstd);
    EXPECT_TRUE(all_close(of_view.dx, g.dx, 1e-6, 2e-5)) << "dx of a view";
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, RmsNormCases,
                         ::testing::Values(Shape{1}, Shape{1, 7}, Shape{3, 4, 5}, Shape{37, 128}, Shape{5, 1000},
                                           Shape{2, 3, 257}, Shape{301, 24}, Shape{1, 4099},
                                           // several rows a segment, the last segment short
                                           Shape{2050, 3}, Shape{1101, 640}, Shape{5, 410, 7}, Shape{4099, 64}));

TEST(RmsNorm, StridedInputAndBadShapes) {
  const auto x = random_host({6, 5}), w = random_host({6}, 0.5, 1.5);
  ref::HostTensor xt({5, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) xt.data[j * 6 + i] = x.data[i * 5 + j];
  EXPECT_TRUE(all_close(ops::rms_norm(upload(x).transpose(0, 1), upload(w), 1e-6).y, ref::rms_norm(xt, w, 1e-6).y,
                        1e-6, 2e-5));
  EXPECT_THROW(ops::rms_norm(upload(x), upload(w), 1e-5), ArgumentError);  // weight [6] for rows of 5
  EXPECT_THROW(ops::rms_norm(upload(xt), upload(w), 0.0), ArgumentError);
  const ops::RmsNorm n = ops::rms_norm(upload(xt), upload(w), 1e-5);
  EXPECT_THROW(ops::rms_norm_backward(upload(random_host({5, 5})), upload(xt), upload(w), n.rstd), ArgumentError);
  EXPECT_THROW(ops::rms_norm_backward(upload(xt), upload(xt), upload(w), upload(random_host({6}))), ArgumentError);
  const Tensor wrong = upload(random_host({6, 5}));
  EXPECT_THROW(ops::rms_norm_backward(upload(xt), upload(xt), upload(w), n.rstd, &wrong), ArgumentError);
  const Tensor wrong_acc = upload(random_host({5}));
  EXPECT_THROW(ops::rms_norm_backward(upload(xt), upload(xt), upload(w), n.rstd, nullptr, &wrong_acc), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
