// rope against the float64 reference: forward, inverse, scale, tables longer than T, odd sizes.
// Tolerance |err| <= 1e-6 (|a| + |b|) * scale: two float32 products and a sum.
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

ref::HostTensor angle_table(int64_t rows, int64_t half, bool sine) {
  ref::HostTensor t({rows, half});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(r) * std::pow(10000.0, -2.0 * static_cast<double>(i) / (2.0 * half));
      t.data[r * half + i] = static_cast<float>(sine ? std::sin(a) : std::cos(a));
    }
  return t;
}

struct Case {
  Shape shape;
  int64_t table_rows;
  bool inverse;
  double scale;
};

class RopeCases : public ::testing::TestWithParam<Case> {};

TEST_P(RopeCases, MatchesTheReference) {
  const Case c = GetParam();
  const int64_t half = c.shape.back() / 2;
  const auto x = random_host(c.shape, -2, 2);
  const auto cs = angle_table(c.table_rows, half, false), sn = angle_table(c.table_rows, half, true);
  const Tensor y = ops::rope(upload(x), upload(cs), upload(sn), c.inverse, c.scale);
  ref::HostTensor scale(x.shape);
  for (size_t i = 0; i < scale.data.size(); ++i) scale.data[i] = 4.0 * c.scale;  // |a| + |b| <= 4
  EXPECT_TRUE(all_close(y, ref::rope(x, cs, sn, c.inverse, c.scale), 0, 1e-6, &scale));
}

INSTANTIATE_TEST_SUITE_P(Awkward, RopeCases,
                         ::testing::Values(Case{{1, 1, 2}, 1, false, 1.0}, Case{{2, 7, 3, 6}, 9, false, 1.0},
                                           Case{{2, 7, 3, 6}, 7, true, 1.0}, Case{{3, 5, 2, 10}, 5, false, 0.25},
                                           Case{{1, 130, 1, 64}, 200, true, 0.125}, Case{{4, 1, 5, 2}, 1, false, 1.0},
                                           // four pairs a thread (halves of 8): the vec4 path
                                           Case{{2, 9, 5, 16}, 11, false, 0.5}, Case{{3, 4, 3, 8}, 4, true, 1.0}));

// x as a view 2 floats in (and the tables as views a row in): one pair a thread, though the halves are vec4s.
TEST(Rope, ViewsOffTheVec4GridTakeOnePairAThread) {
  const auto x = random_host({2, 5, 3, 16}, -2, 2);
  ref::HostTensor padded({x.numel() + 2});
  std::copy(x.data.begin(), x.data.end(), padded.data.begin() + 2);
  const Tensor xv = upload(padded).slice(0, 2, x.numel() + 2).reshape(x.shape);
  const auto cs = angle_table(7, 8, false), sn = angle_table(7, 8, true);
  for (const int64_t row : {0, 1}) {
    SCOPED_TRACE("tables from row " + std::to_string(row));
    const Tensor c = upload(cs).slice(0, row, 7), s = upload(sn).slice(0, row, 7);
    ref::HostTensor cs_r({7 - row, 8}), sn_r({7 - row, 8});
    std::copy(cs.data.begin() + row * 8, cs.data.end(), cs_r.data.begin());
    std::copy(sn.data.begin() + row * 8, sn.data.end(), sn_r.data.begin());
    ref::HostTensor scale(x.shape);
    for (auto& v : scale.data) v = 4.0;
    EXPECT_TRUE(all_close(ops::rope(xv, c, s), ref::rope(x, cs_r, sn_r, false, 1.0), 0, 1e-6, &scale));
  }
}

TEST(Rope, InverseUndoesTheRotation) {
  const auto x = random_host({2, 6, 3, 8});
  const Tensor cs = upload(angle_table(6, 4, false)), sn = upload(angle_table(6, 4, true));
  const Tensor back = ops::rope(ops::rope(upload(x), cs, sn), cs, sn, true);
  EXPECT_TRUE(all_close(back, x, 2e-6, 2e-6));
}

TEST(Rope, RejectsBadShapes) {
  const Tensor cs = upload(angle_table(4, 3, false)), sn = upload(angle_table(4, 3, true));
  EXPECT_THROW(ops::rope(upload(random_host({5, 2, 6})), cs, sn), ArgumentError);     // T = 5 > 4 table rows
  EXPECT_THROW(ops::rope(upload(random_host({4, 2, 5})), cs, sn), ArgumentError);     // odd head dim
  EXPECT_THROW(ops::rope(upload(random_host({4, 2, 8})), cs, sn), ArgumentError);     // tables for hd 6
  EXPECT_THROW(ops::rope(upload(random_host({2, 6})), cs, sn), ArgumentError);        // rank 2
}

}  // namespace
}  // namespace wgtrain
