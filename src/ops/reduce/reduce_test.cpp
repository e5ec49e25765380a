// sum and mean over dims against the float64 reference.
// Tolerance: |y - ref| <= 1e-30 + 2^-17 sum|x| (fp32 partial sums over at most a few thousand terms) for sum, and
// the same divided by the count for mean.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/common.h"
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
  std::vector<int> dims;
  bool keepdim;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << shape_str(c.shape) << " dims {";
  for (size_t i = 0; i < c.dims.size(); ++i) *os << (i ? "," : "") << c.dims[i];
  *os << "}" << (c.keepdim ? " keepdim" : "");
}

class ReduceCases : public ::testing::TestWithParam<Case> {};

void check(const ref::HostTensor& x, const Tensor& xt, const std::vector<int>& dims, bool keepdim) {
  const auto abs_sum = ref::reduce_abs(x, dims, keepdim);
  EXPECT_TRUE(all_close(ops::sum(xt, dims, keepdim), ref::reduce(x, dims, keepdim, false), 1e-30,
                        std::ldexp(1.0, -17), &abs_sum))
      << "sum";
  const auto want_mean = ref::reduce(x, dims, keepdim, true);
  ref::HostTensor mean_scale = abs_sum;
  const double count = x.numel() / std::max<double>(1.0, static_cast<double>(abs_sum.numel()));
  for (auto& v : mean_scale.data) v /= count;
  EXPECT_TRUE(all_close(ops::mean(xt, dims, keepdim), want_mean, 1e-30, std::ldexp(1.0, -17), &mean_scale))
      << "mean";
}

TEST_P(ReduceCases, MatchesReference) {
  const Case c = GetParam();
  const auto x = random_host(c.shape);
  check(x, upload(x), c.dims, c.keepdim);
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, ReduceCases,
    ::testing::Values(Case{{1}, {}, false}, Case{{1000}, {}, false}, Case{{100003}, {0}, true},
                      Case{{3, 5, 7}, {1}, false}, Case{{3, 5, 7}, {0, 2}, true}, Case{{3, 5, 7}, {}, true},
                      Case{{64, 3}, {1}, false}, Case{{3, 200}, {0}, false}, Case{{300, 70}, {0}, false},
                      Case{{2, 3, 4, 5}, {-1, 1}, false}, Case{{7, 1, 9}, {1}, false}, Case{{5, 4099}, {1}, true},
                      Case{{2, 2, 2, 2, 2, 2, 2, 3}, {0, 2, 4, 6}, false},
                      // Rows of 65 to a few hundred: several outputs share a workgroup.
                      Case{{37, 128}, {1}, true}, Case{{300, 70}, {1}, false}, Case{{3, 200, 5}, {1}, false},
                      Case{{1, 65}, {-1}, false},
                      // Sums over rows (outputs side by side: one thread per output and part): a norm's weight
                      // gradient at the base model's size; parts summed in up to four stages; a 3-d batch.
                      Case{{8192, 640}, {0}, false}, Case{{70000, 5}, {0}, true}, Case{{2000, 3, 33}, {0, 1}, false},
                      Case{{65, 300}, {0}, false}, Case{{4, 50, 257}, {1}, true}));

TEST(Reduce, StridedInput) {
  const auto x = random_host({20, 30});
  const Tensor xt = upload(x).transpose(0, 1);  // [30, 20]
  ref::HostTensor xtr({30, 20});
  for (int i = 0; i < 20; ++i)
    for (int j = 0; j < 30; ++j) xtr.data[j * 20 + i] = x.data[i * 30 + j];
  check(xtr, xt, {1}, false);
  check(xtr, xt, {0}, true);
}

TEST(Reduce, EmptyReduction) {
  // A dim of size 0: sums are 0, means NaN (as in PyTorch).
  const Tensor x = upload(random_host({3, 0}));
  const auto s = ops::sum(x, {1}).to_host_f32();
  const auto m = ops::mean(x, {1}).to_host_f32();
  ASSERT_EQ(s.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i], 0.0f);
    EXPECT_TRUE(std::isnan(m[i]));
  }
}

// A sum over rows written into a slice of a larger buffer (a parameter's gradient at an offset in the gradients'
// arena), added to what it held or replacing it: on the one-pass path (64 rows or fewer), the columns' two stages
// (8192 rows), and the segments' path (a transposed view). Elements outside the slice keep their bits. Tolerance as
// above, the old values' magnitudes added to the scale.
TEST(Reduce, SumRowsIntoAnOffsetAddsOrReplaces) {
  for (const auto& [rows, cols, transposed] : {std::tuple{50, 33, false}, std::tuple{8192, 640, false},
                                               std::tuple{300, 70, true}, std::tuple{1, 5, false}}) {
    for (const bool accumulate : {true, false}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (transposed ? " transposed" : "") +
                   (accumulate ? ", accumulate" : ", replace"));
      const auto x = random_host(transposed ? Shape{cols, rows} : Shape{rows, cols});
      ref::HostTensor xr({rows, cols});  // x as the op reads it
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          xr.data[r * cols + c] = transposed ? x.data[c * rows + r] : x.data[r * cols + c];
      const auto arena = random_host({cols + 7});
      const Tensor arena_t = upload(arena), into = arena_t.slice(0, 3, 3 + cols);
      const Tensor xt = transposed ? upload(x).transpose(0, 1) : upload(x);
      ops::detail::sum_rows_into("test", xt, into, accumulate);
      ref::HostTensor want = arena, scale({cols + 7});
      const auto sums = ref::reduce(xr, {0}, false, false), abs_sums = ref::reduce_abs(xr, {0}, false);
      for (int64_t c = 0; c < cols; ++c) {
        want.data[3 + c] = (accumulate ? arena.data[3 + c] : 0.0) + sums.data[c];
        scale.data[3 + c] = abs_sums.data[c] + (accumulate ? std::fabs(arena.data[3 + c]) : 0.0);
      }
      EXPECT_TRUE(all_close(arena_t, want, 1e-30, std::ldexp(1.0, -17), &scale));
      const auto got = arena_t.to_host_f32();
      for (const int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{cols} + 3, int64_t{cols} + 6})
        EXPECT_EQ(got[i], static_cast<float>(arena.data[i])) << "outside the slice, at " << i;
    }
  }
  const Tensor x = upload(random_host({4, 5}));
  EXPECT_THROW(ops::detail::sum_rows_into("test", x, upload(random_host({4})), true), ArgumentError);
  EXPECT_THROW(ops::detail::sum_rows_into("test", x, upload(random_host({10})).slice(0, 0, 10, 2), true),
               ArgumentError);
  EXPECT_THROW(ops::detail::sum_rows_into("test", x, x.slice(0, 0, 1).reshape({5}), true), ArgumentError);
}

TEST(Reduce, RejectsBadDims) {
  const Tensor x = upload(random_host({2, 3}));
  EXPECT_THROW(ops::sum(x, {2}), ArgumentError);
  EXPECT_THROW(ops::sum(x, {0, -2}), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
