// gather and embedding, exact against the reference; out-of-range indices are errors, found on the host where it
// knows the indices and on the GPU where it does not, and never read out of bounds.
#include <gtest/gtest.h>

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
using test::upload_i32;

TEST(Gather, AlongEveryDim) {
  const auto x = random_host({5, 7, 3});
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    const int d = dim < 0 ? dim + 3 : dim;
    Shape is = {4, 6, 2};  // smaller than x outside dim, any size along it
    is[d] = 9;
    const auto idx = random_ints(is, 0, static_cast<int>(x.shape[d]) - 1);
    EXPECT_TRUE(all_close(ops::gather(upload(x), dim, upload_i32(idx)), ref::gather(x, dim, idx), 0, 0));
  }
}

TEST(Gather, Int32InputAndStridedViews) {
  const auto x = random_ints({6, 4}, -1000, 1000);
  const auto idx = random_ints({4, 6}, 0, 3);
  // self transposed: gather rows of x^T.
  ref::HostTensor xt({4, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) xt.data[j * 6 + i] = x.data[i * 4 + j];
  EXPECT_TRUE(all_equal(ops::gather(upload_i32(x).transpose(0, 1), 0, upload_i32(idx)), ref::gather(xt, 0, idx)));
}

TEST(Embedding, LooksUpRows) {
  const auto w = random_host({50, 9});
  const auto idx = random_ints({3, 17}, 0, 49);
  EXPECT_TRUE(all_close(ops::embedding(upload(w), upload_i32(idx)), ref::embedding(w, idx), 0, 0));
  const auto one = random_ints({1}, 0, 49);
  EXPECT_TRUE(all_close(ops::embedding(upload(w), upload_i32(one)), ref::embedding(w, one), 0, 0));
}

TEST(Embedding, OutOfRangeIndexKnownOnTheHost) {
  const Tensor w = upload(random_host({10, 4}));
  for (int bad : {10, -1, 1000000}) {
    std::vector<int32_t> idx = {1, 2, bad, 3};
    try {
      ops::embedding(w, Tensor::from_host(test::device(), {4}, idx));
      FAIL() << "no error for " << bad;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 10)"), std::string::npos) << e.what();
    }
  }
}

TEST(Embedding, OutOfRangeIndexComputedOnTheGpu) {
  // Indices made on the GPU (here by an add) are unknown to the host: the kernel refuses them without reading and
  // the next read-back raises, naming the op.
  const Tensor w = upload(random_host({10, 4}));
  std::vector<int32_t> idx = {1, 2, 3, 4};
  const Tensor shifted = ops::add(Tensor::from_host(test::device(), {4}, idx), 6.0f);  // 7, 8, 9, 10
  const Tensor out = ops::embedding(w, shifted);
  try {
    out.to_host_f32();
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'embedding'"), std::string::npos) << e.what();
  }
  // The flag is cleared: in-range work afterwards reads back fine.
  const Tensor ok = ops::embedding(w, ops::add(Tensor::from_host(test::device(), {4}, idx), 5.0f));
  EXPECT_EQ(ok.to_host_f32().size(), 16u);
}

TEST(Gather, PartialViewOfKnownIndicesDefersToTheGpuCheck) {
  // The uploaded tensor holds a bad value outside the view used: no error, since the view never reaches it.
  const Tensor x = upload(random_host({4, 3}));
  std::vector<int32_t> idx = {0, 1, 2, 3, 99, 99};
  const Tensor all = Tensor::from_host(test::device(), {2, 3}, idx);
  const Tensor y = ops::gather(x, 0, all.slice(0, 0, 1));
  EXPECT_EQ(y.to_host_f32().size(), 3u);
  // The other row reaches it: the GPU check catches it.
  EXPECT_THROW(ops::gather(x, 0, all.slice(0, 1, 2)).to_host_f32(), ArgumentError);
}

TEST(Gather, RejectsBadShapes) {
  const Tensor x = upload(random_host({4, 3}));
  EXPECT_THROW(ops::gather(x, 0, upload_i32(random_ints({2}, 0, 1))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 0, upload_i32(random_ints({2, 4}, 0, 1))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 0, upload(random_host({2, 3}))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 2, upload_i32(random_ints({2, 3}, 0, 1))), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
